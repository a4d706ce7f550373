from decimal import Decimal

from django.db import models
from django.utils.translation import gettext_lazy as _

from billing.choices import InvoiceStatus, LineKind
from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from gpulease_verify.money import CURRENCY
from leases.models import Lease, Tenant


def _money(name: str) -> models.DecimalField:
    return models.DecimalField(name, max_digits=14, decimal_places=2, default=Decimal("0.00"))


class Invoice(TimeStampedModel):
    """One invoice per tenant and billing period (a calendar month in the tenant's zone).
    A draft can be recomputed at will and comes out the same; a finalised one never
    changes: what arrives later becomes an adjustment line on the next invoice."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="invoices", verbose_name=_("tenant")
    )
    period = models.CharField(_("period (YYYY-MM)"), max_length=7)
    period_start = models.DateTimeField(_("period start"))
    period_end = models.DateTimeField(_("period end"))
    status = models.CharField(
        _("status"), max_length=8, choices=InvoiceStatus.choices, default=InvoiceStatus.DRAFT
    )
    currency = models.CharField(_("currency"), max_length=3, default=CURRENCY)
    subtotal = _money(_("subtotal (¥)"))
    tax = _money(_("tax (¥)"))
    total = _money(_("total (¥)"))
    tax_rate_percent = models.DecimalField(_("tax rate (percent)"), max_digits=5, decimal_places=2)
    network_cost_share = models.DecimalField(
        _("network cost share"), max_digits=6, decimal_places=4, null=True, blank=True
    )
    finalised_at = models.DateTimeField(_("finalised at"), null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("invoice")
        verbose_name_plural = _("invoices")
        ordering = ["-period", "tenant"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "period"],
                name="one_invoice_per_tenant_and_period",
                violation_error_message=_("This tenant already has an invoice for this period."),
            )
        ]

    def __str__(self) -> str:
        return f"{self.tenant.slug} {self.period}"


class InvoiceLine(models.Model):
    invoice = models.ForeignKey(
        Invoice, on_delete=models.CASCADE, related_name="lines", verbose_name=_("invoice")
    )
    position = models.PositiveIntegerField(_("position"))
    lease = models.ForeignKey(
        Lease,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="invoice_lines",
        verbose_name=_("lease"),
    )
    kind = models.CharField(_("kind"), max_length=16, choices=LineKind.choices)
    description = models.CharField(_("description"), max_length=500)
    quantity = models.DecimalField(_("quantity"), max_digits=24, decimal_places=6)
    unit = models.CharField(_("unit"), max_length=32)
    unit_price = models.DecimalField(_("unit price (¥)"), max_digits=14, decimal_places=4)
    amount = _money(_("amount (¥)"))
    detail = models.JSONField(
        _("how it was computed"),
        default=dict,
        help_text=_("Inputs and steps, so that every figure can be traced to runs."),
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "invoice__tenant"

    class Meta:
        verbose_name = _("invoice line")
        verbose_name_plural = _("invoice lines")
        ordering = ["invoice", "position"]
        constraints = [
            models.UniqueConstraint(fields=["invoice", "position"], name="line_position_unique")
        ]

    def __str__(self) -> str:
        return f"{self.invoice} #{self.position} {self.description}"
