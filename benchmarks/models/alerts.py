from django.db import models
from django.utils.translation import gettext_lazy as _

from leases.models import Site


class SiteAlert(models.Model):
    """Raised by the self-check when a site's probe results stop arriving; cleared when
    they arrive again. At most one open alert per site and kind."""

    class Kind(models.TextChoices):
        RESULTS_STOPPED = "results_stopped", _("probe results stopped arriving")

    site = models.ForeignKey(
        Site, on_delete=models.CASCADE, related_name="alerts", verbose_name=_("site")
    )
    kind = models.CharField(_("kind"), max_length=32, choices=Kind.choices)
    message = models.TextField(_("message"))
    raised_at = models.DateTimeField(_("raised at"))
    cleared_at = models.DateTimeField(_("cleared at"), null=True, blank=True)

    class Meta:
        verbose_name = _("site alert")
        verbose_name_plural = _("site alerts")
        ordering = ["-raised_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["site", "kind"],
                condition=models.Q(cleared_at__isnull=True),
                name="one_open_alert_per_site_and_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.site}: {self.get_kind_display()}"
