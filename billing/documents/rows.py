"""The one reading of an invoice (or a credit note) that every export prints: CSV, XLSX
and PDF. Each export only lays these rows out; none computes a figure of its own.

Tax: each line is taxed at the rate it carries (``tax_rate_percent``, its price
component's VAT rate), and tax is rounded half-up once per rate group, on the sum of that
group's amounts (``gpulease_verify.calculations.invoice_totals_by_rate``). A line's own
tax is that group tax spread over the group's lines by cumulative rounding (line i gets
round(running exact tax up to i) - round(running exact tax up to i-1)), so each line is
within one fen of its exact tax and the lines of a group add up to the group's tax to the
fen.

Totals are the stored ones (subtotal, tax, total); ``check`` says whether the rate groups
add up to them, and the exports print the stored figures either way. An invoice's
``balance`` (``billing.balance``) nets its credit notes: what is due, or owed back.

A unit price is printed only where it is one: quantity x unit price, rounded half-up to
the fen, is the line's amount. A prorated line (a part of a month at a monthly rate, whose
amount is rounded from the exact seconds), a 95th-percentile line for part of a month, and
an SLA credit (a percent of a base) keep their quantity and print no unit price; the
description names the rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.translation import gettext as _

from billing import services
from billing.balance import Balance, balance
from billing.choices import InvoiceStatus
from billing.documents.labels import line_text, unit_text
from billing.models import CreditNote, Invoice
from gpulease_verify.calculations import invoice_totals_by_rate
from gpulease_verify.money import to_fen

HUNDRED = Decimal(100)
ZERO = Decimal("0.00")
PARTY_FIELDS = ("legal_name", "tax_id", "address", "phone", "bank", "account")


@dataclass(frozen=True)
class Row:
    position: int
    lease: str  # the lease reference (规格型号 on a VAT request), "" for none
    kind: str  # translated
    description: str
    quantity: Decimal | None  # None on credit note lines, which carry an amount only
    unit: str
    unit_price: Decimal | None
    amount: Decimal
    tax_rate_percent: Decimal
    tax: Decimal
    amount_with_tax: Decimal
    line_kind: str = ""  # the LineKind value, untranslated (the 数电票 tax code's key)


@dataclass(frozen=True)
class RateTotal:
    tax_rate_percent: Decimal
    amount: Decimal
    tax: Decimal
    amount_with_tax: Decimal


@dataclass(frozen=True)
class Document:
    kind: str  # "invoice" or "credit_note"
    number: str  # "" on a draft
    status: str  # InvoiceStatus value; credit notes are "issued"
    status_label: str  # translated
    tenant_slug: str
    period: str
    zone: str
    period_start: datetime  # in the tenant's zone
    period_end: datetime
    issue_date: date | None
    due_date: date | None
    seller: dict[str, str]
    buyer: dict[str, str]
    identities_frozen: bool  # False on a draft: today's identities, fixed when issued
    rows: list[Row]
    by_rate: list[RateTotal]
    subtotal: Decimal
    tax: Decimal
    total: Decimal
    currency: str
    network_cost_share: Decimal | None
    original_number: str = ""  # credit notes: the invoice they correct
    reason: str = ""  # credit notes
    notes: list[str] = field(default_factory=list)
    balance: Balance | None = None  # invoices: credit notes netted, what is due

    @property
    def is_draft(self) -> bool:
        return self.status == InvoiceStatus.DRAFT

    @property
    def is_void(self) -> bool:
        return self.status == InvoiceStatus.VOID

    def check(self) -> bool:
        """Whether the rate groups add up to the stored totals, to the fen."""
        return (
            sum((group.amount for group in self.by_rate), ZERO) == self.subtotal
            and sum((group.tax for group in self.by_rate), ZERO) == self.tax
        )

    def filename(self, extension: str) -> str:
        """The invoice number once it has one; before that tenant, period and "draft"."""
        if self.kind == "credit_note":
            return f"credit-note-{self.number}.{extension}"
        if self.number:
            return f"invoice-{self.number}.{extension}"
        return f"invoice-{self.tenant_slug}-{self.period}-draft.{extension}"


def _party(frozen: dict[str, Any] | None, current: dict[str, Any]) -> dict[str, str]:
    source = frozen or current
    return {key: str(source.get(key) or "") for key in PARTY_FIELDS}


def _shares(amounts: Sequence[Decimal], rate: Decimal) -> list[Decimal]:
    """Each amount's share of its group's tax (cumulative rounding); they add up to the
    group's tax, ``to_fen`` of the exact sum."""
    shares, running, given = [], Decimal(0), ZERO
    for amount in amounts:
        running += amount * rate / HUNDRED
        share = to_fen(running) - given
        shares.append(share)
        given += share
    return shares


def unit_price_of(line: Any) -> Decimal | None:
    """The line's unit price where quantity x price makes its amount (module docstring)."""
    quantity, price = getattr(line, "quantity", None), getattr(line, "unit_price", None)
    if quantity is None or price is None or to_fen(quantity * price) != line.amount:
        return None
    return price


def _rows(lines: Iterable[tuple[Any, Decimal]]) -> tuple[list[Row], list[RateTotal]]:
    """Rows from (line, rate) pairs: ``line`` has position, lease, kind, description,
    amount and, on invoice lines, quantity, unit and unit_price."""
    pairs = list(lines)
    totals = invoice_totals_by_rate([(line.amount, rate) for line, rate in pairs])
    taxes: dict[int, Decimal] = {}
    for group in totals.groups:
        members = [line for line, rate in pairs if rate == group.tax_rate_percent]
        shares = _shares([line.amount for line in members], group.tax_rate_percent)
        taxes.update({id(line): share for line, share in zip(members, shares, strict=True)})
    groups = [
        RateTotal(group.tax_rate_percent, group.subtotal, group.tax, group.total)
        for group in totals.groups
    ]
    rows = [
        Row(
            position=line.position,
            lease=line.lease.reference if line.lease else "",
            kind=str(line.get_kind_display()),
            description=line_text(line),
            quantity=getattr(line, "quantity", None),
            unit=unit_text(getattr(line, "unit", "")),
            unit_price=unit_price_of(line),
            amount=line.amount,
            tax_rate_percent=rate,
            tax=taxes[id(line)],
            amount_with_tax=line.amount + taxes[id(line)],
            line_kind=line.kind,
        )
        for line, rate in pairs
    ]
    return rows, groups


def _local(instant: datetime, zone: str) -> datetime:
    return instant.astimezone(ZoneInfo(zone))


def invoice_document(invoice: Invoice, lines: Sequence[Any] | None = None) -> Document:
    """The rows and totals of an invoice. ``lines`` defaults to the invoice's own, in
    order; call it inside ``translation.override`` to get the kinds in that language."""
    if lines is None:
        lines = list(invoice.lines.select_related("lease").order_by("position"))
    tenant = invoice.tenant
    rows, groups = _rows((line, line.tax_rate_percent) for line in lines)
    frozen = invoice.status != InvoiceStatus.DRAFT
    return Document(
        kind="invoice",
        number=invoice.number or "",
        status=invoice.status,
        status_label=str(invoice.get_status_display()),
        tenant_slug=tenant.slug,
        period=invoice.period,
        zone=tenant.time_zone,
        period_start=_local(invoice.period_start, tenant.time_zone),
        period_end=_local(invoice.period_end, tenant.time_zone),
        issue_date=invoice.issue_date,
        due_date=invoice.due_date,
        seller=_party(invoice.seller if frozen else None, services.seller_identity()),
        buyer=_party(invoice.buyer if frozen else None, tenant.buyer_identity()),
        identities_frozen=frozen,
        rows=rows,
        by_rate=groups,
        subtotal=invoice.subtotal,
        tax=invoice.tax,
        total=invoice.total,
        currency=invoice.currency,
        network_cost_share=invoice.network_cost_share,
        notes=[] if frozen else [_("Draft: not an invoice until it is issued.")],
        balance=balance(invoice, invoice.credit_notes.all(), invoice.voucher_redemptions.all()),
    )


def credit_note_document(note: CreditNote) -> Document:
    """The rows and totals of a credit note (红字发票), at the rates its lines carry."""
    lines = list(note.lines.select_related("lease").order_by("position"))
    rows, groups = _rows((line, line.tax_rate_percent) for line in lines)
    invoice, tenant = note.invoice, note.tenant
    return Document(
        kind="credit_note",
        number=note.number,
        status=InvoiceStatus.ISSUED,
        status_label=str(InvoiceStatus.ISSUED.label),
        tenant_slug=tenant.slug,
        period=invoice.period,
        zone=tenant.time_zone,
        period_start=_local(invoice.period_start, tenant.time_zone),
        period_end=_local(invoice.period_end, tenant.time_zone),
        issue_date=note.issue_date,
        due_date=None,
        seller=_party(note.seller, services.seller_identity()),
        buyer=_party(note.buyer, tenant.buyer_identity()),
        identities_frozen=True,
        rows=rows,
        by_rate=groups,
        subtotal=note.subtotal,
        tax=note.tax,
        total=note.total,
        currency=note.currency,
        network_cost_share=None,
        original_number=invoice.number or "",
        reason=note.reason,
    )


def rate_label(rate: Decimal) -> str:
    """6.00 -> "6%", 13.50 -> "13.5%"."""
    return f"{rate.normalize():f}%"
