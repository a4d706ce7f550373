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

- **Late results** (``adjust``). Issuing the next open invoice of a month whose credit was
  a voucher compares the credit recomputed now with what the month's vouchers give so far
  (``billing.invoicing`` rule 6, ``voucher_changes``): more issues a supplementary voucher of the
  difference, linked to the month's first (``supplements``), with the reason; less is a
  ``VoucherReduction`` of what is left unused (latest voucher first), never below what was
  used: the rest is recorded as ``excess``, not recovered.
- **Credit notes** (``give_back``). A credit note on an invoice that used vouchers gives
  each redemption back its share of what the notes credited so far (``rules.returned``),
  usable until the voucher's own expiry.

What an invoice leaves to pay nets its redemptions, less what credit notes gave back
(``billing.balance``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Prefetch, QuerySet
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from billing.choices import InvoiceStatus
from billing.invoicing.computed import ComputedLine, VoucherChange
from billing.models import (
    CreditNote,
    Invoice,
    Voucher,
    VoucherRedemption,
    VoucherReduction,
    VoucherReturn,
)
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


@dataclass(frozen=True)
class Standing:
    """A voucher's ledger at an instant: what was used (redemptions on invoices that are
    not void, less what credit notes gave back of them), what late results took off
    (``reduced``), what is left, its state."""

    used: Decimal
    left: Decimal
    state: str
    reduced: Decimal = ZERO
    returned: Decimal = ZERO

    @property
    def state_label(self) -> str:
        return str(STATES[self.state])


def standing(voucher: Voucher, at: datetime) -> Standing:
    """Void, redeemed in full, expired (something left past ``expires_at``), partly
    redeemed or open. Reads the voucher's prefetched ``redemptions`` (with their invoices
    and returns) and ``reductions`` (with their invoices) where the caller has them
    (``with_ledger``)."""
    taken = returned = ZERO
    for redemption in voucher.redemptions.all():
        if redemption.invoice.status != InvoiceStatus.VOID:
            taken += redemption.amount
            returned += redemption.returned
    reduced = sum(
        (r.amount for r in voucher.reductions.all() if r.invoice.status != InvoiceStatus.VOID),
        ZERO,
    )
    used = taken - returned
    left = voucher.amount - used - reduced
    if voucher.voided_at is not None:
        state = "void"
    elif left <= 0:
        state = "redeemed"
    elif not rules.is_open(voucher.expires_at, at):
        state = "expired"
    else:
        state = "partly_redeemed" if used else "open"
    return Standing(used, left, state, reduced, returned)


def with_ledger(vouchers: QuerySet[Voucher]) -> QuerySet[Voucher]:
    """Vouchers with what ``standing`` and the pages read, in a fixed number of queries."""
    return vouchers.select_related("lease", "source_invoice", "supplements").prefetch_related(
        Prefetch(
            "redemptions",
            queryset=VoucherRedemption.objects.select_related("invoice")
            .prefetch_related(
                Prefetch(
                    "returns",
                    queryset=VoucherReturn.objects.select_related("credit_note").order_by(
                        "at", "pk"
                    ),
                )
            )
            .order_by("at", "pk"),
        ),
        Prefetch(
            "reductions",
            queryset=VoucherReduction.objects.select_related("invoice").order_by("at", "pk"),
        ),
    )


def applied(invoice: Invoice) -> list[VoucherRedemption]:
    """The redemptions an invoice carries, with their vouchers, in the order applied."""
    return list(
        invoice.voucher_redemptions.select_related("voucher")
        .prefetch_related("returns")
        .order_by("at", "pk")
        if invoice.pk
        else []
    )


def redeem(*, invoice: Invoice, now: datetime) -> list[VoucherRedemption]:
    """Apply the tenant's open vouchers to the invoice being issued (caller's transaction,
    the tenant row locked): earliest expiry first, up to its total after tax."""
    payable = max(invoice.total, ZERO)
    found = with_ledger(
        locking(
            Voucher.objects.filter(
                tenant_id=invoice.tenant_id,
                voided_at__isnull=True,
                issued_at__lt=now,
                expires_at__gt=now,  # expiring at the issue instant: expired
            ).exclude(source_invoice=invoice),
            of=("self",),
        )
    ).order_by("expires_at", "number")
    rows = []
    for voucher in found:
        if payable <= 0:
            break
        take = min(standing(voucher, now).left, payable)
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
    issued = with_ledger(invoice.vouchers_issued.filter(voided_at__isnull=True))
    used = [voucher.number for voucher in issued if standing(voucher, invoice.updated_at).used > 0]
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


# --- late results --------------------------------------------------------------------


def adjust(
    *,
    invoice: Invoice,
    changes: list[VoucherChange],
    now: datetime,
    number: Callable[[], str],
) -> tuple[list[Voucher], list[VoucherReduction]]:
    # long: supplement and reduction of one late change side by side, so the two rules read together
    """Late changes to the credits earlier months gave as vouchers, found by the invoice
    being issued (caller's transaction, before ``redeem``): a larger credit is a
    supplementary voucher of the difference; a smaller one reduces what is left unused,
    the latest voucher first, and records the rest as not recovered (``excess``) on the
    month's first voucher."""
    made: list[Voucher] = []
    cut: list[VoucherReduction] = []
    zone = invoice.tenant.time_zone
    for change in changes:
        month = with_ledger(
            locking(
                Voucher.objects.filter(
                    tenant_id=invoice.tenant_id,
                    lease=change.lease,
                    period=change.period,
                    voided_at__isnull=True,
                ).exclude(source_invoice__status=InvoiceStatus.VOID),
                of=("self",),
            )
        ).order_by("issued_at", "number")
        month = list(month)
        detail = {
            **change.detail,
            "adjusted_period": change.period,
            "adjusted_invoice": change.adjusted_invoice,
            "adjusted_invoice_number": change.adjusted_invoice_number,
            "given_before": rules.money_text(change.given),
            "recomputed": rules.money_text(change.recomputed),
            "difference": rules.money_text(change.difference),
        }
        if change.difference > 0:
            months = int(change.validity_months or 12)
            made.append(
                Voucher.objects.create(
                    tenant_id=invoice.tenant_id,
                    lease=change.lease,
                    source_invoice=invoice,
                    number=number(),
                    period=change.period,
                    currency=invoice.currency,
                    amount=change.difference,
                    issued_at=now,
                    validity_months=months,
                    expires_at=rules.expiry(now, months, zone),
                    description=change.reason,
                    reason=change.reason,
                    supplements=month[0] if month else None,
                    detail=detail,
                )
            )
            continue
        wanted = -change.difference
        plan: dict[int, list[Decimal]] = {}
        for voucher in reversed(month):
            take = min(max(standing(voucher, now).left, ZERO), wanted)
            plan[voucher.pk] = [take, ZERO]
            wanted -= take
        if not month:
            continue  # nothing to reduce (a month can only be given less than it has)
        plan[month[0].pk][1] = wanted
        for voucher in month:
            amount, excess = plan[voucher.pk]
            if amount > 0 or excess > 0:
                cut.append(
                    VoucherReduction.objects.create(
                        voucher=voucher,
                        invoice=invoice,
                        amount=amount,
                        excess=excess,
                        at=now,
                        reason=change.reason,
                        detail=detail,
                    )
                )
    return made, cut


def carried_by(invoice: Invoice) -> list[str]:
    """The months (YYYY-MM) of the invoices that carry late changes to the vouchers of
    ``invoice``'s month: voiding it would count them twice."""
    supplements = Voucher.objects.filter(
        tenant_id=invoice.tenant_id, period=invoice.period, voided_at__isnull=True
    ).exclude(source_invoice__status=InvoiceStatus.VOID)
    reductions = VoucherReduction.objects.filter(
        voucher__tenant_id=invoice.tenant_id, voucher__period=invoice.period
    ).exclude(invoice__status=InvoiceStatus.VOID)
    periods = {
        *supplements.exclude(source_invoice=invoice).values_list(
            "source_invoice__period", flat=True
        ),
        *reductions.exclude(invoice=invoice).values_list("invoice__period", flat=True),
    }
    return sorted(periods)


# --- credit notes --------------------------------------------------------------------


def give_back(*, note: CreditNote, now: datetime) -> list[VoucherReturn]:
    """What the credit note gives back to the vouchers its invoice used (caller's
    transaction): each redemption, its share of what the invoice's notes have credited so
    far (``rules.returned``), less what earlier notes gave back of it."""
    invoice = note.invoice
    credited = -sum((n.total for n in invoice.credit_notes.all()), ZERO)
    rows = []
    for redemption in invoice.voucher_redemptions.prefetch_related("returns").order_by("at", "pk"):
        due = rules.returned(redemption.amount, credited, invoice.total) - redemption.returned
        if due > 0:
            rows.append(
                VoucherReturn.objects.create(
                    redemption=redemption, credit_note=note, amount=due, at=now
                )
            )
    return rows


def ledger_rows(voucher: Voucher) -> list[dict[str, Any]]:
    """The voucher's ledger in time order, as the pages show it: issue, redemptions,
    returns and reductions, each with the amount it changes what is left by."""
    rows: list[dict[str, Any]] = [
        {"at": voucher.issued_at, "kind": "issued", "amount": voucher.amount, "document": voucher}
    ]
    for redemption in voucher.redemptions.all():
        rows.append(
            {
                "at": redemption.at,
                "kind": "released" if redemption.invoice.status == InvoiceStatus.VOID else "used",
                "amount": -redemption.amount,
                "document": redemption.invoice,
            }
        )
        for back in redemption.returns.all():
            rows.append(
                {"at": back.at, "kind": "returned", "amount": back.amount, "document": back}
            )
    for reduction in voucher.reductions.all():
        rows.append(
            {
                "at": reduction.at,
                "kind": "reduced",
                "amount": -reduction.amount,
                "document": reduction,
            }
        )
    return sorted(rows, key=lambda row: row["at"])
