"""Every write of an invoice's life: drafting, issuing, paying, voiding and credit notes.
``billing.invoicing`` computes; this module decides, numbers, freezes and saves.

Lifecycle: draft → issued → paid; issued → void. A draft is recomputed at will. Issuing
recomputes it once more, then gives it the next number of its seller's gap-free series for
the year of issue (``PREFIX-YYYY-NNNNNN``), the issue date in the tenant's zone, the due
date (issue date + ``INVOICE_PAYMENT_TERMS_DAYS``) and both identities as they stand;
from then on the invoice never changes. A correction is a credit note (红字发票) with its
own number (``PREFIX-CN-YYYY-NNNNNN``). Every step (issued, paid, voided, credited) writes
an ``InvoiceEvent`` in its own transaction: who (``actor``, the user the API view, admin
action or command passes down; none for a command or beat), when, from and to which state,
and why. Numbers come from a counter row per (series,
seller, year) locked (``common.locks``) in the issuing transaction: two issuers
wait for each other, and a rolled-back issue gives its number back with it, so the
series has no gap and no number is ever used twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from benchmarks import selectors as run_selectors
from benchmarks.choices import RunState
from billing import invoicing, metering_gaps, vouchers
from billing.choices import CreditNoteKind, InvoiceEventKind, InvoiceStatus
from billing.ingest import pending_runs
from billing.models import (
    CreditNote,
    CreditNoteLine,
    DocumentCounter,
    Invoice,
    InvoiceEvent,
    InvoiceLine,
)
from common.locks import locking
from gpulease_verify.calculations import invoice_totals_by_rate
from gpulease_verify.money import FEN
from gpulease_verify.periods import Period
from leases.models import Tenant
from leases.services import lock_tenant

INVOICE_SERIES = "invoice"
CREDIT_NOTE_SERIES = "credit_note"
UNFINISHED = (RunState.SCHEDULED, RunState.RUNNING)


class LifecycleError(ValidationError):
    """The invoice is not in a state that allows this (the API answers 409)."""


# --------------------------------------------------------------------------------------
# Numbers, dates, identities
# --------------------------------------------------------------------------------------


def seller_identity() -> dict[str, str]:
    """The seller block (销售方) frozen onto invoices and credit notes: settings."""
    return {key: str(value) for key, value in settings.INVOICE_SELLER.items()}


def next_number(*, series: str, seller_tax_id: str, year: int) -> str:
    """The next number of a gap-free series; call inside the transaction that uses it."""
    DocumentCounter.objects.bulk_create(
        [DocumentCounter(series=series, seller_tax_id=seller_tax_id, year=year)],
        ignore_conflicts=True,
    )
    counter = locking(DocumentCounter.objects).get(
        series=series, seller_tax_id=seller_tax_id, year=year
    )
    counter.last += 1
    counter.save(update_fields=["last"])
    prefix = settings.INVOICE_NUMBER_PREFIX
    middle = {INVOICE_SERIES: "", vouchers.SERIES: "VC-"}.get(series, "CN-")
    return f"{prefix}-{middle}{year}-{counter.last:06d}"


def issue_date_of(instant: datetime, zone: str) -> date:
    return instant.astimezone(ZoneInfo(zone)).date()


def due_date_of(issued: date) -> date:
    return issued + timedelta(days=settings.INVOICE_PAYMENT_TERMS_DAYS)


def _record(
    invoice: Invoice,
    kind: str,
    *,
    before: str,
    actor: Any,
    at: datetime,
    reason: str = "",
    note: CreditNote | None = None,
) -> InvoiceEvent:
    """The event of one step, in the caller's transaction (the invoice row is locked)."""
    return InvoiceEvent.objects.create(
        invoice=invoice,
        kind=kind,
        from_state=before,
        to_state=invoice.status,
        actor=actor if getattr(actor, "pk", None) else None,
        at=at,
        reason=reason,
        credit_note=note,
    )


def _reason(reason: str | None, what: str) -> str:
    text = (reason or "").strip()
    if not text:
        raise ValidationError({"reason": _("A reason is required to %(what)s.") % {"what": what}})
    return text


# --------------------------------------------------------------------------------------
# Drafting
# --------------------------------------------------------------------------------------


def draft_invoice(*, tenant: Tenant, period: str, now: datetime | None = None) -> Invoice:
    """Create or recompute the tenant's draft for the month (``invoicing.draft_invoice``)."""
    return invoicing.draft_invoice(tenant=tenant, period=period, now=now)


def draft_period(
    *, period: str, tenant: Tenant | None = None, now: datetime | None = None
) -> list[Invoice]:
    return invoicing.draft_period(period=period, tenant=tenant, now=now)


# --------------------------------------------------------------------------------------
# Issuing
# --------------------------------------------------------------------------------------


def issue_blockers(invoice: Invoice) -> list[str]:
    """Why the invoice's month is not complete yet: runs of the tenant's leases with a
    slot in the month that have not finished, and finished ones ingest has not read."""
    runs = run_selectors.tenant_runs_in_period(
        tenant_id=invoice.tenant_id, start=invoice.period_start, end=invoice.period_end
    )
    name = invoice.label
    blockers = []
    unfinished = runs.filter(state__in=UNFINISHED).count()
    if unfinished:
        blockers.append(
            ngettext(
                "%(count)d probe run of %(invoice)s's period has not finished yet.",
                "%(count)d probe runs of %(invoice)s's period have not finished yet.",
                unfinished,
            )
            % {"count": unfinished, "invoice": name}
        )
    behind = runs.filter(pk__in=pending_runs().values("pk")).count()
    if behind:
        blockers.append(
            ngettext(
                "%(count)d finished probe run of %(invoice)s's period is not ingested yet.",
                "%(count)d finished probe runs of %(invoice)s's period are not ingested yet.",
                behind,
            )
            % {"count": behind, "invoice": name}
        )
    return blockers


def issue_warnings(invoice: Invoice) -> list[str]:
    """What the operator must read when the invoice is issued, which does not stop it:
    the metering gaps of its period (``billing.metering_gaps``), as recorded on the
    invoice once issued, or as they stand now for a draft."""
    found = (
        invoice.metering_gaps
        if invoice.status != InvoiceStatus.DRAFT
        else metering_gaps.reported(
            tenant_id=invoice.tenant_id, start=invoice.period_start, end=invoice.period_end
        )
    )
    zone = invoice.tenant.time_zone
    return [f"{invoice.label}: {metering_gaps.sentence(gap, zone)}" for gap in found]


@transaction.atomic
def issue_invoice(
    *,
    invoice: Invoice,
    force: bool = False,
    reason: str | None = None,
    actor: Any = None,
    now: datetime | None = None,
) -> Invoice:
    """Recompute the draft, then issue it: number, dates, identities, frozen. Refused
    before the month has ended, and while the month has unfinished or uningested runs
    unless ``force`` with a ``reason`` (both recorded on the invoice). The metering gaps of
    its period do not stop it: they are recorded on it (``metering_gaps``), and callers
    show them (``issue_warnings``)."""
    now = now or timezone.now()
    # The tenant row first, as drafting takes it: the two never wait on each other crosswise.
    lock_tenant(pk=invoice.tenant_id)
    locked = locking(Invoice.objects).select_related("tenant").get(pk=invoice.pk)
    if locked.status != InvoiceStatus.DRAFT:
        raise LifecycleError(
            _("Invoice %(invoice)s is %(status)s; only a draft can be issued.")
            % {"invoice": locked.label, "status": locked.get_status_display()}
        )
    tenant = locked.tenant
    if locked.period_end > now:
        raise LifecycleError(
            _("Invoice %(invoice)s cannot be issued before its period ends (%(end)s).")
            % {
                "invoice": locked.label,
                "end": locked.period_end.astimezone(ZoneInfo(tenant.time_zone)).strftime(
                    "%Y-%m-%d %H:%M"
                ),
            }
        )
    blockers = issue_blockers(locked)
    if blockers and not force:
        raise LifecycleError(
            _("Invoice %(invoice)s cannot be issued yet: %(why)s Wait, or force it with a reason.")
            % {"invoice": locked.label, "why": " ".join(blockers)}
        )
    text = _reason(reason, _("issue an invoice by force")) if blockers else ""
    # Results that arrived since the draft was computed go on it, not on the next one.
    locked, computed = invoicing.drafted(tenant=tenant, period=locked.period, now=now)
    issued_on = issue_date_of(now, tenant.time_zone)
    seller = seller_identity()
    locked.number = next_number(
        series=INVOICE_SERIES, seller_tax_id=seller["tax_id"], year=issued_on.year
    )
    locked.status = InvoiceStatus.ISSUED
    locked.issued_at = now
    locked.issue_date = issued_on
    locked.due_date = due_date_of(issued_on)
    locked.seller = seller
    locked.buyer = tenant.buyer_identity()
    locked.forced_reason = text
    locked.forced_over = blockers
    locked.metering_gaps = metering_gaps.reported(
        tenant_id=tenant.pk, start=locked.period_start, end=locked.period_end
    )
    locked.save()

    # Late changes to earlier months' vouchers first, then the vouchers of earlier months
    # are used (after tax), then the ones this month earned are issued.
    def voucher_number() -> str:
        return next_number(
            series=vouchers.SERIES, seller_tax_id=seller["tax_id"], year=issued_on.year
        )

    vouchers.adjust(
        invoice=locked, changes=computed.voucher_changes, now=now, number=voucher_number
    )
    vouchers.redeem(invoice=locked, now=now)
    vouchers.issue(invoice=locked, credits=computed.voucher_credits, now=now, number=voucher_number)
    _record(
        locked,
        InvoiceEventKind.ISSUED,
        before=InvoiceStatus.DRAFT,
        actor=actor,
        at=now,
        reason=text,
    )
    return locked


@transaction.atomic
def mark_paid(
    *,
    invoice: Invoice,
    paid_on: date | None = None,
    actor: Any = None,
    now: datetime | None = None,
) -> Invoice:
    """issued → paid. ``paid_on`` is the day the money arrived in the tenant's zone
    (default: today there), not before the issue date and not after today; a day before
    today is stored as its first instant there, today as now."""
    now = now or timezone.now()
    locked = locking(Invoice.objects).select_related("tenant").get(pk=invoice.pk)
    if locked.status != InvoiceStatus.ISSUED:
        raise LifecycleError(
            _("Invoice %(invoice)s is %(status)s; only an issued invoice can be paid.")
            % {"invoice": locked.label, "status": locked.get_status_display()}
        )
    zone = locked.tenant.time_zone
    today = issue_date_of(now, zone)
    day = paid_on or today
    if day > today:
        raise ValidationError(
            {
                "paid_on": _(
                    "A payment cannot be dated in the future: today is %(today)s in %(zone)s."
                )
                % {"today": today.isoformat(), "zone": zone}
            }
        )
    if locked.issue_date is not None and day < locked.issue_date:
        raise ValidationError(
            {
                "paid_on": _(
                    "Invoice %(invoice)s was issued on %(issued)s; it cannot be paid before."
                )
                % {"invoice": locked.label, "issued": locked.issue_date.isoformat()}
            }
        )
    locked.status = InvoiceStatus.PAID
    locked.paid_at = now if day == today else datetime.combine(day, time(), ZoneInfo(zone))
    locked.save(update_fields=["status", "paid_at", "updated_at"])
    _record(locked, InvoiceEventKind.PAID, before=InvoiceStatus.ISSUED, actor=actor, at=now)
    return locked


@transaction.atomic
def void_invoice(
    *, invoice: Invoice, reason: str, actor: Any = None, now: datetime | None = None
) -> Invoice:
    """issued → void, with a reason; it keeps its number, and the month may be drafted
    and issued again. Refused once paid, once a credit note references it, once another
    invoice carries adjustments to it (voiding would count them twice), and once a voucher
    it issued is used. The vouchers it issued are voided with it; the vouchers it used are
    released (``billing.vouchers``)."""
    text = _reason(reason, _("void an invoice"))
    locked = locking(Invoice.objects).select_related("tenant").get(pk=invoice.pk)
    if locked.status != InvoiceStatus.ISSUED:
        raise LifecycleError(
            _("Invoice %(invoice)s is %(status)s; only an issued, unpaid invoice can be voided.")
            % {"invoice": locked.label, "status": locked.get_status_display()}
        )
    if locked.credit_notes.exists():
        raise LifecycleError(
            _("Invoice %(invoice)s has credit notes; it cannot be voided.")
            % {"invoice": locked.label}
        )
    carried = (
        InvoiceLine.objects.filter(detail__adjusted_invoice=locked.pk)
        .exclude(invoice__status=InvoiceStatus.VOID)
        .values_list("invoice__period", flat=True)
        .distinct()
    )
    carried = sorted({*carried, *vouchers.carried_by(locked)})
    if carried:
        raise LifecycleError(
            _(
                "Invoice %(invoice)s cannot be voided: the invoices of %(periods)s carry "
                "adjustments to it."
            )
            % {"invoice": locked.label, "periods": ", ".join(sorted(carried))}
        )
    used = vouchers.used_issued(locked)
    if used:
        raise LifecycleError(used)
    locked.status = InvoiceStatus.VOID
    locked.voided_at = now or timezone.now()
    vouchers.void_issued(locked, locked.voided_at)
    locked.void_reason = text
    locked.save(update_fields=["status", "voided_at", "void_reason", "updated_at"])
    _record(
        locked,
        InvoiceEventKind.VOIDED,
        before=InvoiceStatus.ISSUED,
        actor=actor,
        at=locked.voided_at,
        reason=text,
    )
    return locked


# --------------------------------------------------------------------------------------
# Credit notes
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Correction:
    """Take ``amount`` (0.01 or more) off the line at ``position``: a charge goes down by
    it, a credit line (negative) shrinks by it."""

    position: int
    amount: Decimal


def credited(line: InvoiceLine) -> Decimal:
    """What earlier credit notes already took off this line (signed)."""
    return sum((note_line.amount for note_line in line.credit_note_lines.all()), Decimal("0.00"))


def _amount(value: Any, position: int) -> Decimal:
    try:
        amount = Decimal(str(value))
    except (InvalidOperation, ValueError):
        amount = Decimal("NaN")
    if not amount.is_finite() or amount != amount.quantize(FEN):
        raise ValidationError(
            {
                "lines": _("Line %(position)d: the amount must be in CNY to the fen (0.01).")
                % {"position": position}
            }
        )
    return amount


def _corrections(
    invoice: Invoice, lines: dict[int, InvoiceLine], asked: Iterable[Correction] | None
) -> list[tuple[InvoiceLine, Decimal]]:
    if asked is None:  # a full reversal: whatever is left of every line
        result = [(line, -(line.amount + credited(line))) for line in lines.values()]
        return [(line, amount) for line, amount in result if amount != 0]
    result = []
    seen = set()
    for correction in asked:
        line = lines.get(correction.position)
        if line is None:
            raise ValidationError(
                {
                    "lines": _("Invoice %(invoice)s has no line %(position)s.")
                    % {"invoice": invoice.label, "position": correction.position}
                }
            )
        if correction.position in seen:
            raise ValidationError(
                {"lines": _("Line %(position)d is named twice.") % {"position": line.position}}
            )
        seen.add(correction.position)
        amount = _amount(correction.amount, line.position)
        left = abs(line.amount + credited(line))
        if not 0 < amount <= left:
            raise ValidationError(
                {
                    "lines": _(
                        "Line %(position)d is %(amount)s and %(left)s of it is left to "
                        "credit; a correction takes off between 0.01 and what is left "
                        "(asked: %(asked)s)."
                    )
                    % {
                        "position": line.position,
                        "amount": line.amount,
                        "left": left,
                        "asked": amount,
                    }
                }
            )
        result.append((line, -amount if line.amount > 0 else amount))
    return result


@transaction.atomic
def create_credit_note(
    *,
    invoice: Invoice,
    reason: str,
    corrections: Iterable[Correction] | None = None,
    kind: str = CreditNoteKind.CORRECTION,
    actor: Any = None,
    now: datetime | None = None,
) -> CreditNote:
    """A credit note on an issued (or paid) invoice: the given line corrections, or with
    none given the full reversal of what is left. Tax per rate group, rounded half-up
    once per group; the note must take money off (its subtotal is negative). ``kind``
    (``CreditNoteKind``) says whether the month's recomputation counts it."""
    text = _reason(reason, _("issue a credit note"))
    if kind not in CreditNoteKind.values:
        raise ValidationError({"kind": _("Unknown credit note kind %(kind)r.") % {"kind": kind}})
    now = now or timezone.now()
    locked = locking(Invoice.objects).select_related("tenant").get(pk=invoice.pk)
    if locked.status not in (InvoiceStatus.ISSUED, InvoiceStatus.PAID):
        raise LifecycleError(
            _("Invoice %(invoice)s is %(status)s; credit notes correct issued invoices only.")
            % {"invoice": locked.label, "status": locked.get_status_display()}
        )
    lines = {
        line.position: line
        for line in locked.lines.select_related("lease", "invoice").prefetch_related(
            "credit_note_lines"
        )
    }
    chosen = _corrections(locked, lines, corrections)
    totals = invoice_totals_by_rate([(amount, line.tax_rate_percent) for line, amount in chosen])
    subtotal = totals.subtotal
    if not chosen or subtotal >= 0:
        raise ValidationError(
            {
                "lines": _(
                    "A credit note must take money off invoice %(invoice)s; these "
                    "corrections add up to %(subtotal)s."
                )
                % {"invoice": locked.label, "subtotal": subtotal}
            }
        )
    issued_on = issue_date_of(now, locked.tenant.time_zone)
    seller = locked.seller or seller_identity()
    note = CreditNote.objects.create(
        tenant=locked.tenant,
        invoice=locked,
        number=next_number(
            series=CREDIT_NOTE_SERIES, seller_tax_id=seller["tax_id"], year=issued_on.year
        ),
        reason=text,
        kind=kind,
        full_reversal=corrections is None,
        issued_at=now,
        issue_date=issued_on,
        currency=locked.currency,
        subtotal=subtotal,
        tax=totals.tax,
        total=totals.total,
        seller=seller,
        buyer=locked.buyer,
    )
    CreditNoteLine.objects.bulk_create(
        CreditNoteLine(
            credit_note=note,
            position=position,
            original_line=line,
            lease=line.lease,
            kind=line.kind,
            description=f"Correction of {locked.number} line {line.position}: {line.description}"[
                :500
            ],
            amount=amount,
            tax_rate_percent=line.tax_rate_percent,
        )
        for position, (line, amount) in enumerate(chosen, start=1)
    )
    # The vouchers the invoice used get back their share of what is credited.
    vouchers.give_back(note=note, now=now)
    _record(
        locked,
        InvoiceEventKind.CREDITED,
        before=locked.status,
        actor=actor,
        at=now,
        reason=text,
        note=note,
    )
    return note


def corrections_from(data: Iterable[Mapping[str, Any]]) -> list[Correction]:
    """API and command input: [{"position": 2, "amount": "100.00"}, ...]."""
    return [Correction(int(item["position"]), item["amount"]) for item in data]


# --------------------------------------------------------------------------------------
# The bill command's whole run
# --------------------------------------------------------------------------------------


def issue_period(
    *,
    period: str,
    tenant: Tenant | None = None,
    force: bool = False,
    reason: str | None = None,
    actor: Any = None,
    now: datetime | None = None,
) -> tuple[list[Invoice], list[str]]:
    """Draft the month, then issue each draft. Returns the invoices and, per draft that
    could not be issued, the refusal (the others are issued all the same)."""
    Period.parse(period)
    invoices, refusals = [], []
    for drafted in draft_period(period=period, tenant=tenant, now=now):
        if drafted.status != InvoiceStatus.DRAFT:
            invoices.append(drafted)
            continue
        try:
            with transaction.atomic():
                drafted = issue_invoice(
                    invoice=drafted, force=force, reason=reason, actor=actor, now=now
                )
        except ValidationError as error:
            refusals.append(" ".join(error.messages))
            drafted.refresh_from_db()
        invoices.append(drafted)
    return invoices, refusals


__all__ = [
    "Correction",
    "LifecycleError",
    "corrections_from",
    "create_credit_note",
    "draft_invoice",
    "draft_period",
    "issue_blockers",
    "issue_invoice",
    "issue_period",
    "issue_warnings",
    "mark_paid",
    "next_number",
    "seller_identity",
    "void_invoice",
]
