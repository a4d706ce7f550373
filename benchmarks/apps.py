from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class BenchmarksConfig(AppConfig):
    name = "benchmarks"
    verbose_name = _("Probes and measurements")

    def ready(self) -> None:
        from benchmarks import links

        links.register()  # runs and rejudgements are links of the lease's chain
