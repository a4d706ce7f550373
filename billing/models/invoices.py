from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing.choices import CreditNoteKind, InvoiceEventKind, InvoiceStatus, LineKind
from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from gpulease_verify.calculations import RateGroup, invoice_totals_by_rate
from gpulease_verify.money import CURRENCY
from leases.models import Lease, Tenant


def _money(name: str) -> models.DecimalField:
    return models.DecimalField(name, max_digits=14, decimal_places=2, default=Decimal("0.00"))


# The only fields a billed invoice's row may still change, and only through
# billing.services: payment and voiding.
LIFECYCLE_FIELDS = frozenset({"status", "paid_at", "voided_at", "void_reason", "updated_at"})


class InvoiceImmutable(ValidationError):
    """An issued invoice (or a credit note) was about to be edited."""


def _immutable(document: str) -> InvoiceImmutable:
    return InvoiceImmutable(
        gettext(
            "%(document)s is issued and can never be edited; a correction is a credit note "
            "that references it."
        )
        % {"document": document}
    )


class Invoice(TimeStampedModel):
    """One invoice per tenant and billing period (a calendar month in the tenant's zone).
    A draft can be recomputed at will and comes out the same. Issuing numbers and dates
    it and freezes both parties' identities; from then on it never changes (``save``
    refuses): what arrives later becomes an adjustment line on the next draft, and a
    correction is a ``CreditNote``. Lifecycle: draft → issued → paid; issued → void."""

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
    tax_rate_percent = models.DecimalField(
        _("tax rate (percent)"),
        max_digits=5,
        decimal_places=2,
        null=True,
        blank=True,
        help_text=_(
            "The rate every line carries, when they share one; empty when the lines have "
            "different rates (tax is per rate group)."
        ),
    )
    network_cost_share = models.DecimalField(
        _("network cost share"), max_digits=6, decimal_places=4, null=True, blank=True
    )
    number = models.CharField(
        _("invoice number"), max_length=40, unique=True, null=True, blank=True, default=None
    )
    issued_at = models.DateTimeField(_("issued at"), null=True, blank=True)
    issue_date = models.DateField(_("issue date"), null=True, blank=True)
    due_date = models.DateField(_("due date"), null=True, blank=True)
    seller = models.JSONField(_("seller identity"), default=dict, blank=True)
    buyer = models.JSONField(_("buyer identity"), default=dict, blank=True)
    forced_reason = models.TextField(
        _("issued despite"),
        blank=True,
        help_text=_("Why it was issued while runs were unfinished or not yet ingested."),
    )
    forced_over = models.JSONField(
        _("refusals overridden"), default=list, blank=True, help_text=_("What forcing skipped.")
    )
    metering_gaps = models.JSONField(
        _("metering gaps reported at issue"),
        default=list,
        blank=True,
        help_text=_(
            "Nodes of its leases not read for longer than the reading reach in its period: "
            "their traffic over each gap is billed by time (billing.services.issue_warnings)."
        ),
    )
    paid_at = models.DateTimeField(_("paid at"), null=True, blank=True)
    voided_at = models.DateTimeField(_("voided at"), null=True, blank=True)
    void_reason = models.TextField(_("void reason"), blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("invoice")
        verbose_name_plural = _("invoices")
        ordering = ["-period", "tenant"]
        permissions = [
            ("issue_invoice", _("Can issue draft invoices")),
            ("void_invoice", _("Can void issued invoices")),
            ("mark_invoice_paid", _("Can mark invoices paid")),
            ("recompute_invoice", _("Can recompute draft invoices")),
            ("rerate_lease", _("Can re-rate a lease from corrected terms")),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "period"],
                condition=~Q(status="void"),
                name="one_invoice_per_tenant_and_period",
                violation_error_message=_("This tenant already has an invoice for this period."),
            )
        ]

    def __str__(self) -> str:
        return self.number or f"{self.tenant.slug} {self.period}"

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            stored = type(self).objects.filter(pk=self.pk).values_list("status", flat=True).first()
            if stored not in (None, InvoiceStatus.DRAFT):
                fields = kwargs.get("update_fields")
                if fields is None or not set(fields) <= LIFECYCLE_FIELDS:
                    raise _immutable(gettext("Invoice %(invoice)s") % {"invoice": self.label})
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.status != InvoiceStatus.DRAFT:
            raise _immutable(gettext("Invoice %(invoice)s") % {"invoice": self.label})
        return super().delete(*args, **kwargs)

    @property
    def tax_groups(self) -> tuple[RateGroup, ...]:
        """Subtotal and tax per VAT rate of its lines, by ascending rate (tax rounded once
        per group); they add up to the stored subtotal and tax."""
        lines = [(line.amount, line.tax_rate_percent) for line in self.lines.all()]
        return invoice_totals_by_rate(lines).groups

    @property
    def label(self) -> str:
        """How messages name it: its number once issued, tenant and period before."""
        name = f"{self.tenant.slug} {self.period}"
        return f"{self.number} ({name})" if self.number else name


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
    tax_rate_percent = models.DecimalField(
        _("tax rate (percent)"),
        max_digits=5,
        decimal_places=2,
        help_text=_("The VAT rate of the line's price component, from its terms version."),
    )
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

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self._refuse_unless_draft()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        self._refuse_unless_draft()
        return super().delete(*args, **kwargs)

    def _refuse_unless_draft(self) -> None:
        status = Invoice.objects.filter(pk=self.invoice_id).values_list("status", flat=True).first()
        if status not in (None, InvoiceStatus.DRAFT):
            raise _immutable(gettext("Invoice %(invoice)s") % {"invoice": self.invoice.label})


class DocumentCounter(models.Model):
    """The last number given in one gap-free series: (series, seller, year). Numbers are
    taken under this row's lock (``billing.services``) and never given back."""

    series = models.CharField(_("series"), max_length=16)
    seller_tax_id = models.CharField(_("seller tax ID"), max_length=32)
    year = models.PositiveIntegerField(_("year"))
    last = models.PositiveIntegerField(_("last number given"), default=0)

    class Meta:
        verbose_name = _("document counter")
        verbose_name_plural = _("document counters")
        constraints = [
            models.UniqueConstraint(
                fields=["series", "seller_tax_id", "year"], name="one_counter_per_series_year"
            )
        ]

    def __str__(self) -> str:
        return f"{self.series} {self.seller_tax_id} {self.year}: {self.last}"


class CreditNote(TimeStampedModel):
    """A credit note (红字发票): the correction of an issued invoice, which itself never
    changes. Issued when created, with its own number in its own gap-free series, its own
    date, both identities as the original invoice froze them, negative (or, reversing a
    credit, positive) lines at the rate the original line was taxed, and a reason."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="credit_notes", verbose_name=_("tenant")
    )
    invoice = models.ForeignKey(
        Invoice,
        on_delete=models.PROTECT,
        related_name="credit_notes",
        verbose_name=_("original invoice"),
    )
    number = models.CharField(_("credit note number"), max_length=40, unique=True)
    reason = models.TextField(_("reason"))
    kind = models.CharField(
        _("kind"),
        max_length=16,
        choices=CreditNoteKind.choices,
        default=CreditNoteKind.CORRECTION,
        help_text=_(
            "A correction is counted when the month is recomputed; a commercial credit "
            "never is, so it is never billed back."
        ),
    )
    full_reversal = models.BooleanField(
        _("full reversal"),
        default=False,
        help_text=_(
            "Issued without line corrections: it takes off whatever earlier credit notes "
            "left of every line (false for notes from before this was recorded)."
        ),
    )
    issued_at = models.DateTimeField(_("issued at"))
    issue_date = models.DateField(_("issue date"))
    currency = models.CharField(_("currency"), max_length=3, default=CURRENCY)
    subtotal = _money(_("subtotal (¥)"))
    tax = _money(_("tax (¥)"))
    total = _money(_("total (¥)"))
    seller = models.JSONField(_("seller identity"), default=dict)
    buyer = models.JSONField(_("buyer identity"), default=dict)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("credit note")
        verbose_name_plural = _("credit notes")
        ordering = ["-issued_at", "-id"]
        permissions = [("issue_credit_note", _("Can issue credit notes"))]

    def __str__(self) -> str:
        return self.number

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            raise _immutable(gettext("Credit note %(note)s") % {"note": self.number})
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise _immutable(gettext("Credit note %(note)s") % {"note": self.number})


class CreditNoteLine(models.Model):
    credit_note = models.ForeignKey(
        CreditNote, on_delete=models.CASCADE, related_name="lines", verbose_name=_("credit note")
    )
    position = models.PositiveIntegerField(_("position"))
    original_line = models.ForeignKey(
        InvoiceLine,
        on_delete=models.PROTECT,
        related_name="credit_note_lines",
        verbose_name=_("original line"),
    )
    lease = models.ForeignKey(
        Lease,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="credit_note_lines",
        verbose_name=_("lease"),
    )
    kind = models.CharField(_("kind"), max_length=16, choices=LineKind.choices)
    description = models.CharField(_("description"), max_length=500)
    amount = _money(_("amount (¥)"))
    tax_rate_percent = models.DecimalField(_("tax rate (percent)"), max_digits=5, decimal_places=2)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "credit_note__tenant"

    class Meta:
        verbose_name = _("credit note line")
        verbose_name_plural = _("credit note lines")
        ordering = ["credit_note", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["credit_note", "position"], name="credit_note_line_position_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.credit_note} #{self.position} {self.amount}"

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            raise _immutable(gettext("Credit note %(note)s") % {"note": self.credit_note.number})
        super().save(*args, **kwargs)


class InvoiceEvent(models.Model):
    """One step of an issued invoice's life, written by ``billing.services`` in the
    transaction that takes it: issued (draft → issued), paid (issued → paid), voided
    (issued → void), credited (a credit note; the status stays). ``actor`` is who did it
    (none: a command or beat, or a row written before events were recorded); ``at`` is
    when it was recorded. Never edited, never deleted."""

    invoice = models.ForeignKey(
        Invoice, on_delete=models.PROTECT, related_name="events", verbose_name=_("invoice")
    )
    kind = models.CharField(_("kind"), max_length=8, choices=InvoiceEventKind.choices)
    from_state = models.CharField(_("from status"), max_length=8, choices=InvoiceStatus.choices)
    to_state = models.CharField(_("to status"), max_length=8, choices=InvoiceStatus.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("actor"),
    )
    at = models.DateTimeField(_("at"))
    reason = models.TextField(_("reason"), blank=True)
    credit_note = models.OneToOneField(
        CreditNote,
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="event",
        verbose_name=_("credit note"),
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "invoice__tenant"

    class Meta:
        verbose_name = _("invoice event")
        verbose_name_plural = _("invoice events")
        ordering = ["at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(kind=InvoiceEventKind.CREDITED, credit_note__isnull=False)
                | (~Q(kind=InvoiceEventKind.CREDITED) & Q(credit_note__isnull=True)),
                name="invoice_event_credit_note_iff_credited",
            )
        ]

    def __str__(self) -> str:
        return f"{self.invoice} {self.kind} at {self.at:%Y-%m-%d %H:%M}"

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            raise _immutable(gettext("Invoice %(invoice)s") % {"invoice": self.invoice.label})
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise _immutable(gettext("Invoice %(invoice)s") % {"invoice": self.invoice.label})
