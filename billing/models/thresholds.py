"""A tenant's own usage and spend thresholds and the crossings they recorded
(``billing.thresholds``: the rules; docs/billing/thresholds.md)."""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils.translation import gettext_lazy as _

from billing.choices import ThresholdKind
from common.querysets import TenantScopedQuerySet
from leases.models import Lease, Tenant


class Threshold(models.Model):
    """A line the tenant wants to hear about: the first sample of a billing period (the
    tenant's month) that takes the figure of ``kind`` to ``value`` or over it sends a
    signed webhook and an e-mail, once per period. ``lease`` empty: the tenant's leases
    together (spend and traffic summed, the 95th the highest of any lease)."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="thresholds", verbose_name=_("tenant")
    )
    lease = models.ForeignKey(
        Lease,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="thresholds",
        verbose_name=_("lease"),
        help_text=_("Empty: all the tenant's leases together."),
    )
    kind = models.CharField(_("kind"), max_length=16, choices=ThresholdKind.choices)
    value = models.DecimalField(
        _("value"),
        max_digits=14,
        decimal_places=2,
        validators=[MinValueValidator(Decimal("0.01"))],
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    created_at = models.DateTimeField(_("created at"))
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("created by"),
    )
    updated_at = models.DateTimeField(_("updated at"))

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("threshold")
        verbose_name_plural = _("thresholds")
        ordering = ["tenant", "kind", "value", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(value__gt=0), name="threshold_value_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.tenant} {self.kind} >= {self.value}"


class ThresholdCrossing(models.Model):
    """The first sample of a period that took a threshold's figure to its value or over:
    one row per threshold and period (the unique constraint is what makes it once, even
    for two evaluations racing), with what the tenant was told."""

    threshold = models.ForeignKey(
        Threshold,
        on_delete=models.CASCADE,
        related_name="crossings",
        verbose_name=_("threshold"),
    )
    period = models.CharField(_("period"), max_length=7, help_text=_("YYYY-MM"))
    value = models.DecimalField(_("threshold value"), max_digits=14, decimal_places=2)
    figure = models.DecimalField(_("figure"), max_digits=24, decimal_places=6)
    sample_at = models.DateTimeField(
        _("sample slot"), help_text=_("The newest traffic sample in the figures.")
    )
    crossed_at = models.DateTimeField(_("recorded at"))
    figures = models.JSONField(_("figures"), default=dict)
    emailed_at = models.DateTimeField(_("e-mailed at"), null=True, blank=True)
    webhook_sent_at = models.DateTimeField(_("webhook sent at"), null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "threshold__tenant"

    class Meta:
        verbose_name = _("threshold crossing")
        verbose_name_plural = _("threshold crossings")
        ordering = ["-crossed_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["threshold", "period"], name="one_crossing_per_threshold_and_period"
            )
        ]

    def __str__(self) -> str:
        return f"{self.threshold} {self.period}"
