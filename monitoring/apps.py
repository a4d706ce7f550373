from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class MonitoringConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "monitoring"
    verbose_name = _("monitoring")

    def ready(self) -> None:
        # Celery task counters and the worker's own /metrics port (monitoring.celery_metrics).
        from monitoring import celery_metrics

        celery_metrics.connect()
