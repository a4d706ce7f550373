from django.contrib import admin

from monitoring.models import ExternalAlert


@admin.register(ExternalAlert)
class ExternalAlertAdmin(admin.ModelAdmin):
    """Read-only: rows come from Alertmanager's webhook (monitoring.alertmanager)."""

    list_display = ["alertname", "subject", "status", "severity", "starts_at", "ends_at"]
    list_filter = ["status", "severity"]
    search_fields = ["alertname", "subject", "fingerprint"]
    readonly_fields = [field.name for field in ExternalAlert._meta.fields] + [
        "leases",
        "incidents",
    ]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None) -> bool:  # type: ignore[no-untyped-def]
        return False
