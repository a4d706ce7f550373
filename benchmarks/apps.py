from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    verbose_name = _("Probes and measurements")
