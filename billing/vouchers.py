"""Vouchers (代金券): an SLA credit given as a voucher where the terms say ``credit_mode``
voucher (the rules: ``gpulease_verify.vouchers``; the worked example:
docs/billing/vouchers.md).

- **Issue.** Issuing a month's invoice (``billing.services.issue_invoice``) issues, in the
  same transaction, one voucher per lease whose credit is given as a voucher: the credit
  computed exactly as its line would be (``billing.invoicing``), with the sign turned,
  numbered ``PREFIX-VC-YYYY-NNNNNN``, valid ``voucher_validity_months`` from the issue.
- **Redemption.** The same issue first applies the tenant's open vouchers (issued before,
  not void, not expired at the issue instant) to the invoice's total after tax, earliest
  expiry first: one ``VoucherRedemption`` each, never more than the voucher has left nor
  than the total still unpaid. The VAT base is unchanged: a voucher is a way of paying.
- **Void.** A void of the invoice that applied a voucher releases its redemptions (they
  count for nothing; ``live``). A void of the invoice that issued a voucher voids the
  voucher, refused once any of it is used (``void_issued``).

What an invoice leaves to pay nets its redemptions (``billing.balance``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db.models import Prefetch, QuerySet, Sum
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from billing.choices import InvoiceStatus
from billing.invoicing.computed import ComputedLine
from billing.models import Invoice, Voucher, VoucherRedemption
from common.locks import locking
from gpulease_verify import vouchers as rules

ZERO = Decimal("0.00")
SERIES = "voucher"
STATES = {
    "open": pgettext_lazy("voucher state", "open"),
    "partly_redeemed": gettext_lazy("partly redeemed"),
    "redeemed": gettext_lazy("redeemed in full"),
    "expired": gettext_lazy("expired"),
    "void": gettext_lazy("void"),
}


def live(redemptions: QuerySet[VoucherRedemption]) -> QuerySet[VoucherRedemption]:
    """The redemptions that count: those on invoices that are not void."""
    return redemptions.exclude(invoice__status=InvoiceStatus.VOID)


def redeemed(voucher: Voucher) -> Decimal:
    return live(voucher.redemptions.all()).aggregate(s=Sum("amount"))["s"] or ZERO


@dataclass(frozen=True)
class Standing:
    """A voucher's ledger at an instant: what was used, what is left, its state."""

    used: Decimal
    left: Decimal
    state: str

    @property
    def state_label(self) -> str:
        return str(STATES[self.state])


def standing(voucher: Voucher, at: datetime) -> Standing:
    """Void, redeemed in full, expired (something left past ``expires_at``), partly
    redeemed or open. Reads the voucher's prefetched ``redemptions`` with their invoices
    where the caller has them."""
    used = sum(
        (r.amount for r in voucher.redemptions.all() if r.invoice.status != InvoiceStatus.VOID),
        ZERO,
    )
    left = voucher.amount - used
    if voucher.voided_at is not None:
        state = "void"
    elif left <= 0:
        state = "redeemed"
    elif not rules.is_open(voucher.expires_at, at):
        state = "expired"
    else:
        state = "partly_redeemed" if used else "open"
    return Standing(used, left, state)


def with_ledger(vouchers: QuerySet[Voucher]) -> QuerySet[Voucher]:
    """Vouchers with what ``standing`` and the pages read, in a fixed number of queries."""
    return vouchers.select_related("lease", "source_invoice").prefetch_related(
        Prefetch(
            "redemptions",
            queryset=VoucherRedemption.objects.select_related("invoice").order_by("at", "pk"),
        )
    )


def applied(invoice: Invoice) -> list[VoucherRedemption]:
    """The redemptions an invoice carries, with their vouchers, in the order applied."""
    return list(
        invoice.voucher_redemptions.select_related("voucher").order_by("at", "pk")
        if invoice.pk
        else []
    )


def redeem(*, invoice: Invoice, now: datetime) -> list[VoucherRedemption]:
    """Apply the tenant's open vouchers to the invoice being issued (caller's transaction,
    the tenant row locked): earliest expiry first, up to its total after tax."""
    payable = max(invoice.total, ZERO)
    found = locking(
        Voucher.objects.filter(
            tenant_id=invoice.tenant_id,
            voided_at__isnull=True,
            issued_at__lt=now,
            expires_at__gt=now,  # expiring at the issue instant: expired
        ).exclude(source_invoice=invoice)
    ).order_by("expires_at", "number")
    rows = []
    for voucher in found:
        if payable <= 0:
            break
        left = voucher.amount - redeemed(voucher)
        take = min(left, payable)
        if take <= 0:
            continue
        rows.append(
            VoucherRedemption.objects.create(voucher=voucher, invoice=invoice, amount=take, at=now)
        )
        payable -= take
    return rows


def issue(
    *, invoice: Invoice, credits: list[ComputedLine], now: datetime, number: Callable[[], str]
) -> list[Voucher]:
    """One voucher per voucher-mode credit the invoice's month earned (caller's
    transaction). ``number``: the next number of the voucher series."""
    made = []
    zone = invoice.tenant.time_zone
    for line in credits:
        if line.amount >= 0 or line.lease is None:
            continue
        months = int(line.detail["voucher_validity_months"])
        made.append(
            Voucher.objects.create(
                tenant_id=invoice.tenant_id,
                lease=line.lease,
                source_invoice=invoice,
                number=number(),
                period=invoice.period,
                currency=invoice.currency,
                amount=rules.expected_amount(line.amount),
                issued_at=now,
                validity_months=months,
                expires_at=rules.expiry(now, months, zone),
                description=line.description,
                detail=line.detail,
            )
        )
    return made


def used_issued(invoice: Invoice) -> str | None:
    """Why the invoice cannot be voided for its vouchers: some are used on later
    invoices (None when none is)."""
    issued = invoice.vouchers_issued.filter(voided_at__isnull=True)
    used = [voucher.number for voucher in issued if redeemed(voucher) > 0]
    if not used:
        return None
    return _(
        "Invoice %(invoice)s cannot be voided: its vouchers %(vouchers)s are used on later "
        "invoices; void those first."
    ) % {"invoice": invoice.label, "vouchers": ", ".join(used)}


def void_issued(invoice: Invoice, at: datetime) -> None:
    """Void the vouchers of an invoice being voided (``used_issued`` said none is used)."""
    for voucher in invoice.vouchers_issued.filter(voided_at__isnull=True):
        voucher.voided_at = at
        voucher.save(update_fields=["voided_at", "updated_at"])
