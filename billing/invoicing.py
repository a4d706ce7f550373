"""Invoices: one per tenant and billing month, computed from the contract terms, the node
assignments, the traffic samples and the hourly SLA rollups. All arithmetic and every
rounding is ``gpulease_verify.calculations``; this module only chooses the inputs, records them in
each line's ``detail`` and saves the result.

The rules, in the order an invoice is built:

1. **Period.** A calendar month in the tenant's time zone (``gpulease_verify.periods.Period``).
   Every proration divides by that month's seconds (``Period.seconds``), whatever part of it a
   lease covers.
2. **Leases.** The tenant's leases that are active or ended (drafts and cancelled leases
   are never billed) and overlap the month, in reference order.
3. **Billing start.** A lease whose first terms version says
   ``billing_starts_on_acceptance`` is billed from the finish of its first passing
   acceptance (``billing_start``). Not yet accepted: the lease gets no line at all this
   month; its charges start in the month the acceptance passes.
4. **Segments.** The billed window ``[max(month start, lease start, billing start),
   min(month end, lease end))`` is cut wherever a terms version takes effect, so a
   mid-month amendment gives two segments, each priced by its own version.
5. **Lines of a lease**, each amount rounded half-up to 0.01 CNY once:

   - *node rent*, per segment: the node-seconds of every live assignment inside the
     segment (a swap is two assignments that add up) x rate / month seconds;
   - *network fee*, per segment, for the monthly and yearly plans (包月/包年, both billed
     monthly): fee x segment seconds / month seconds. The pay-per-use modes replace the
     fixed fee, so it is not billed there;
   - *traffic* (按量计费), per segment: bytes of the samples whose slot starts in the
     segment (``metering.samples_in``; an interval that straddles the month boundary is
     split pro rata by time, ``billing.traffic_intervals``) x price per GB;
   - *95th percentile* (95计费), per segment: the p95 of the segment's own samples, in
     billable Mbps, x price per Mbps x segment seconds / month seconds. A mid-month
     price or bandwidth change therefore bills each part's p95 for its share of the
     month; a lease that starts mid-month pays its p95 for the share it ran;
   - *SLA credit*, once per lease, automatic (no claim): the compliance over the whole
     billed window (``billing.sla.evaluate``), the credit tiers and cap of the terms in
     force at the end of that window, applied to the credit base: per segment, what its
     terms' ``credit_base`` names (``gpulease_verify.credit_base``): the network fee lines
     (default), the usage lines (per GB, 95th percentile), or the contracted monthly
     base fee (保底) prorated. No base, unknown compliance, or compliance at or above
     every tier: no line.

6. **Adjustments.** An issued (or paid) invoice never changes. Each of the tenant's
   billed months before this one whose next open draft this is (no other draft lies
   between them) is recomputed now, in memory, by the same code, and compared with what
   has been billed for it so far: its own lease lines, plus the adjustment lines that
   issued invoices already carry for it (``detail.adjusted_invoice``), plus the credit
   notes on those lines. Every (lease, kind) whose amount differs gives one adjustment
   line of the difference, whatever month it belongs to; once that draft is issued the
   line counts as billed, so nothing is carried twice and nothing is lost. An accepted
   dispute's credit (``billing.evidence``) is one more adjustment line, minus the credit,
   on the invoice of the month it was accepted in.
7. **Tax and totals.** One tax rate per invoice: the highest rate among the terms versions
   billed on it (lines record their own version's rate, and ``invoice_summary`` says so
   when they differ). ``invoice_totals`` rounds the tax once, on the subtotal.
8. **Network cost share.** (network fee + usage) / (rent + network fee + usage), before
   credits, tax and adjustments: per invoice on the invoice, per lease in each of the
   lease's lines' detail.

A draft is recomputed from scratch each time (its lines are deleted and rebuilt), so the
same inputs give the same lines, positions and amounts; re-rating a past window after a
terms correction is just drafting again. Descriptions are written in English so that a
re-draft is identical whatever language the request ran in.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, Max, Min, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks.choices import RunState, Trigger
from benchmarks.models import ProbeRun
from billing import metering, sla
from billing.choices import BILLED_INVOICE_STATUSES, InvoiceStatus, LineKind
from billing.models import CreditNoteLine, Invoice, InvoiceLine
from gpulease_verify import credit_base
from gpulease_verify import window as billed_window
from gpulease_verify.calculations import (
    P95_DROP_PERCENT,
    CreditResult,
    billable_mbps,
    bytes_to_gb,
    invoice_totals,
    network_cost_share,
    node_rent_line,
    overlap_seconds,
    prorate,
    sla_credit,
    traffic_charge,
)
from gpulease_verify.money import ROUNDING, to_fen
from gpulease_verify.periods import Period, PeriodError
from leases.choices import BillingMode
from leases.contract_rules import credit_tiers
from leases.models import Lease, LeaseTerms, NodeAssignment, Tenant
from leases.selectors import TermsTimeline

QUANTITY = Decimal("0.000001")
ZERO = Decimal("0.00")
BILLED_STATUSES = billed_window.BILLED_STATUSES  # active, ended
FIXED_FEE_MODES = (BillingMode.MONTHLY, BillingMode.YEARLY)
USAGE_KINDS = (LineKind.USAGE_GB, LineKind.USAGE_P95)
# Order of a lease's lines on the invoice, and of adjustment lines.
KIND_ORDER = [
    LineKind.NODE_RENT,
    LineKind.NETWORK_FEE,
    LineKind.USAGE_GB,
    LineKind.USAGE_P95,
    LineKind.SLA_CREDIT,
    LineKind.ADJUSTMENT,
]
# Stored descriptions are English (see the module docstring); the UI translates kinds.
KIND_NAMES = {
    LineKind.NODE_RENT: "Node rent",
    LineKind.NETWORK_FEE: "Network fee",
    LineKind.USAGE_GB: "Traffic",
    LineKind.USAGE_P95: "95th percentile bandwidth",
    LineKind.SLA_CREDIT: "SLA credit",
    LineKind.ADJUSTMENT: "Adjustment",
}


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------


def _iso(instant: datetime | None) -> str | None:
    """ISO 8601 in UTC with a Z: the form every detail uses."""
    if instant is None:
        return None
    return instant.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _local(instant: datetime, zone: str) -> str:
    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M")


def _fraction(covered_seconds: int, period_seconds: int) -> Decimal:
    """covered / period to 6 decimals, half-up: the printed quantity of a line."""
    return prorate(
        monthly_amount=1, covered_seconds=covered_seconds, period_seconds=period_seconds
    ).quantize(QUANTITY, rounding=ROUNDING)


def _money(value: Decimal) -> str:
    return f"{value:.2f}"


def previous_period(period: str) -> str:
    """'2026-11' -> '2026-10'; '2027-01' -> '2026-12'."""
    return str(Period.parse(period).previous)


def check_period(period: str) -> None:
    try:
        Period.parse(period)
    except PeriodError:
        raise ValidationError(
            _("The period must be written YYYY-MM, got %(period)r.") % {"period": period}
        ) from None


# --------------------------------------------------------------------------------------
# Reads: billing start, segments
# --------------------------------------------------------------------------------------


def billing_start(lease: Lease) -> datetime | None:
    """When the lease's first passing acceptance finished; None while none has passed.

    An acceptance attempt is the set of the lease's runs with trigger ``acceptance`` and
    the same slot (the dispatcher creates them together). Skipped runs are ignored. It
    passes when every other run has finished, none failed, timed out, was unreachable,
    unparsable or missed, every verdict given is "pass" and there is at least one. Billing
    starts at the latest ``finished_at`` of its runs. Attempts are tried in slot order.
    """
    runs = (
        ProbeRun.objects.filter(lease_id=lease.pk, trigger=Trigger.ACCEPTANCE)
        .exclude(state=RunState.SKIPPED)
        .order_by("slot_at", "pk")
        .values_list("slot_at", "state", "verdict", "finished_at")
    )
    return billed_window.billing_start(runs)


def _requires_acceptance(timeline: TermsTimeline) -> bool:
    """The first terms version decides (acceptance happens once, when the lease goes live)."""
    first = next(iter(timeline), None)
    return bool(first and first.billing_starts_on_acceptance)


@dataclass(frozen=True)
class Segment:
    """A stretch of the billed window under one terms version."""

    start: datetime
    end: datetime
    terms: LeaseTerms

    @property
    def seconds(self) -> int:
        return overlap_seconds(
            start=self.start, end=self.end, period_start=self.start, period_end=self.end
        )

    def describe(self) -> dict[str, Any]:
        return {
            "terms_version": self.terms.version,
            "segment_start": _iso(self.start),
            "segment_end": _iso(self.end),
            "segment_seconds": self.seconds,
        }


def segments(*, timeline: TermsTimeline, start: datetime, end: datetime) -> list[Segment]:
    """[start, end) cut at every terms version that takes effect inside it."""
    pieces = billed_window.cut(
        start=start, end=end, effective_from=[t.effective_from for t in timeline]
    )
    in_force = [(lo, hi, timeline.at(lo)) for lo, hi in pieces]
    return [Segment(start=lo, end=hi, terms=terms) for lo, hi, terms in in_force if terms]


# --------------------------------------------------------------------------------------
# Computation (no writes)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComputedLine:
    lease: Lease | None
    kind: str
    description: str
    quantity: Decimal
    unit: str
    unit_price: Decimal
    amount: Decimal
    detail: dict[str, Any]
    tax_rate_percent: Decimal | None = None  # of the terms the line was priced by

    @property
    def key(self) -> tuple[int | None, str]:
        return (self.lease.pk if self.lease else None, self.kind)


@dataclass
class ComputedInvoice:
    tenant: Tenant
    period: str
    period_start: datetime
    period_end: datetime
    lines: list[ComputedLine] = field(default_factory=list)
    tax_rate_percent: Decimal = Decimal("0")
    subtotal: Decimal = ZERO
    tax: Decimal = ZERO
    total: Decimal = ZERO
    network_cost_share: Decimal | None = None


@dataclass(frozen=True)
class _Month:
    period: str
    zone: str
    start: datetime
    end: datetime
    seconds: int

    @classmethod
    def of(cls, period: str, zone: str) -> _Month:
        month = Period.parse(period)
        start, end = month.bounds(zone)
        return cls(period, zone, start, end, month.seconds(zone))

    def describe(self) -> dict[str, Any]:
        return {
            "period": self.period,
            "time_zone": self.zone,
            "month_start": _iso(self.start),
            "month_end": _iso(self.end),
            "month_seconds": self.seconds,
        }


def _span(segment: Segment, zone: str) -> str:
    return f"{_local(segment.start, zone)} to {_local(segment.end, zone)}"


def _rent_line(
    lease: Lease, segment: Segment, month: _Month, assignments: list[NodeAssignment]
) -> ComputedLine | None:
    rate = segment.terms.node_rent_per_month
    clipped: list[tuple[datetime, datetime]] = []
    used: list[dict[str, Any]] = []
    spans = billed_window.assignment_spans(
        assignments=[(a.assigned_from, a.assigned_until) for a in assignments],
        lease_end=lease.ends_at,
        segment=(segment.start, segment.end),
    )
    for assignment, span in zip(assignments, spans, strict=True):
        if span is None:
            continue
        lo, hi = span
        clipped.append((lo, hi))
        used.append(
            {
                "node": assignment.node.hostname,
                "assigned_from": _iso(assignment.assigned_from),
                "assigned_until": _iso(assignment.assigned_until),
                "seconds_in_segment": overlap_seconds(
                    start=lo, end=hi, period_start=lo, period_end=hi
                ),
            }
        )
    if not clipped:
        return None
    # The period is the whole month, so the denominator is the month's seconds; the
    # assignments are already clipped to the segment.
    rent = node_rent_line(
        monthly_rate=rate, assignments=clipped, period_start=month.start, period_end=month.end
    )
    quantity = _fraction(rent.node_seconds, month.seconds)
    return ComputedLine(
        lease=lease,
        kind=LineKind.NODE_RENT,
        description=(
            f"Node rent, {lease.reference} (terms v{segment.terms.version}), "
            f"{_span(segment, month.zone)}: {quantity} node-months at {_money(rate)}"
        ),
        quantity=quantity,
        unit="node-month",
        unit_price=rate,
        amount=rent.amount,
        detail={
            **month.describe(),
            **segment.describe(),
            "node_seconds": rent.node_seconds,
            "monthly_rate": _money(rate),
            "assignments": used,
            "rule": "monthly_rate x node_seconds / month_seconds, half-up to 0.01",
        },
        tax_rate_percent=segment.terms.tax_rate_percent,
    )


def _fee_line(lease: Lease, segment: Segment, month: _Month) -> ComputedLine | None:
    terms = segment.terms
    fee = terms.network_fee_per_month
    if terms.billing_mode not in FIXED_FEE_MODES or fee == 0 or segment.seconds == 0:
        return None
    amount = to_fen(
        prorate(monthly_amount=fee, covered_seconds=segment.seconds, period_seconds=month.seconds)
    )
    quantity = _fraction(segment.seconds, month.seconds)
    return ComputedLine(
        lease=lease,
        kind=LineKind.NETWORK_FEE,
        description=(
            f"Network fee, {lease.reference} (terms v{terms.version}, "
            f"{terms.contracted_bandwidth_gbps} Gbps, {terms.billing_mode}), "
            f"{_span(segment, month.zone)}: {quantity} month at {_money(fee)}"
        ),
        quantity=quantity,
        unit="month",
        unit_price=fee,
        amount=amount,
        detail={
            **month.describe(),
            **segment.describe(),
            "billing_mode": terms.billing_mode,
            "contracted_bandwidth_gbps": str(terms.contracted_bandwidth_gbps),
            "monthly_fee": _money(fee),
            "rule": "monthly_fee x segment_seconds / month_seconds, half-up to 0.01",
        },
        tax_rate_percent=terms.tax_rate_percent,
    )


def _sample_facts(lease: Lease, segment: Segment) -> dict[str, Any]:
    samples = metering.samples_in(lease_id=lease.pk, start=segment.start, end=segment.end)
    facts = samples.aggregate(count=Count("pk"), first=Min("slot_at"), last=Max("slot_at"))
    return {
        "samples": facts["count"],
        "first_slot": _iso(facts["first"]),
        "last_slot": _iso(facts["last"]),
    }


def _usage_line(lease: Lease, segment: Segment, month: _Month) -> ComputedLine | None:
    terms = segment.terms
    if terms.billing_mode == BillingMode.PER_GB:
        price = terms.price_per_gb
        total = metering.traffic_bytes(lease_id=lease.pk, start=segment.start, end=segment.end)
        quantity = bytes_to_gb(total).quantize(QUANTITY, rounding=ROUNDING)
        return ComputedLine(
            lease=lease,
            kind=LineKind.USAGE_GB,
            description=(
                f"Traffic, {lease.reference} (terms v{terms.version}), "
                f"{_span(segment, month.zone)}: {quantity} GB at {price}"
            ),
            quantity=quantity,
            unit="GB",
            unit_price=price,
            amount=traffic_charge(total_bytes=total, price_per_gb=price),
            detail={
                **month.describe(),
                **segment.describe(),
                **_sample_facts(lease, segment),
                "bytes": total,
                "price_per_gb": str(price),
                "rule": "bytes / 10^9 x price_per_gb, half-up to 0.01",
            },
            tax_rate_percent=terms.tax_rate_percent,
        )
    if terms.billing_mode == BillingMode.P95:
        price = terms.price_per_mbps_p95
        facts = _sample_facts(lease, segment)
        p95 = metering.p95_bps(lease_id=lease.pk, start=segment.start, end=segment.end)
        mbps = billable_mbps(p95) if p95 is not None else ZERO
        share = _fraction(segment.seconds, month.seconds)
        amount = to_fen(
            prorate(
                monthly_amount=mbps * price,
                covered_seconds=segment.seconds,
                period_seconds=month.seconds,
            )
        )
        return ComputedLine(
            lease=lease,
            kind=LineKind.USAGE_P95,
            description=(
                f"95th percentile bandwidth, {lease.reference} (terms v{terms.version}), "
                f"{_span(segment, month.zone)}: {mbps} Mbps at {price} for {share} month"
            ),
            quantity=mbps,
            unit="Mbps",
            unit_price=price,
            amount=amount,
            detail={
                **month.describe(),
                **segment.describe(),
                **facts,
                "dropped_samples": facts["samples"] * P95_DROP_PERCENT // 100,
                "p95_bps": None if p95 is None else str(p95),
                "billable_mbps": str(mbps),
                "price_per_mbps": str(price),
                "month_share": str(share),
                "rule": (
                    "billable_mbps x price_per_mbps x segment_seconds / month_seconds, "
                    "half-up to 0.01"
                ),
            },
            tax_rate_percent=terms.tax_rate_percent,
        )
    return None


@dataclass(frozen=True)
class LeaseCredit:
    """A lease's SLA credit for one month: the one computation every face shows (the
    invoice line, the SLA report, the portal, the API, the audit bundle)."""

    start: datetime  # the billed window: lease dates and acceptance, inside the month
    end: datetime
    summary: sla.SlaSummary
    terms: LeaseTerms  # the version in force at the window's end: tiers and cap
    base: credit_base.CreditBase  # from the lines actually billed, as each version says
    result: CreditResult

    @property
    def compliance(self) -> Decimal | None:
        return self.summary.credit_compliance_percent

    @property
    def network_fee(self) -> Decimal:
        """The base's amount, whatever it is made of (the SLA report's older name)."""
        return self.base.amount


def credit_spans(parts: list[Segment]) -> list[credit_base.Span]:
    """The segments with what each version's credits are on."""
    return [
        credit_base.Span(
            segment.start,
            segment.end,
            segment.terms.version,
            segment.terms.credit_base,
            segment.terms.contracted_base_per_month,
        )
        for segment in parts
    ]


def _credit(
    lease: Lease,
    window: tuple[datetime, datetime],
    terms: LeaseTerms,
    base: credit_base.CreditBase,
) -> LeaseCredit:
    start, end = window
    summary = sla.evaluate(lease=lease, start=start, end=end)
    result = sla_credit(
        base=base.amount,
        compliance_percent=summary.credit_compliance_percent,
        tiers=credit_tiers(terms.credit_tiers),
        cap_percent=terms.credit_cap_percent,
    )
    return LeaseCredit(start, end, summary, terms, base, result)


def _credit_line(
    lease: Lease, outcome: LeaseCredit, month: _Month, network_fee: Decimal
) -> ComputedLine | None:
    start, end, terms, base = outcome.start, outcome.end, outcome.terms, outcome.base
    summary, compliance, credit = outcome.summary, outcome.compliance, outcome.result
    tiers = credit_tiers(terms.credit_tiers)
    if credit.amount == 0:
        return None
    throughput, availability = summary.throughput, summary.availability
    return ComputedLine(
        lease=lease,
        kind=LineKind.SLA_CREDIT,
        description=(
            f"SLA credit, {lease.reference}: compliance {compliance}% from "
            f"{_local(start, month.zone)} to {_local(end, month.zone)}, "
            f"{credit.percent_applied}% of {base.name()}"
            + (f" (tier {credit.tier_percent}% capped)" if credit.capped else "")
        ),
        quantity=credit.percent_applied,
        unit="percent",
        unit_price=base.amount,
        amount=credit.amount,
        detail={
            **month.describe(),
            "terms_version": terms.version,
            "window_start": _iso(start),
            "window_end": _iso(end),
            "compliance_percent": str(compliance),
            "throughput": {
                "passed": throughput.passed,
                "failed": throughput.failed,
                "unknown": throughput.unknown,
                "excluded": throughput.excluded,
                "percent": None if throughput.percent is None else str(throughput.percent),
                "measured_percent": (
                    None
                    if throughput.measured_percent is None
                    else str(throughput.measured_percent)
                ),
            },
            "availability": {
                "available_minutes": availability.available_minutes,
                "unavailable_minutes": availability.unavailable_minutes,
                "unknown_minutes": availability.unknown_minutes,
                "percent": None if availability.percent is None else str(availability.percent),
            },
            "tiers": [{"below_percent": str(b), "credit_percent": str(c)} for b, c in tiers],
            "tier_percent": str(credit.tier_percent),
            "cap_percent": str(terms.credit_cap_percent),
            "percent_applied": str(credit.percent_applied),
            "capped": credit.capped,
            "reason": str(credit.reason),
            "credit_base": base.basis,
            "credit_base_amount": _money(base.amount),
            "credit_base_parts": [
                {
                    "terms_version": part.span.terms_version,
                    "credit_base": part.span.basis,
                    "start": _iso(part.span.start),
                    "end": _iso(part.span.end),
                    "amount": _money(part.amount),
                }
                for part in base.parts
            ],
            "network_fee": _money(network_fee),
            "rule": (
                "min(tier for compliance, cap) % of the credit base, half-up to 0.01, "
                "negative; the base per terms version: its network fee lines, its usage "
                "lines, or its contracted base fee x segment_seconds / month_seconds; "
                "compliance = lower of throughput and availability"
            ),
        },
        tax_rate_percent=terms.tax_rate_percent,
    )


def _share(lines: list[ComputedLine]) -> Decimal | None:
    def total(*kinds: str) -> Decimal:
        return sum((line.amount for line in lines if line.kind in kinds), ZERO)

    return network_cost_share(
        node_rent=total(LineKind.NODE_RENT),
        network_fee=total(LineKind.NETWORK_FEE),
        usage=total(*USAGE_KINDS),
    )


def lease_lines(*, lease: Lease, period: str, zone: str) -> list[ComputedLine]:
    """The lines of one lease for one month, computed and not saved (see the module
    docstring for the rules). No lines while an acceptance the terms require has not
    passed."""
    return _lease_month(lease, period, zone)[0]


def lease_credit(*, lease: Lease, period: str) -> LeaseCredit | None:
    """The lease's SLA credit for the month, on the base its terms name, from the lines its
    invoice carries (so prorated and amended months agree with the invoice to the fen);
    None when nothing is billed (before acceptance, outside the lease) or the base is 0.
    For a month in progress it is the credit the samples so far would earn."""
    return _lease_month(lease, period, lease.tenant.time_zone)[1]


def _lease_month(
    lease: Lease, period: str, zone: str
) -> tuple[list[ComputedLine], LeaseCredit | None]:
    month = _Month.of(period, zone)
    timeline = TermsTimeline.for_lease(lease)
    start = max(month.start, lease.starts_at)
    end = min(month.end, lease.ends_at) if lease.ends_at else month.end
    acceptance: dict[str, Any] = {}
    if _requires_acceptance(timeline):
        accepted = billing_start(lease)
        if accepted is None:
            return [], None
        start = max(start, accepted)
        acceptance = {"billing_start": _iso(accepted), "billing_start_rule": "acceptance passed"}
    if start >= end:
        return [], None
    parts = segments(timeline=timeline, start=start, end=end)
    assignments = list(
        NodeAssignment.objects.filter(lease_id=lease.pk, void=False)
        .select_related("node")
        .order_by("assigned_from", "node__hostname", "pk")
    )
    by_kind: dict[str, list[ComputedLine]] = defaultdict(list)
    for segment in parts:
        for line in (
            _rent_line(lease, segment, month, assignments),
            _fee_line(lease, segment, month),
            _usage_line(lease, segment, month),
        ):
            if line is not None:
                by_kind[line.kind].append(line)
    base = credit_base.credit_base(
        spans=credit_spans(parts),
        lines=[
            credit_base.BilledLine(line.kind, line.detail["terms_version"], line.amount)
            for kind in (LineKind.NETWORK_FEE, *USAGE_KINDS)
            for line in by_kind[kind]
        ],
        month_seconds=month.seconds,
    )
    fee = sum((line.amount for line in by_kind[LineKind.NETWORK_FEE]), ZERO)
    outcome = None
    if parts and base.amount > 0:
        outcome = _credit(lease, (parts[0].start, parts[-1].end), parts[-1].terms, base)
        credit = _credit_line(lease, outcome, month, fee)
        if credit is not None:
            by_kind[LineKind.SLA_CREDIT].append(credit)
    lines = [line for kind in KIND_ORDER for line in by_kind[kind]]
    share = _share(lines)
    common = {
        "lease": lease.reference,
        "lease_network_cost_share": None if share is None else str(share),
        **acceptance,
    }
    return [
        ComputedLine(
            lease=line.lease,
            kind=line.kind,
            description=line.description,
            quantity=line.quantity,
            unit=line.unit,
            unit_price=line.unit_price,
            amount=line.amount,
            detail={
                **line.detail,
                **common,
                "terms_tax_rate_percent": str(line.tax_rate_percent),
            },
            tax_rate_percent=line.tax_rate_percent,
        )
        for line in lines
    ], outcome


def billed_leases(*, tenant: Tenant, period: str) -> list[Lease]:
    """The tenant's active or ended leases that overlap the month, by reference."""
    start, end = Period.parse(period).bounds(tenant.time_zone)
    return list(
        Lease.objects.filter(tenant=tenant, status__in=BILLED_STATUSES, starts_at__lt=end)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=start))
        .order_by("reference")
    )


def awaiting_acceptance(*, tenant: Tenant, period: str) -> list[Lease]:
    """The month's billed leases that get no line because the acceptance their terms
    require has not passed yet (callers mention them; the invoice has no place to)."""
    return [
        lease
        for lease in billed_leases(tenant=tenant, period=period)
        if _requires_acceptance(TermsTimeline.for_lease(lease)) and billing_start(lease) is None
    ]


def _lease_part(tenant: Tenant, period: str) -> list[ComputedLine]:
    lines: list[ComputedLine] = []
    for lease in billed_leases(tenant=tenant, period=period):
        lines += lease_lines(lease=lease, period=period, zone=tenant.time_zone)
    return lines


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


Key = tuple[int | None, str]


def billed_so_far(invoice: Invoice) -> tuple[dict[Key, Decimal], dict[Key, list[dict[str, Any]]]]:
    """What has been billed for the invoice's month, by (lease, kind): its lease lines,
    the adjustment lines issued invoices carry for it, and the credit notes on both.
    Also, per key, where each amount comes from."""
    amounts: dict[Key, Decimal] = defaultdict(lambda: ZERO)
    sources: dict[Key, list[dict[str, Any]]] = defaultdict(list)

    def add(key: Key, amount: Decimal, source: dict[str, Any]) -> None:
        amounts[key] += amount
        sources[key].append({**source, "amount": _money(amount)})

    for line in invoice.lines.exclude(kind=LineKind.ADJUSTMENT).filter(lease__isnull=False):
        source = {"invoice": invoice.pk, "position": line.position}
        add((line.lease_id, line.kind), line.amount, source)
    carried = InvoiceLine.objects.filter(
        invoice__tenant_id=invoice.tenant_id,
        invoice__status__in=BILLED_INVOICE_STATUSES,
        kind=LineKind.ADJUSTMENT,
        detail__adjusted_invoice=invoice.pk,
    ).order_by("invoice__period", "position")
    for line in carried:
        key = (line.lease_id, line.detail["adjusted_kind"])
        add(key, line.amount, {"invoice": line.invoice_id, "position": line.position})
    notes = CreditNoteLine.objects.filter(
        Q(original_line__invoice=invoice, original_line__lease__isnull=False)
        & ~Q(original_line__kind=LineKind.ADJUSTMENT)
        | Q(original_line__in=carried)
    ).select_related("credit_note", "original_line")
    for note_line in notes.order_by("credit_note__issued_at", "credit_note_id", "position"):
        original = note_line.original_line
        kind = original.detail.get("adjusted_kind", original.kind)
        add(
            (original.lease_id, kind),
            note_line.amount,
            {"credit_note": note_line.credit_note.number, "position": note_line.position},
        )
    return amounts, sources


def _adjustments(tenant: Tenant, period: str) -> list[ComputedLine]:
    """Late changes to the billed months this draft is the next open invoice of: one
    line per (lease, kind) whose recomputation differs from what was billed so far."""
    result: list[ComputedLine] = []
    for billed in adjustable_invoices(tenant, period):
        result += _adjust_month(tenant, billed)
    return result


def _adjust_month(tenant: Tenant, billed: Invoice) -> list[ComputedLine]:
    before = billed.period
    old, sources = billed_so_far(billed)
    leases = {lease.pk: lease for lease in Lease.objects.filter(pk__in={k[0] for k in old})}
    new: dict[Key, Decimal] = defaultdict(lambda: ZERO)
    new_lines: dict[Key, list[ComputedLine]] = defaultdict(list)
    for line in _lease_part(tenant, before):
        new[line.key] += line.amount
        new_lines[line.key].append(line)
        if line.lease is not None:
            leases[line.lease.pk] = line.lease
    changed = [
        (lease_id, kind)
        for lease_id, kind in set(old) | set(new)
        if lease_id is not None and old[(lease_id, kind)] != new[(lease_id, kind)]
    ]
    changed.sort(key=lambda key: (leases[key[0]].reference, KIND_ORDER.index(LineKind(key[1]))))
    result = []
    for key in changed:
        lease = leases[key[0]]
        difference = new[key] - old[key]
        name = KIND_NAMES[LineKind(key[1])]
        result.append(
            ComputedLine(
                lease=lease,
                kind=LineKind.ADJUSTMENT,
                description=(
                    f"Adjustment for {before}: {name} of {lease.reference} recomputed from "
                    f"late results: {_money(old[key])} → {_money(new[key])}"
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
                    "adjusted_kind": key[1],
                    # The name predates credit notes: what has been billed so far.
                    "finalised_amount": _money(old[key]),
                    "billed_from": sources[key],
                    "recomputed_amount": _money(new[key]),
                    "difference": _money(difference),
                    "recomputed_lines": [
                        {
                            "description": line.description,
                            "amount": _money(line.amount),
                            **line.detail,
                        }
                        for line in new_lines[key]
                    ],
                    "rule": (
                        "recomputed minus billed so far (the invoice's lines, adjustments "
                        "issued since, credit notes), by lease and kind"
                    ),
                },
            )
        )
    return result


# --- accepted disputes (billing.evidence) ---------------------------------------------


def _dispute_credits(tenant: Tenant, period: str) -> list[ComputedLine]:
    """One negative adjustment line per accepted dispute whose credit goes on this
    month's invoice (its ``credit_period``, the month it was accepted in). A redraft finds
    the same disputes, so the credit is on this invoice once and on no other."""
    from billing.evidence import accepted_credits

    return [
        ComputedLine(
            lease=dispute.lease,
            kind=LineKind.ADJUSTMENT,
            description=(
                f"Credit for dispute #{dispute.pk} on {dispute.lease.reference}, accepted "
                f"{_local(dispute.decided_at, tenant.time_zone)}"
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
                "credit_cny": _money(dispute.credit_cny),
                "credit_period": dispute.credit_period,
                "accepted_at": _iso(dispute.decided_at),
                "decision_reason": dispute.decision_reason,
                "rule": "accepted dispute: minus the credit the provider granted",
            },
        )
        for dispute in accepted_credits(tenant_id=tenant.pk, period=period)
    ]


def compute_invoice(*, tenant: Tenant, period: str) -> ComputedInvoice:
    """What the tenant's invoice for the month says now: lease lines, adjustments for the
    billed months it is the next open invoice of, totals. Reads only; nothing is saved."""
    check_period(period)
    start, end = Period.parse(period).bounds(tenant.time_zone)
    lease_part = _lease_part(tenant, period)
    lines = lease_part + _adjustments(tenant, period) + _dispute_credits(tenant, period)
    rates = {line.tax_rate_percent for line in lease_part if line.tax_rate_percent is not None}
    rate = max(rates) if rates else LeaseTerms._meta.get_field("tax_rate_percent").default
    totals = invoice_totals(lines=[line.amount for line in lines], tax_rate_percent=rate)
    return ComputedInvoice(
        tenant=tenant,
        period=period,
        period_start=start,
        period_end=end,
        lines=lines,
        tax_rate_percent=rate,
        subtotal=totals.subtotal,
        tax=totals.tax,
        total=totals.total,
        network_cost_share=_share(lease_part),
    )


# --------------------------------------------------------------------------------------
# Writes
# --------------------------------------------------------------------------------------


def _issued_message(invoice: Invoice) -> str:
    return _(
        "Invoice %(invoice)s is %(status)s; it cannot change. Later results go on the next "
        "invoice as adjustments; a correction is a credit note."
    ) % {"invoice": invoice.label, "status": invoice.get_status_display()}


def open_invoice(tenant: Tenant, period: str) -> Invoice | None:
    """The month's invoice that is not void (there is at most one)."""
    return (
        Invoice.objects.filter(tenant=tenant, period=period)
        .exclude(status=InvoiceStatus.VOID)
        .first()
    )


@transaction.atomic
def draft_invoice(*, tenant: Tenant, period: str, now: datetime | None = None) -> Invoice:
    """Create or recompute the tenant's draft invoice for the month: its lines are
    deleted and rebuilt from ``compute_invoice``. An issued or paid invoice is refused, and
    so is a month that has not started yet (``now``, default the current time). A void
    invoice stays as it is; the month gets a new draft."""
    check_period(period)
    now = now or timezone.now()
    # One drafter per tenant at a time: the tenant row is the lock.
    tenant = Tenant.objects.select_for_update().get(pk=tenant.pk)
    start, end = Period.parse(period).bounds(tenant.time_zone)
    if start > now:
        raise ValidationError(
            _("Period %(period)s has not started yet; there is nothing to bill.")
            % {"period": period}
        )
    invoice = open_invoice(tenant, period)
    if invoice is not None and invoice.status != InvoiceStatus.DRAFT:
        raise ValidationError(_issued_message(invoice))
    computed = compute_invoice(tenant=tenant, period=period)
    if invoice is None:
        invoice = Invoice(tenant=tenant, period=period)
    invoice.period_start, invoice.period_end = start, end
    invoice.status = InvoiceStatus.DRAFT
    invoice.subtotal, invoice.tax, invoice.total = computed.subtotal, computed.tax, computed.total
    invoice.tax_rate_percent = computed.tax_rate_percent
    invoice.network_cost_share = computed.network_cost_share
    invoice.save()
    invoice.lines.all().delete()
    InvoiceLine.objects.bulk_create(
        InvoiceLine(
            invoice=invoice,
            position=position,
            lease=line.lease,
            kind=line.kind,
            description=line.description,
            quantity=line.quantity,
            unit=line.unit,
            unit_price=line.unit_price,
            amount=line.amount,
            detail=line.detail,
        )
        for position, line in enumerate(computed.lines, start=1)
    )
    return invoice


def _candidate_tenants(period: str, tenant: Tenant | None) -> list[Tenant]:
    """Tenants with a billed lease near the month (every zone is within a day of UTC),
    or a billed invoice of an earlier month (late results may adjust it)."""
    utc_start, utc_end = Period.parse(period).bounds("UTC")
    near = Lease.objects.filter(
        status__in=BILLED_STATUSES, starts_at__lt=utc_end + timedelta(days=1)
    ).filter(Q(ends_at__isnull=True) | Q(ends_at__gt=utc_start - timedelta(days=1)))
    tenants = Tenant.objects.filter(
        Q(pk__in=near.values("tenant"))
        | Q(invoices__period__lt=period, invoices__status__in=BILLED_INVOICE_STATUSES)
        | Q(leases__disputes__state="accepted", leases__disputes__credit_period=period)
    ).distinct()
    if tenant is not None:
        tenants = tenants.filter(pk=tenant.pk)
    return list(tenants.order_by("slug"))


@transaction.atomic
def draft_period(
    *, period: str, tenant: Tenant | None = None, now: datetime | None = None
) -> list[Invoice]:
    """Draft the month's invoice of every tenant (or of one) with a billed lease in it,
    or with adjustments to carry from an earlier month. An issued or paid invoice is
    returned unchanged rather than refused, so that a run over every tenant goes on;
    callers say so."""
    check_period(period)
    invoices = []
    for candidate in _candidate_tenants(period, tenant):
        existing = open_invoice(candidate, period)
        if existing is not None and existing.status != InvoiceStatus.DRAFT:
            invoices.append(existing)
            continue
        if (
            existing is None
            and not billed_leases(tenant=candidate, period=period)
            and not _adjustments(candidate, period)
            and not _dispute_credits(candidate, period)
        ):
            continue  # nothing to bill and nothing to carry
        invoices.append(draft_invoice(tenant=candidate, period=period, now=now))
    return invoices


# --------------------------------------------------------------------------------------
# Presentation
# --------------------------------------------------------------------------------------


def issued_message(invoice: Invoice) -> str:
    """The sentence a caller shows when asked to change an issued invoice."""
    return _issued_message(invoice)


def invoice_summary(invoice: Invoice) -> dict[str, Any]:
    """The invoice as one JSON-ready dict (Decimals as strings, times ISO UTC)."""
    lines = list(invoice.lines.select_related("lease").order_by("position"))
    line_rates = sorted(
        {
            line.detail["terms_tax_rate_percent"]
            for line in lines
            if "terms_tax_rate_percent" in line.detail
        },
        key=Decimal,
    )
    summary: dict[str, Any] = {
        "id": invoice.pk,
        "tenant": invoice.tenant.slug,
        "tenant_name": invoice.tenant.name,
        "period": invoice.period,
        "period_start": _iso(invoice.period_start),
        "period_end": _iso(invoice.period_end),
        "time_zone": invoice.tenant.time_zone,
        "status": invoice.status,
        "number": invoice.number,
        "issued_at": _iso(invoice.issued_at),
        "issue_date": invoice.issue_date.isoformat() if invoice.issue_date else None,
        "due_date": invoice.due_date.isoformat() if invoice.due_date else None,
        "seller": invoice.seller,
        "buyer": invoice.buyer,
        "forced_reason": invoice.forced_reason,
        "void_reason": invoice.void_reason,
        "currency": invoice.currency,
        "lines": [
            {
                "position": line.position,
                "lease": line.lease.reference if line.lease else None,
                "kind": line.kind,
                "description": line.description,
                "quantity": str(line.quantity),
                "unit": line.unit,
                "unit_price": str(line.unit_price),
                "amount": str(line.amount),
                "detail": line.detail,
            }
            for line in lines
        ],
        "subtotal": str(invoice.subtotal),
        "tax_rate_percent": str(invoice.tax_rate_percent),
        "tax": str(invoice.tax),
        "total": str(invoice.total),
        "network_cost_share": (
            None if invoice.network_cost_share is None else str(invoice.network_cost_share)
        ),
        "tax_note": None,
    }
    if len(line_rates) > 1:
        summary["tax_note"] = (
            f"The leases on this invoice have different tax rates ({', '.join(line_rates)}%); "
            f"the highest, {invoice.tax_rate_percent}%, applies to the whole invoice."
        )
    return summary


__all__ = [
    "ComputedInvoice",
    "ComputedLine",
    "Segment",
    "adjustable_invoices",
    "awaiting_acceptance",
    "billed_leases",
    "billed_so_far",
    "billing_start",
    "compute_invoice",
    "draft_invoice",
    "draft_period",
    "invoice_summary",
    "issued_message",
    "lease_lines",
    "open_invoice",
    "previous_period",
    "segments",
]
