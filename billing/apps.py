from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = _("SLA and billing")

    def ready(self) -> None:
        from billing import checks  # noqa: F401  (registers the system checks)
        from billing.audit_keys import published_keys
        from billing.checkpoints import archived_checkpoints
        from common import archives

        # What a month archive carries of billing's, and the keys it is checked against.
        archives.add_manifest_part(archived_checkpoints)
        archives.set_published_keys(published_keys)
