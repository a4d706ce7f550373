"""The lines of one lease for one month (package docstring, rule 5): node rent, network
fee and usage per segment, then the SLA credit; each with the VAT rate of its price
component (rule 7). Also the lease's credit for the month, the one computation every face
shows."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from billing import metering, sla
from billing.choices import LineKind
from billing.invoicing.computed import (
    FIXED_FEE_MODES,
    KIND_ORDER,
    QUANTITY,
    USAGE_KINDS,
    ZERO,
    ComputedLine,
    Month,
    fraction,
    iso,
    local,
    money,
)
from billing.invoicing.windows import (
    Segment,
    billed_leases,
    billed_window,
    billing_start,
    billing_starts,
    requires_acceptance,
    segments,
)
from gpulease_verify import credit_base
from gpulease_verify import repair as repair_rules
from gpulease_verify import window as window_rules
from gpulease_verify.calculations import (
    P95_DROP_PERCENT,
    CreditResult,
    P95Direction,
    P95Figure,
    P95Window,
    bytes_to_gb,
    network_cost_share,
    node_rent_line,
    overlap_seconds,
    p95_detail,
    p95_line,
    prorate,
    sla_credit,
    traffic_charge,
)
from gpulease_verify.money import ROUNDING, to_fen
from incidents import selectors as incident_selectors
from leases.choices import BillingMode
from leases.contract_rules import credit_tiers
from leases.models import Lease, LeaseTerms, NodeAssignment, Tenant
from leases.models.terms import CreditMode
from leases.selectors import (
    TermsTimeline,
    live_assignments,
    live_assignments_of_leases,
    terms_of_leases,
)


def _span(segment: Segment, zone: str) -> str:
    return f"{local(segment.start, zone)} to {local(segment.end, zone)}"


def _rent_line(
    lease: Lease, segment: Segment, month: Month, assignments: list[NodeAssignment]
) -> ComputedLine | None:
    rate = segment.terms.node_rent_per_month
    clipped: list[tuple[datetime, datetime]] = []
    used: list[dict[str, Any]] = []
    spans = window_rules.assignment_spans(
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
                "assigned_from": iso(assignment.assigned_from),
                "assigned_until": iso(assignment.assigned_until),
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
    quantity = fraction(rent.node_seconds, month.seconds)
    return ComputedLine(
        lease=lease,
        kind=LineKind.NODE_RENT,
        description=(
            f"Node rent, {lease.reference} (terms v{segment.terms.version}), "
            f"{_span(segment, month.zone)}: {quantity} node-months at {money(rate)}"
        ),
        quantity=quantity,
        unit="node-month",
        unit_price=rate,
        amount=rent.amount,
        detail={
            **month.describe(),
            **segment.describe(),
            "node_seconds": rent.node_seconds,
            "monthly_rate": money(rate),
            "assignments": used,
            "rule": "monthly_rate x node_seconds / month_seconds, half-up to 0.01",
        },
        tax_rate_percent=segment.terms.rent_tax_rate_percent,
    )


def _fee_line(lease: Lease, segment: Segment, month: Month) -> ComputedLine | None:
    terms = segment.terms
    fee = terms.network_fee_per_month
    if terms.billing_mode not in FIXED_FEE_MODES or fee == 0 or segment.seconds == 0:
        return None
    amount = to_fen(
        prorate(monthly_amount=fee, covered_seconds=segment.seconds, period_seconds=month.seconds)
    )
    quantity = fraction(segment.seconds, month.seconds)
    return ComputedLine(
        lease=lease,
        kind=LineKind.NETWORK_FEE,
        description=(
            f"Network fee, {lease.reference} (terms v{terms.version}, "
            f"{terms.contracted_bandwidth_gbps} Gbps, {terms.billing_mode}), "
            f"{_span(segment, month.zone)}: {quantity} month at {money(fee)}"
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
            "monthly_fee": money(fee),
            "rule": "monthly_fee x segment_seconds / month_seconds, half-up to 0.01",
        },
        tax_rate_percent=terms.tax_rate_percent,
    )


def _sample_facts(
    lease: Lease, segment: Segment, samples: metering.Samples | None = None
) -> dict[str, Any]:
    if samples is None:
        samples = metering.Samples.read(lease_id=lease.pk, start=segment.start, end=segment.end)
    facts = samples.facts(segment.start, segment.end)
    at_switch, all_slots = facts["switch_slots"], facts["node_slots"]
    return {
        "samples": facts["count"],
        "first_slot": iso(facts["first"]),
        "last_slot": iso(facts["last"]),
        # Which counters the bytes come from: the nodes' switch ports where the fabric has a
        # witness, the nodes' own counters otherwise (counted in node-slots).
        "metered_from": metered_from(at_switch, all_slots),
        "switch_node_slots": at_switch,
        "host_node_slots": all_slots - at_switch,
    }


def metered_from(at_switch: int, all_slots: int) -> str:
    if all_slots and at_switch == all_slots:
        return "switch counters"
    if at_switch:
        return "switch counters, host counters where no switch port was read"
    return "host counters"


def _metering_note(facts: dict[str, Any]) -> str:
    """The line's own words on its source, when any of it was metered at the switch."""
    return f" (metered from {facts['metered_from']})" if facts["switch_node_slots"] else ""


def _p95_rule_note(figure: P95Figure) -> str:
    """The line's words on a 95th that is not the default (sent bytes, whole month)."""
    words = []
    if figure.direction != P95Direction.TX:
        words.append(f"direction {figure.direction}")
    if figure.window != P95Window.MONTHLY:
        words.append(f"daily 95th averaged over {len(figure.groups)} day(s)")
    return f" ({', '.join(words)})" if words else ""


def usage_line(
    lease: Lease, segment: Segment, month: Month, samples: metering.Samples | None = None
) -> ComputedLine | None:
    """The segment's traffic or 95th percentile line; None for the fixed-fee modes. The
    samples are read in one query unless the caller read them already (a page of leases,
    ``metering.samples_of``)."""
    terms = segment.terms
    if terms.billing_mode not in (BillingMode.PER_GB, BillingMode.P95):
        return None
    if samples is None:
        samples = metering.Samples.read(lease_id=lease.pk, start=segment.start, end=segment.end)
    if terms.billing_mode == BillingMode.PER_GB:
        price = terms.price_per_gb
        total = samples.bytes(segment.start, segment.end)
        quantity = bytes_to_gb(total).quantize(QUANTITY, rounding=ROUNDING)
        facts = _sample_facts(lease, segment, samples)
        return ComputedLine(
            lease=lease,
            kind=LineKind.USAGE_GB,
            description=(
                f"Traffic, {lease.reference} (terms v{terms.version}), "
                f"{_span(segment, month.zone)}: {quantity} GB at {price}{_metering_note(facts)}"
            ),
            quantity=quantity,
            unit="GB",
            unit_price=price,
            amount=traffic_charge(total_bytes=total, price_per_gb=price),
            detail={
                **month.describe(),
                **segment.describe(),
                **facts,
                "bytes": total,
                "price_per_gb": str(price),
                "rule": "bytes / 10^9 x price_per_gb, half-up to 0.01",
            },
            tax_rate_percent=terms.tax_rate_percent,
        )
    if terms.billing_mode == BillingMode.P95:
        price = terms.price_per_mbps_p95
        facts = _sample_facts(lease, segment, samples)
        share = fraction(segment.seconds, month.seconds)
        priced = p95_line(
            samples.rates(segment.start, segment.end),
            direction=terms.p95_direction,
            window=terms.p95_window,
            zone_name=month.zone,
            price_per_mbps=price,
            segment_seconds=segment.seconds,
            month_seconds=month.seconds,
        )
        p95, mbps = priced.figure.p95_bps, priced.billable_mbps
        return ComputedLine(
            lease=lease,
            kind=LineKind.USAGE_P95,
            description=(
                f"95th percentile bandwidth, {lease.reference} (terms v{terms.version}), "
                f"{_span(segment, month.zone)}: {mbps} Mbps at {price} for {share} month"
                f"{_p95_rule_note(priced.figure)}{_metering_note(facts)}"
            ),
            quantity=mbps,
            unit="Mbps",
            unit_price=price,
            amount=priced.amount,
            detail={
                **month.describe(),
                **segment.describe(),
                **facts,
                # The monthly rule's own count (how many of the segment's samples its
                # 95th drops); a daily 95th drops each day's share (``dropped_by_rule``).
                "dropped_samples": facts["samples"] * P95_DROP_PERCENT // 100,
                "dropped_by_rule": priced.figure.dropped,
                **p95_detail(priced.figure),
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
    result: CreditResult  # the SLA credit (tiers and cap)
    # The repair-time objective's credit (gpulease_verify.repair): the faults resolved in
    # the window, those that missed the objective, and what they add (0.00 without one).
    repair: repair_rules.RepairCredit

    @property
    def compliance(self) -> Decimal | None:
        return self.summary.credit_compliance_percent

    @property
    def amount(self) -> Decimal:
        """The month's whole credit: the SLA credit plus the repair credit (negative)."""
        return repair_rules.credit_line(
            self.result.percent_applied, self.result.amount, self.repair
        )[1]

    @property
    def percent_applied(self) -> Decimal:
        """The two credits' percents of the base, added (the credit line's quantity)."""
        return repair_rules.credit_line(
            self.result.percent_applied, self.result.amount, self.repair
        )[0]

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
    summary: sla.SlaSummary | None = None,
) -> LeaseCredit:
    start, end = window
    if summary is None:
        summary = sla.evaluate(lease=lease, start=start, end=end)
    result = sla_credit(
        base=base.amount,
        compliance_percent=summary.credit_compliance_percent,
        tiers=credit_tiers(terms.credit_tiers),
        cap_percent=terms.credit_cap_percent,
    )
    # Without a repair-time objective no fault earns a credit: no query (the month header
    # reads many leases' months at once).
    objective = terms.repair_objective_minutes
    repair = repair_rules.repair_credit(
        incidents=(
            incident_selectors.repairs_resolved(lease_id=lease.pk, start=start, end=end)
            if objective is not None
            else []
        ),
        start=start,
        end=end,
        objective_minutes=terms.repair_objective_minutes,
        credit_percent=terms.repair_credit_percent,
        base=base.amount,
        sla_percent=result.percent_applied,
        sla_amount=result.amount,
    )
    return LeaseCredit(start, end, summary, terms, base, result, repair)


def _credit_line(
    lease: Lease, outcome: LeaseCredit, month: Month, network_fee: Decimal
) -> ComputedLine | None:
    start, end, terms, base = outcome.start, outcome.end, outcome.terms, outcome.base
    summary, compliance, credit = outcome.summary, outcome.compliance, outcome.result
    tiers = credit_tiers(terms.credit_tiers)
    repair = outcome.repair
    if outcome.amount == 0:
        return None
    throughput, availability = summary.throughput, summary.availability
    # Terms without a repair-time objective keep the line as it was, text and detail.
    repaired = {} if repair.objective_minutes is None else {"repair": repair.as_dict()}
    return ComputedLine(
        lease=lease,
        kind=LineKind.SLA_CREDIT,
        description=(
            f"SLA credit, {lease.reference}: compliance {compliance}% from "
            f"{local(start, month.zone)} to {local(end, month.zone)}, "
            f"{credit.percent_applied}% of {base.name()}"
            + (f" (tier {credit.tier_percent}% capped)" if credit.capped else "")
            + (repair_text(repair, base.name()) if repaired else "")
        ),
        quantity=outcome.percent_applied,
        unit="percent",
        unit_price=base.amount,
        amount=outcome.amount,
        detail={
            **repaired,
            **month.describe(),
            "terms_version": terms.version,
            "window_start": iso(start),
            "window_end": iso(end),
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
                **availability.counts(),
                "degraded_weighted": str(availability.degraded_weighted),
                "percent": None if availability.percent is None else str(availability.percent),
            },
            "tiers": [{"below_percent": str(b), "credit_percent": str(c)} for b, c in tiers],
            "tier_percent": str(credit.tier_percent),
            "cap_percent": str(terms.credit_cap_percent),
            "percent_applied": str(credit.percent_applied),
            "capped": credit.capped,
            "reason": str(credit.reason),
            "credit_base": base.basis,
            "credit_base_amount": money(base.amount),
            "credit_base_parts": [
                {
                    "terms_version": part.span.terms_version,
                    "credit_base": part.span.basis,
                    "start": iso(part.span.start),
                    "end": iso(part.span.end),
                    "amount": money(part.amount),
                }
                for part in base.parts
            ],
            "network_fee": money(network_fee),
            "rule": (
                "min(tier for compliance, cap) % of the credit base, half-up to 0.01, "
                "negative; the base per terms version: its network fee lines, its usage "
                "lines, or its contracted base fee x segment_seconds / month_seconds; "
                "compliance = lower of throughput and availability"
            ),
        },
        # A credit reduces the network service: the service rate of the version whose
        # tiers and cap it applies (in force at the window's end).
        tax_rate_percent=terms.tax_rate_percent,
    )


def repair_text(repair: repair_rules.RepairCredit, base_name: str) -> str:
    """The credit line's words for the repair-time objective (English, as stored)."""
    misses = ", ".join(f"#{fault.id} {fault.minutes} min" for fault in repair.misses)
    return (
        f"; repair-time objective {repair.objective_minutes} min: {len(repair.misses)} of "
        f"{len(repair.repairs)} fault(s) over it"
        + (f" ({misses})" if misses else "")
        + f", {repair.percent_applied}% of {base_name}"
        + (" (capped at the whole base)" if repair.capped else "")
    )


def lease_share(lines: list[ComputedLine]) -> Decimal | None:
    def total(*kinds: str) -> Decimal:
        return sum((line.amount for line in lines if line.kind in kinds), ZERO)

    return network_cost_share(
        node_rent=total(LineKind.NODE_RENT),
        network_fee=total(LineKind.NETWORK_FEE),
        usage=total(*USAGE_KINDS),
    )


@dataclass(frozen=True)
class LeaseFacts:
    """What every month of a lease reads alike: its terms versions, its node assignments
    and, where the terms require one, when its acceptance passed. Read once for a page of
    many months (``lease_credits``), so the months add no query for them."""

    timeline: TermsTimeline
    assignments: list[NodeAssignment]
    needs_acceptance: bool
    accepted: datetime | None
    # Read for a page of many leases (``billing.lease_month.current_months``), so a month
    # adds no query: its traffic samples, and the SLA summary of its billed window.
    samples: metering.Samples | None = None
    summaries: dict[tuple[datetime, datetime], sla.SlaSummary] = field(default_factory=dict)

    @classmethod
    def of(cls, lease: Lease) -> LeaseFacts:
        timeline = TermsTimeline.for_lease(lease)
        needs = requires_acceptance(timeline)
        return cls(
            timeline=timeline,
            assignments=list(live_assignments(lease_id=lease.pk)),
            needs_acceptance=needs,
            accepted=billing_start(lease) if needs else None,
        )

    @classmethod
    def many(cls, leases: list[Lease]) -> dict[int, LeaseFacts]:
        """``of`` for many leases in three queries: terms, assignments, acceptances."""
        ids = [lease.pk for lease in leases]
        versions: dict[int, list[LeaseTerms]] = defaultdict(list)
        for version in terms_of_leases(lease_ids=ids):
            versions[version.lease_id].append(version)
        held: dict[int, list[NodeAssignment]] = defaultdict(list)
        for assignment in live_assignments_of_leases(lease_ids=ids):
            held[assignment.lease_id].append(assignment)
        timelines = {lease_id: TermsTimeline(versions[lease_id]) for lease_id in ids}
        needs = [lease_id for lease_id in ids if requires_acceptance(timelines[lease_id])]
        accepted = billing_starts(needs) if needs else {}
        return {
            lease_id: cls(
                timeline=timelines[lease_id],
                assignments=held[lease_id],
                needs_acceptance=lease_id in accepted,
                accepted=accepted.get(lease_id),
            )
            for lease_id in ids
        }


def lease_lines(
    *, lease: Lease, period: str, zone: str, vouchers: list[ComputedLine] | None = None
) -> list[ComputedLine]:
    """The lines of one lease for one month, computed and not saved (see the package
    docstring for the rules). No lines while an acceptance the terms require has not
    passed. An SLA credit the terms give as a voucher (``credit_mode``) is no line: it is
    appended to ``vouchers`` when given, as the line it would have been."""
    lines, _outcome, given = _lease_month(lease, period, zone, LeaseFacts.of(lease))
    if vouchers is not None:
        vouchers += given
    return lines


def lease_credit(*, lease: Lease, period: str) -> LeaseCredit | None:
    """The lease's SLA credit for the month, on the base its terms name, from the lines its
    invoice carries (so prorated and amended months agree with the invoice to the fen);
    None when nothing is billed (before acceptance, outside the lease) or the base is 0.
    For a month in progress it is the credit the samples so far would earn."""
    return lease_credits(lease=lease, periods=[period])[period]


def lease_credits(*, lease: Lease, periods: list[str]) -> dict[str, LeaseCredit | None]:
    """``lease_credit`` of each of ``periods``, reading the lease's facts once."""
    facts = LeaseFacts.of(lease)
    return {period: month_credit(lease=lease, period=period, facts=facts) for period in periods}


def month_credit(*, lease: Lease, period: str, facts: LeaseFacts) -> LeaseCredit | None:
    """``lease_credit`` from facts the caller has already read (``billing.lease_month``)."""
    return _lease_month(lease, period, lease.tenant.time_zone, facts)[1]


def month_lines(
    *, lease: Lease, period: str, facts: LeaseFacts, until: datetime | None = None
) -> tuple[list[ComputedLine], LeaseCredit | None]:
    """The lease's lines of the month and its credit, from facts the caller has read
    (``billing.lease_month``). With ``until``, the charges of the billed window cut there
    (the month so far): rent, fee and usage by the same rules, and no credit."""
    lines, credit, _given = _lease_month(lease, period, lease.tenant.time_zone, facts, until)
    return lines, credit


def _lease_month(
    lease: Lease, period: str, zone: str, facts: LeaseFacts, until: datetime | None = None
) -> tuple[list[ComputedLine], LeaseCredit | None, list[ComputedLine]]:
    month = Month.of(period, zone)
    timeline = facts.timeline
    window = billed_window(
        lease=lease,
        period=period,
        timeline=timeline,
        acceptance=(facts.needs_acceptance, facts.accepted),
    )
    if window.start is None or window.end is None:
        return [], None, []
    acceptance: dict[str, Any] = {}
    if window.requires_acceptance:
        acceptance = {
            "billing_start": iso(window.accepted),
            "billing_start_rule": "acceptance passed",
        }
    end = window.end if until is None else max(window.start, min(window.end, until))
    parts = segments(timeline=timeline, start=window.start, end=end) if window.start < end else []
    assignments = facts.assignments
    by_kind: dict[str, list[ComputedLine]] = defaultdict(list)
    for segment in parts:
        for line in (
            _rent_line(lease, segment, month, assignments),
            _fee_line(lease, segment, month),
            usage_line(lease, segment, month, facts.samples),
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
    given: list[ComputedLine] = []
    if parts and base.amount > 0 and until is None:
        span = (parts[0].start, parts[-1].end)
        outcome = _credit(lease, span, parts[-1].terms, base, facts.summaries.get(span))
        credit = _credit_line(lease, outcome, month, fee)
        if credit is not None and outcome.terms.credit_mode == CreditMode.VOUCHER:
            # Given as a voucher when the invoice is issued (billing.vouchers): no line.
            months = outcome.terms.voucher_validity_months
            given.append(
                replace(
                    credit,
                    detail={
                        **credit.detail,
                        "credit_mode": CreditMode.VOUCHER.value,
                        "voucher_validity_months": months,
                    },
                )
            )
        elif credit is not None:
            by_kind[LineKind.SLA_CREDIT].append(credit)
    lines = [line for kind in KIND_ORDER for line in by_kind[kind]]
    share = lease_share(lines)
    common = {
        "lease": lease.reference,
        "lease_network_cost_share": None if share is None else str(share),
        **acceptance,
    }
    vouchers = [replace(line, detail={**line.detail, **common}) for line in given]
    return [replace(line, detail={**line.detail, **common}) for line in lines], outcome, vouchers


def lease_part(
    tenant: Tenant, period: str, vouchers: list[ComputedLine] | None = None
) -> list[ComputedLine]:
    """The lines of every lease the month bills, in reference order. A credit its terms
    give as a voucher is no line: it goes into ``vouchers`` when given."""
    lines: list[ComputedLine] = []
    for lease in billed_leases(tenant=tenant, period=period):
        lines += lease_lines(lease=lease, period=period, zone=tenant.time_zone, vouchers=vouchers)
    return lines
