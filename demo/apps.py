from django.apps import AppConfig


class DemoConfig(AppConfig):
    """``manage.py demo``: loads the whole demo (inventory and leases, measurement history,
    invoices), so it sits above every app it loads into (docs/architecture-layers.md)."""

    name = "demo"
