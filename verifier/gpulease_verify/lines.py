"""A lease's invoice lines for a month from first principles, from an audit bundle alone,
with the rules ``billing.invoicing`` bills by (``gpulease_verify.window``,
``gpulease_verify.calculations``).

Per segment of the billed window (the window cut where a terms version takes effect):

- ``node_rent``: node-seconds = every live (non-void) assignment clipped to the segment
  (an open one runs to the lease's end), in whole seconds, added up; amount =
  monthly rate x node-seconds / month seconds, half-up to 0.01; quantity = node-seconds /
  month seconds to 6 decimals. No line without node-seconds.
- ``network_fee``: monthly and yearly plans with a fee: fee x segment seconds / month
  seconds; quantity = segment seconds / month seconds.
- ``usage_gb`` (per-GB plan): the bytes of the traffic samples whose slot starts in the
  segment x price per GB; quantity = GB to 6 decimals.
- ``usage_p95`` (95th-percentile plan): ``calculations.p95_line`` of those samples, by
  the version's ``p95_direction`` and ``p95_window`` (a version from before them: sent
  bytes, monthly): the 95th in billable Mbps x price x segment seconds / month seconds.

Then one ``sla_credit`` line when the credit is not zero. A line is keyed by its kind,
terms version and segment; adjustment lines are checked on their own figures.

Each line carries the VAT rate of its price component, from its terms version: node rent
``rent_tax_rate_percent`` (a version from before that field existed: its
``tax_rate_percent``, see ``gpulease_verify.terms.LATER_FIELDS``), every other line the
network service's ``tax_rate_percent``; the SLA credit that of the version whose tiers it
applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from gpulease_verify import window as rules
from gpulease_verify.canonical import iso_utc
from gpulease_verify.charges import (
    bytes_to_gb,
    node_rent_line,
    overlap_seconds,
    prorate,
    traffic_charge,
)
from gpulease_verify.money import ROUNDING, to_fen
from gpulease_verify.p95 import TrafficRate, p95_detail, p95_line
from gpulease_verify.terms import defaulted_field, later_field

QUANTITY = Decimal("0.000001")
ZERO = Decimal("0.00")
SEGMENT_KINDS = ("node_rent", "network_fee", "usage_gb", "usage_p95")
KINDS = (*SEGMENT_KINDS, "sla_credit", "adjustment")
FIXED_FEE_MODES = ("monthly", "yearly")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


@dataclass(frozen=True)
class Expected:
    kind: str
    version: int | None
    start: datetime | None
    end: datetime | None
    quantity: Decimal
    unit_price: Decimal
    amount: Decimal
    detail: dict[str, Any]
    tax_rate_percent: Decimal | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.kind, self.version, self.start, self.end)

    def label(self) -> str:
        if self.start is None or self.end is None:
            return self.kind
        return f"{self.kind} (terms v{self.version}, {iso_utc(self.start)} to {iso_utc(self.end)})"


def fraction(covered: int, month_seconds: int) -> Decimal:
    return prorate(
        monthly_amount=1, covered_seconds=covered, period_seconds=month_seconds
    ).quantize(QUANTITY, rounding=ROUNDING)


def rent_rate(terms: Mapping[str, Any]) -> Decimal:
    """The node rent's VAT rate of a terms entry."""
    return Decimal(later_field(terms, "rent_tax_rate_percent"))


def service_rate(terms: Mapping[str, Any]) -> Decimal:
    """The network service's VAT rate of a terms entry (fee, usage, SLA credit)."""
    return Decimal(terms["tax_rate_percent"])


def segment_lines(
    *,
    segment: tuple[datetime, datetime],
    terms: Mapping[str, Any],
    month: tuple[datetime, datetime, int],
    assignments: Sequence[Mapping[str, Any]],
    lease_end: datetime | None,
    samples: Sequence[TrafficRate],
    zone_name: str = "Asia/Shanghai",
) -> list[Expected]:
    """The lines one segment gives (module docstring)."""
    lo, hi = segment
    month_start, month_end, month_seconds = month
    version = int(terms["version"])
    seconds = overlap_seconds(start=lo, end=hi, period_start=lo, period_end=hi)
    lines: list[Expected] = []
    live = [a for a in assignments if not a["void"]]
    spans = rules.assignment_spans(
        assignments=[
            (at(a["assigned_from"]), at(a["assigned_until"]) if a["assigned_until"] else None)
            for a in live
        ],
        lease_end=lease_end,
        segment=segment,
    )
    clipped = [span for span in spans if span is not None]
    if clipped:
        rate = Decimal(terms["node_rent_per_month"])
        rent = node_rent_line(
            monthly_rate=rate, assignments=clipped, period_start=month_start, period_end=month_end
        )
        lines.append(
            Expected(
                "node_rent",
                version,
                lo,
                hi,
                fraction(rent.node_seconds, month_seconds),
                rate,
                rent.amount,
                {"node_seconds": rent.node_seconds, "segment_seconds": seconds},
                rent_rate(terms),
            )
        )
    mode, fee = terms["billing_mode"], Decimal(terms["network_fee_per_month"])
    if mode in FIXED_FEE_MODES and fee != 0 and seconds != 0:
        amount = to_fen(
            prorate(monthly_amount=fee, covered_seconds=seconds, period_seconds=month_seconds)
        )
        lines.append(
            Expected(
                "network_fee",
                version,
                lo,
                hi,
                fraction(seconds, month_seconds),
                fee,
                amount,
                {"segment_seconds": seconds},
                service_rate(terms),
            )
        )
    inside = [sample for sample in samples if lo <= sample.slot_at < hi]
    if mode == "per_gb":
        price = Decimal(terms["price_per_gb"])
        total = sum(sample.tx_bytes for sample in inside)
        lines.append(
            Expected(
                "usage_gb",
                version,
                lo,
                hi,
                bytes_to_gb(total).quantize(QUANTITY, rounding=ROUNDING),
                price,
                traffic_charge(total_bytes=total, price_per_gb=price),
                {"bytes": total, "segment_seconds": seconds},
                service_rate(terms),
            )
        )
    elif mode == "p95":
        price = Decimal(terms["price_per_mbps_p95"])
        line = p95_line(
            inside,
            direction=defaulted_field(terms, "p95_direction"),
            window=defaulted_field(terms, "p95_window"),
            zone_name=zone_name,
            price_per_mbps=price,
            segment_seconds=seconds,
            month_seconds=month_seconds,
        )
        lines.append(
            Expected(
                "usage_p95",
                version,
                lo,
                hi,
                line.billable_mbps,
                price,
                line.amount,
                {
                    "p95_bps": line.figure.p95_bps,
                    "billable_mbps": line.billable_mbps,
                    "segment_seconds": seconds,
                    **p95_detail(line.figure),
                },
                service_rate(terms),
            )
        )
    return lines


def expected_lines(
    *,
    window: tuple[datetime, datetime] | None,
    terms: Sequence[Mapping[str, Any]],
    month: tuple[datetime, datetime, int],
    assignments: Sequence[Mapping[str, Any]],
    lease_end: datetime | None,
    samples: Sequence[TrafficRate],
    zone_name: str = "Asia/Shanghai",
) -> list[Expected]:
    """Every segment line of the billed window, in invoice order (kind, then time); a
    daily 95th's days are ``zone_name``'s."""
    if window is None:
        return []
    versions = sorted(terms, key=lambda t: at(t["effective_from"]))
    pieces = rules.cut(
        start=window[0], end=window[1], effective_from=[at(t["effective_from"]) for t in versions]
    )
    found: list[Expected] = []
    for lo, hi in pieces:
        in_force = [t for t in versions if at(t["effective_from"]) <= lo][-1]
        found += segment_lines(
            segment=(lo, hi),
            terms=in_force,
            month=month,
            assignments=assignments,
            lease_end=lease_end,
            samples=samples,
            zone_name=zone_name,
        )
    return sorted(found, key=lambda line: (SEGMENT_KINDS.index(line.kind), line.start))


def stated_key(line: Mapping[str, Any]) -> tuple[Any, ...]:
    detail = line["detail"]
    if line["kind"] == "sla_credit":
        return ("sla_credit", None, None, None)
    return (
        line["kind"],
        int(detail["terms_version"]),
        at(detail["segment_start"]),
        at(detail["segment_end"]),
    )


def overlapping(lines: Sequence[Mapping[str, Any]]) -> list[str]:
    """Segment lines of one kind whose segments overlap without being the same."""
    problems = []
    spans = [
        (line["position"], line["kind"], stated_key(line)[2], stated_key(line)[3])
        for line in lines
        if line["kind"] in SEGMENT_KINDS
    ]
    for i, (pos_a, kind_a, lo_a, hi_a) in enumerate(spans):
        for pos_b, kind_b, lo_b, hi_b in spans[i + 1 :]:
            if kind_a == kind_b and (lo_a, hi_a) != (lo_b, hi_b) and lo_a < hi_b and lo_b < hi_a:
                problems.append(
                    f"invoice lines {pos_a} and {pos_b} ({kind_a}): their segments overlap "
                    f"({iso_utc(lo_a)} to {iso_utc(hi_a)} and {iso_utc(lo_b)} to {iso_utc(hi_b)})"
                )
    return problems


__all__ = [
    "KINDS",
    "SEGMENT_KINDS",
    "Expected",
    "expected_lines",
    "overlapping",
    "rent_rate",
    "service_rate",
    "stated_key",
]
