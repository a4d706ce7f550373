"""Late changes to billed months, and accepted disputes (package docstring, rule 6). An
issued invoice never changes: its month is recomputed in memory and compared with what has
been billed for it so far, by (lease, kind, tax rate); each difference is one adjustment
line on the next open draft, at the rate of the lines it adjusts."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from django.db.models import Prefetch, Q

from billing.choices import BILLED_INVOICE_STATUSES, CreditNoteKind, InvoiceStatus, LineKind
from billing.invoicing.computed import (
    KIND_NAMES,
    KIND_ORDER,
    ZERO,
    ComputedLine,
    VoucherChange,
    iso,
    local,
    money,
    rate_text,
)
from billing.invoicing.lines import lease_part
from billing.models import CreditNoteLine, Dispute, Invoice, InvoiceLine, Voucher, VoucherReduction
from leases.models import Lease, Tenant
from leases.selectors import TermsTimeline, leases_among

# (lease, kind, tax rate): what an adjustment compares. A rate change moves an amount from
# one key to another, so a corrected rate gives a line off the old rate and one onto the
# new, each taxed at its own rate.
Key = tuple[int | None, str, Decimal]


def adjustable_invoices(tenant: Tenant, period: str) -> list[Invoice]:
    """The tenant's issued or paid invoices of months before ``period`` whose next open
    draft is this month's: no other draft lies between them and it."""
    drafts = list(
        Invoice.objects.filter(
            tenant=tenant, status=InvoiceStatus.DRAFT, period__lt=period
        ).values_list("period", flat=True)
    )
    billed = Invoice.objects.filter(
        tenant=tenant, status__in=BILLED_INVOICE_STATUSES, period__lt=period
    ).order_by("period")
    return [invoice for invoice in billed if not any(draft > invoice.period for draft in drafts)]


def billed_so_far(invoice: Invoice) -> tuple[dict[Key, Decimal], dict[Key, list[dict[str, Any]]]]:
    """What has been billed for the invoice's month, by (lease, kind, tax rate): its lease
    lines, the adjustment lines issued invoices carry for it, and the correction credit
    notes on both (a commercial credit is never counted, so no recomputation takes it
    back), each at the rate it was taxed at. Also, per key, where each amount comes from."""
    amounts: dict[Key, Decimal] = defaultdict(lambda: ZERO)
    sources: dict[Key, list[dict[str, Any]]] = defaultdict(list)

    def add(key: Key, amount: Decimal, source: dict[str, Any]) -> None:
        amounts[key] += amount
        sources[key].append({**source, "amount": money(amount)})

    for line in invoice.lines.exclude(kind=LineKind.ADJUSTMENT).filter(lease__isnull=False):
        source = {"invoice": invoice.pk, "position": line.position}
        add((line.lease_id, line.kind, line.tax_rate_percent), line.amount, source)
    carried = InvoiceLine.objects.filter(
        invoice__tenant_id=invoice.tenant_id,
        invoice__status__in=BILLED_INVOICE_STATUSES,
        kind=LineKind.ADJUSTMENT,
        detail__adjusted_invoice=invoice.pk,
    ).order_by("invoice__period", "position")
    for line in carried:
        key = (line.lease_id, line.detail["adjusted_kind"], line.tax_rate_percent)
        add(key, line.amount, {"invoice": line.invoice_id, "position": line.position})
    notes = CreditNoteLine.objects.filter(
        Q(original_line__invoice=invoice, original_line__lease__isnull=False)
        & ~Q(original_line__kind=LineKind.ADJUSTMENT)
        | Q(original_line__in=carried),
        credit_note__kind=CreditNoteKind.CORRECTION,
    ).select_related("credit_note", "original_line")
    for note_line in notes.order_by("credit_note__issued_at", "credit_note_id", "position"):
        original = note_line.original_line
        kind = original.detail.get("adjusted_kind", original.kind)
        add(
            (original.lease_id, kind, note_line.tax_rate_percent),
            note_line.amount,
            {"credit_note": note_line.credit_note.number, "position": note_line.position},
        )
    return amounts, sources


def adjustments(
    tenant: Tenant, period: str, vouchers: list[VoucherChange] | None = None
) -> list[ComputedLine]:
    """Late changes to the billed months this draft is the next open invoice of: one
    line per (lease, kind, rate) whose recomputation differs from what was billed so far.
    A credit given as vouchers is no line: a change to it goes into ``vouchers`` when
    given (``voucher_changes``)."""
    result: list[ComputedLine] = []
    for billed in adjustable_invoices(tenant, period):
        result += _adjust_month(tenant, billed, vouchers)
    return result


def month_vouchers(tenant_id: int, period: str) -> dict[int, list[Voucher]]:
    """The live vouchers of the tenant's month, by lease, in issue order (the first is the
    one the month's invoice issued, or the first a late result did): not void, issued
    with an invoice that is not void."""
    found: dict[int, list[Voucher]] = defaultdict(list)
    rows = (
        Voucher.objects.filter(tenant_id=tenant_id, period=period, voided_at__isnull=True)
        .exclude(source_invoice__status=InvoiceStatus.VOID)
        .select_related("lease")
        .prefetch_related(
            Prefetch("reductions", queryset=VoucherReduction.objects.select_related("invoice"))
        )
        .order_by("issued_at", "number")
    )
    for voucher in rows:
        found[voucher.lease_id].append(voucher)
    return found


def given_so_far(vouchers: list[Voucher]) -> Decimal:
    """What a month's vouchers give the lease so far: their amounts less the reductions
    late results made (excess included: the lowering the month took, used or not)."""
    total = ZERO
    for voucher in vouchers:
        total += voucher.amount
        for reduction in voucher.reductions.all():
            if reduction.invoice.status != InvoiceStatus.VOID:
                total -= reduction.amount + reduction.excess
    return total


def voucher_changes(
    tenant: Tenant, billed: Invoice, credits: list[ComputedLine]
) -> list[VoucherChange]:
    """The leases of a billed month whose credit, given as vouchers, is recomputed to
    another amount than the month's vouchers give so far (``credits``: the voucher credits
    the month earns now, as the lines they would be)."""
    so_far = month_vouchers(tenant.pk, billed.period)
    now = {line.lease.pk: line for line in credits if line.lease is not None}
    leases = {line.lease.pk: line.lease for line in credits if line.lease is not None}
    for lease_id, found in so_far.items():
        leases.setdefault(lease_id, found[0].lease)
    changes = []
    for lease_id in sorted(leases, key=lambda pk: leases[pk].reference):
        line = now.get(lease_id)
        recomputed = -line.amount if line is not None else ZERO
        given = given_so_far(so_far.get(lease_id, []))
        if recomputed == given:
            continue
        changes.append(
            VoucherChange(
                lease=leases[lease_id],
                period=billed.period,
                adjusted_invoice=billed.pk,
                adjusted_invoice_number=billed.number,
                given=given,
                recomputed=recomputed,
                validity_months=(
                    int(line.detail["voucher_validity_months"]) if line is not None else None
                ),
                detail=(
                    {"recomputed_credit": {"description": line.description, **line.detail}}
                    if line is not None
                    else {"recomputed_credit": None}
                ),
            )
        )
    return changes


def _adjust_month(
    tenant: Tenant, billed: Invoice, vouchers: list[VoucherChange] | None = None
) -> list[ComputedLine]:
    before = billed.period
    old, sources = billed_so_far(billed)
    leases = {lease.pk: lease for lease in leases_among(ids={k[0] for k in old})}
    new: dict[Key, Decimal] = defaultdict(lambda: ZERO)
    new_lines: dict[Key, list[ComputedLine]] = defaultdict(list)
    credits: list[ComputedLine] = []
    lines = lease_part(tenant, before, credits)
    if vouchers is not None:
        vouchers += voucher_changes(tenant, billed, credits)
    for line in lines:
        new[line.key] += line.amount
        new_lines[line.key].append(line)
        if line.lease is not None:
            leases[line.lease.pk] = line.lease
    keys = {(lease_id, kind, rate) for lease_id, kind, rate in {*old, *new} if lease_id is not None}
    rates: dict[tuple[int, str], set[Decimal]] = defaultdict(set)
    for lease_id, kind, rate in keys:
        rates[(lease_id, kind)].add(rate)
    changed = sorted(
        (key for key in keys if old[key] != new[key]),
        key=lambda key: (leases[key[0]].reference, KIND_ORDER.index(LineKind(key[1])), key[2]),
    )
    result = []
    for key in changed:
        lease_id, kind, rate = key
        lease = leases[lease_id]
        difference = new[key] - old[key]
        name = KIND_NAMES[LineKind(kind)]
        # The rate is named only where the kind was billed at more than one.
        at_rate = f" at {rate_text(rate)}% VAT" if len(rates[(lease_id, kind)]) > 1 else ""
        result.append(
            ComputedLine(
                lease=lease,
                kind=LineKind.ADJUSTMENT,
                description=(
                    f"Adjustment for {before}: {name}{at_rate} of {lease.reference} "
                    f"recomputed from late results: {money(old[key])} → {money(new[key])}"
                ),
                quantity=Decimal(1),
                unit="adjustment",
                unit_price=difference,
                amount=difference,
                detail={
                    "lease": lease.reference,
                    "adjusted_period": before,
                    "adjusted_invoice": billed.pk,
                    "adjusted_invoice_number": billed.number,
                    "adjusted_kind": kind,
                    "adjusted_tax_rate_percent": str(rate),
                    # The name predates credit notes: what has been billed so far.
                    "finalised_amount": money(old[key]),
                    "billed_from": sources[key],
                    "recomputed_amount": money(new[key]),
                    "difference": money(difference),
                    "recomputed_lines": [
                        {
                            "description": line.description,
                            "amount": money(line.amount),
                            **line.detail,
                        }
                        for line in new_lines[key]
                    ],
                    "rule": (
                        "recomputed minus billed so far (the invoice's lines, adjustments "
                        "issued since, credit notes), by lease, kind and tax rate; taxed at "
                        "that rate"
                    ),
                },
                tax_rate_percent=rate,
            )
        )
    return result


def _service_rate(lease: Lease, dispute: Dispute) -> Decimal:
    """The network service's rate of the terms in force when the dispute was accepted
    (the latest version if it has no decision time or predates the first)."""
    timeline = TermsTimeline.for_lease(lease)
    terms = timeline.at(dispute.decided_at) if dispute.decided_at else None
    if terms is None:
        terms = list(timeline)[-1]
    return terms.tax_rate_percent


def dispute_credits(tenant: Tenant, period: str) -> list[ComputedLine]:
    """One negative adjustment line per accepted dispute whose credit goes on this
    month's invoice (its ``credit_period``, the month it was accepted in), at the network
    service's rate: a dispute is about the network the lease was promised. A redraft finds
    the same disputes, so the credit is on this invoice once and on no other."""
    from billing.evidence import accepted_credits

    return [
        ComputedLine(
            lease=dispute.lease,
            kind=LineKind.ADJUSTMENT,
            description=(
                f"Credit for dispute #{dispute.pk} on {dispute.lease.reference}, accepted "
                f"{local(dispute.decided_at, tenant.time_zone)}"
                if dispute.decided_at
                else f"Credit for dispute #{dispute.pk} on {dispute.lease.reference}"
            ),
            quantity=Decimal(1),
            unit="adjustment",
            unit_price=-dispute.credit_cny,
            amount=-dispute.credit_cny,
            detail={
                "lease": dispute.lease.reference,
                "dispute": dispute.pk,
                "credit_cny": money(dispute.credit_cny),
                "credit_period": dispute.credit_period,
                "accepted_at": iso(dispute.decided_at),
                "decision_reason": dispute.decision_reason,
                "rule": "accepted dispute: minus the credit the provider granted",
            },
            tax_rate_percent=_service_rate(dispute.lease, dispute),
        )
        for dispute in accepted_credits(tenant_id=tenant.pk, period=period)
    ]
