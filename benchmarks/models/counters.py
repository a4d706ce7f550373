from django.db import models
from django.utils.translation import gettext_lazy as _

from leases.models import Site


class MissedRunCount(models.Model):
    """How many of a site's probe runs were ever marked missed: counted in the transaction
    that marks them (benchmarks.missed_slots.count_missed), so it only goes up. /metrics
    exports it as the counter ``gpulease_site_missed_runs_total``. A count of the missed
    rows would not do: archiving a month (common.archives) deletes its runs, the count
    drops, and Prometheus reads the drop as a counter reset and ``increase()`` as a burst
    of new misses."""

    site = models.OneToOneField(
        Site,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="missed_run_count",
        verbose_name=_("site"),
    )
    total = models.BigIntegerField(_("runs marked missed"), default=0)

    class Meta:
        verbose_name = _("missed run count")
        verbose_name_plural = _("missed run counts")

    def __str__(self) -> str:
        return f"{self.site}: {self.total}"
