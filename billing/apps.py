from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BillingConfig(AppConfig):
    name = "billing"
    verbose_name = _("SLA and billing")

    def ready(self) -> None:
        from benchmarks import hooks as benchmarks_hooks
        from billing import checks  # noqa: F401  (registers the system checks)
        from billing.audit_keys import published_keys
        from billing.checkpoints import archived_checkpoints
        from billing.ingest import recompute_hours
        from billing.metering import recent_samples
        from common import archives
        from telemetry import hooks as telemetry_hooks

        # What a month archive carries of billing's, and the keys it is checked against.
        archives.add_manifest_part(archived_checkpoints)
        archives.set_published_keys(published_keys)
        # The availability minutes hear telemetry: a poll's unavailable intervals recompute
        # the link rollups of the hours they touch.
        telemetry_hooks.on_unavailable_hours(recompute_hours)
        # The dispatcher defers heavy probes while a lease is busy, by its latest traffic.
        benchmarks_hooks.set_recent_traffic(recent_samples)
