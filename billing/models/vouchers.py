"""Vouchers (代金券): SLA credits given as amounts later invoices use up, with their ledger
of redemptions, returns and reductions (``billing.vouchers`` writes them)."""

from decimal import Decimal

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from billing.models.invoices import CreditNote, Invoice, _immutable, _money
from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from gpulease_verify.money import CURRENCY
from leases.models import Lease, Tenant


class Voucher(TimeStampedModel):
    """A voucher (代金券): an SLA credit given, where the terms say ``credit_mode``
    voucher, as an amount the tenant's next invoices use up after tax rather than as a
    negative line (``billing.vouchers``). Issued with the invoice of the month that earned
    it, in the same transaction, numbered in its own gap-free series; valid from its issue
    until ``expires_at`` (excluded). Never edited: only ``voided_at`` is set, when the
    invoice that issued it is voided before any of it was used. What is left is its amount
    less its redemptions on invoices that are not void (less what credit notes gave back of
    them) less its reductions. A late result that raises the month's credit is a new voucher
    (``supplements`` the month's first one, with a ``reason``); one that lowers it is a
    ``VoucherReduction``."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="vouchers", verbose_name=_("tenant")
    )
    lease = models.ForeignKey(
        Lease, on_delete=models.PROTECT, related_name="vouchers", verbose_name=_("lease")
    )
    source_invoice = models.ForeignKey(
        Invoice,
        on_delete=models.PROTECT,
        related_name="vouchers_issued",
        verbose_name=_("issued with invoice"),
    )
    number = models.CharField(_("voucher number"), max_length=40, unique=True)
    period = models.CharField(_("credit for period (YYYY-MM)"), max_length=7)
    currency = models.CharField(_("currency"), max_length=3, default=CURRENCY)
    amount = _money(_("amount (¥)"))
    issued_at = models.DateTimeField(_("issued at"))
    validity_months = models.PositiveSmallIntegerField(_("validity (months)"))
    expires_at = models.DateTimeField(_("expires at"))
    description = models.CharField(_("description"), max_length=500)
    detail = models.JSONField(
        _("how the credit was computed"),
        default=dict,
        help_text=_("The SLA credit's inputs and steps, as a credit line would carry them."),
    )
    voided_at = models.DateTimeField(_("voided at"), null=True, blank=True)
    supplements = models.ForeignKey(
        "self",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="supplemented_by",
        verbose_name=_("supplements voucher"),
        help_text=_("A late result raised the credit of this voucher's month."),
    )
    reason = models.CharField(_("reason"), max_length=500, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("voucher")
        verbose_name_plural = _("vouchers")
        ordering = ["-issued_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(amount__gt=0), name="voucher_amount_positive"),
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("issued_at")),
                name="voucher_expires_after_issue",
            ),
        ]

    def __str__(self) -> str:
        return self.number

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            fields = kwargs.get("update_fields")
            if fields is None or not set(fields) <= {"voided_at", "updated_at"}:
                raise _immutable(gettext("Voucher %(voucher)s") % {"voucher": self.number})
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise _immutable(gettext("Voucher %(voucher)s") % {"voucher": self.number})


class VoucherRedemption(models.Model):
    """What one invoice used of one voucher, written when that invoice is issued; its own
    ledger with the voucher's issue. A redemption on an invoice voided since is released
    (counts for nothing): the row stays, as the record of what happened."""

    voucher = models.ForeignKey(
        Voucher, on_delete=models.PROTECT, related_name="redemptions", verbose_name=_("voucher")
    )
    invoice = models.ForeignKey(
        Invoice,
        on_delete=models.PROTECT,
        related_name="voucher_redemptions",
        verbose_name=_("applied to invoice"),
    )
    amount = _money(_("amount (¥)"))
    at = models.DateTimeField(_("at"))

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "voucher__tenant"

    class Meta:
        verbose_name = _("voucher redemption")
        verbose_name_plural = _("voucher redemptions")
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["voucher", "invoice"], name="one_redemption_per_invoice"
            ),
            models.CheckConstraint(condition=Q(amount__gt=0), name="redemption_amount_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.voucher} {self.amount} on {self.invoice}"

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            raise _immutable(gettext("Voucher %(voucher)s") % {"voucher": self.voucher.number})
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise _immutable(gettext("Voucher %(voucher)s") % {"voucher": self.voucher.number})

    @property
    def returned(self) -> Decimal:
        """What credit notes on the invoice gave back of it (``billing.vouchers``); reads
        the prefetched ``returns`` where the caller has them."""
        return sum((r.amount for r in self.returns.all()), Decimal("0.00"))

    @property
    def kept(self) -> Decimal:
        """What the voucher still pays of the invoice: the redemption less its returns."""
        return self.amount - self.returned


class VoucherReturn(models.Model):
    """What a credit note gave back of a redemption: the voucher paid that share of the
    credited amount (``billing.vouchers.give_back``). The voucher can use it again until
    its own ``expires_at``."""

    redemption = models.ForeignKey(
        VoucherRedemption,
        on_delete=models.PROTECT,
        related_name="returns",
        verbose_name=_("redemption"),
    )
    credit_note = models.ForeignKey(
        CreditNote,
        on_delete=models.PROTECT,
        related_name="voucher_returns",
        verbose_name=_("credit note"),
    )
    amount = _money(_("amount (¥)"))
    at = models.DateTimeField(_("at"))

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "redemption__voucher__tenant"

    class Meta:
        verbose_name = _("voucher return")
        verbose_name_plural = _("voucher returns")
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["redemption", "credit_note"], name="one_return_per_credit_note"
            ),
            models.CheckConstraint(condition=Q(amount__gt=0), name="voucher_return_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.amount} back to {self.redemption.voucher} by {self.credit_note}"

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            raise _immutable(gettext("Voucher return %(pk)s") % {"pk": self.pk})
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise _immutable(gettext("Voucher return %(pk)s") % {"pk": self.pk})


class VoucherReduction(models.Model):
    """A late result lowered the SLA credit of a voucher's month (``billing.vouchers
    .adjust``), found when ``invoice`` was issued: ``amount`` is taken off what the voucher
    had left unused (never more); ``excess`` is the part of the lowering that had been used
    already and is not recovered (the invoices it paid stay as issued). A reduction found
    by an invoice voided since counts for nothing."""

    voucher = models.ForeignKey(
        Voucher, on_delete=models.PROTECT, related_name="reductions", verbose_name=_("voucher")
    )
    invoice = models.ForeignKey(
        Invoice,
        on_delete=models.PROTECT,
        related_name="voucher_reductions",
        verbose_name=_("found when issuing invoice"),
    )
    amount = _money(_("taken off (¥)"))
    excess = _money(_("not recovered (¥)"))
    at = models.DateTimeField(_("at"))
    reason = models.CharField(_("reason"), max_length=500)
    detail = models.JSONField(_("how the credit was recomputed"), default=dict)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "voucher__tenant"

    class Meta:
        verbose_name = _("voucher reduction")
        verbose_name_plural = _("voucher reductions")
        ordering = ["at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["voucher", "invoice"], name="one_reduction_per_invoice"
            ),
            models.CheckConstraint(
                condition=Q(amount__gte=0) & Q(excess__gte=0) & (Q(amount__gt=0) | Q(excess__gt=0)),
                name="voucher_reduction_positive",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.voucher} -{self.amount}"

    def save(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if self.pk is not None:
            raise _immutable(gettext("Voucher %(voucher)s") % {"voucher": self.voucher.number})
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise _immutable(gettext("Voucher %(voucher)s") % {"voucher": self.voucher.number})
