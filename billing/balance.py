"""What an invoice leaves to pay: its total with the credit notes netted, and its payment
status. The one reading that the invoice page, the list, the PDF and the API show.

- **credited**: what the invoice's credit notes took off, tax included (a positive amount:
  the notes' totals are negative);
- **net**: total - credited;
- **vouchers**: what vouchers (代金券, ``billing.vouchers``) paid of it when it was
  issued, after tax (its redemptions; released, so none, once it is void), less what its
  credit notes gave back to them (the vouchers' share of each note);
- **due**: what the tenant still owes: net - vouchers while issued (never below 0),
  nothing once paid or void, nothing yet on a draft (it is not an invoice until issued);
- **refund**: credit notes issued after the invoice was paid, less what they gave back to
  vouchers: money owed back to the tenant (payment was for what was due then: the total
  less the notes issued before it and the vouchers).

Status: draft, void, paid (``refund`` > 0 says it was credited after payment), credited in
full (issued, net 0), covered by vouchers (issued, vouchers leave nothing to pay), partly
credited (issued, some credit), issued.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from billing.choices import InvoiceStatus
from billing.models import CreditNote, Invoice

ZERO = Decimal("0.00")


class PaymentStatus(models.TextChoices):
    DRAFT = "draft", _("draft")
    ISSUED = "issued", _("issued, unpaid")
    PARTLY_CREDITED = "partly_credited", _("issued, partly credited")
    CREDITED = "credited", _("credited in full")
    COVERED = "covered", _("covered by vouchers")
    PAID = "paid", _("paid")
    VOID = "void", _("void")


@dataclass(frozen=True)
class Balance:
    status: str  # PaymentStatus
    total: Decimal
    credited: Decimal
    net: Decimal
    due: Decimal | None  # None on a draft
    refund: Decimal
    vouchers: Decimal = ZERO

    @property
    def credit_notes_total(self) -> Decimal:
        """The credit notes' totals added up, as printed under the invoice's (negative)."""
        return -self.credited

    @property
    def status_label(self) -> str:
        return str(PaymentStatus(self.status).label)

    def as_dict(self) -> dict[str, str | None]:
        return {
            "payment_status": self.status,
            "credited": str(self.credited),
            "net_total": str(self.net),
            "amount_due": None if self.due is None else str(self.due),
            "refund_due": str(self.refund),
            "vouchers_applied": str(self.vouchers),
        }


def balance(
    invoice: Invoice, notes: Iterable[CreditNote], redemptions: Iterable[Any] = ()
) -> Balance:
    """``notes``: the invoice's credit notes; ``redemptions``: its voucher redemptions
    with their ``returns`` (the caller fetches them, once for a list)."""
    notes = list(notes)
    redemptions = list(redemptions)
    credited = -sum((note.total for note in notes), ZERO)
    net = invoice.total - credited
    used = sum((r.kept for r in redemptions), ZERO)
    if invoice.status == InvoiceStatus.DRAFT:
        return Balance(PaymentStatus.DRAFT, invoice.total, credited, net, None, ZERO)
    if invoice.status == InvoiceStatus.VOID:
        return Balance(PaymentStatus.VOID, invoice.total, credited, net, ZERO, ZERO)
    if invoice.status == InvoiceStatus.PAID:
        paid_at = invoice.paid_at
        after = [note for note in notes if paid_at is None or note.issued_at > paid_at]
        later = {note.pk for note in after}
        to_vouchers = sum(
            (
                back.amount
                for r in redemptions
                for back in r.returns.all()
                if back.credit_note_id in later
            ),
            ZERO,
        )
        refund = -sum((note.total for note in after), ZERO) - to_vouchers
        return Balance(PaymentStatus.PAID, invoice.total, credited, net, ZERO, refund, used)
    if credited == ZERO and used == ZERO:
        status = PaymentStatus.ISSUED
    elif net <= ZERO:
        status = PaymentStatus.CREDITED
    elif net - used <= ZERO:
        status = PaymentStatus.COVERED
    elif credited == ZERO:
        status = PaymentStatus.ISSUED
    else:
        status = PaymentStatus.PARTLY_CREDITED
    return Balance(status, invoice.total, credited, net, max(net - used, ZERO), ZERO, used)
