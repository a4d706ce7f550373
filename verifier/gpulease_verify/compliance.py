"""Compliance and availability figures of a window: what the SLA report, the invoice's
credit and an auditor's recomputation all read (``billing.sla`` fills them from rollups,
``gpulease-verify`` from the runs in a bundle). Percentages are half-up to 0.001.

**Availability in minutes.** Each link-check slot gives its minutes (``deadline_at -
slot_at``, whole minutes) to one of four counts (``slot_availability``, the one rule
billing's rollups and the verifier both apply):

- **down**: the slot is unavailable (a node's link check failed, or telemetry saw a port
  down or a flap within it);
- **no evidence**: the slot measured nothing it could judge (unknown);
- **degraded**: the links were up, but the minute lies in a throughput slot whose sample
  failed its verdict: measured below the terms' SLA threshold (``sla_threshold_percent``
  of ``contracted_bandwidth_gbps``), the failure confirmed (``gpulease_verify.samples``);
- **pass**: the links were up and no failed throughput sample covers the minute.

``available_minutes`` is pass + degraded (the links were up), as before degraded minutes
were told apart. The terms' ``degraded_weight`` w (0 to 1, default 0) says how much of a
degraded minute counts as down; each slot's degraded minutes are weighed by the terms
version its link checks were judged by, and ``degraded_weighted`` is their sum:

    availability = (pass + degraded - degraded_weighted) / (pass + degraded + down +
                   no evidence) x 100, half-up to 0.001

With w = 0 a degraded minute is up (the availability before degraded minutes existed);
with w = 1 it is down; with 0.5 half of it is."""

from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

PERCENT_QUANTUM = Decimal("0.001")
MINUTE = timedelta(minutes=1)


def _percent(part: int | Decimal, whole: int) -> Decimal | None:
    if whole == 0:
        return None
    return (Decimal(part) * 100 / Decimal(whole)).quantize(PERCENT_QUANTUM, ROUND_HALF_UP)


@dataclass(frozen=True)
class Compliance:
    passed: int = 0
    failed: int = 0
    unknown: int = 0
    excluded: int = 0
    informational: int = 0
    measured: int = 0
    sum_bps: Decimal = Decimal(0)
    min_bps: int | None = None
    max_bps: int | None = None
    sum_latency_us: float = 0.0

    @property
    def samples(self) -> int:
        return self.passed + self.failed + self.unknown

    @property
    def percent(self) -> Decimal | None:
        """Passed over every sample that should exist (unknown counts against)."""
        return _percent(self.passed, self.samples)

    @property
    def measured_percent(self) -> Decimal | None:
        return _percent(self.passed, self.passed + self.failed)

    @property
    def mean_bps(self) -> Decimal | None:
        return (self.sum_bps / self.measured).quantize(Decimal(1)) if self.measured else None


@dataclass(frozen=True)
class Availability:
    """Minutes of link-check slots (module docstring): ``available_minutes`` the links
    were up (pass + degraded), ``unavailable_minutes`` down, ``unknown_minutes`` no
    evidence; ``degraded_minutes`` of the available ones fell in a failed throughput
    slot, and ``degraded_weighted`` is those minutes times their terms' degraded_weight
    (exact, never rounded: the minutes that count as down)."""

    available_minutes: int = 0
    unavailable_minutes: int = 0
    unknown_minutes: int = 0
    degraded_minutes: int = 0
    degraded_weighted: Decimal = Decimal(0)

    def __add__(self, other: "Availability") -> "Availability":
        return Availability(
            self.available_minutes + other.available_minutes,
            self.unavailable_minutes + other.unavailable_minutes,
            self.unknown_minutes + other.unknown_minutes,
            self.degraded_minutes + other.degraded_minutes,
            self.degraded_weighted + other.degraded_weighted,
        )

    @property
    def pass_minutes(self) -> int:
        return self.available_minutes - self.degraded_minutes

    @property
    def down_minutes(self) -> int:
        return self.unavailable_minutes

    @property
    def no_evidence_minutes(self) -> int:
        return self.unknown_minutes

    @property
    def total_minutes(self) -> int:
        return self.available_minutes + self.unavailable_minutes + self.unknown_minutes

    def counts(self) -> dict[str, int]:
        """The four counts by name, as every report shows them."""
        return {
            "pass_minutes": self.pass_minutes,
            "degraded_minutes": self.degraded_minutes,
            "down_minutes": self.down_minutes,
            "no_evidence_minutes": self.no_evidence_minutes,
        }

    @property
    def percent(self) -> Decimal | None:
        return _percent(self.available_minutes - self.degraded_weighted, self.total_minutes)


class ShortSpans:
    """The spans ``[from, until)`` of the failed throughput slots, merged where they touch
    or overlap and sorted, so a minute is looked up by bisection."""

    def __init__(self, spans: Iterable[tuple[datetime, datetime]] = ()) -> None:
        merged: list[list[datetime]] = []
        for lo, hi in sorted(span for span in spans if span[0] < span[1]):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self.starts = [lo for lo, _hi in merged]
        self.ends = [hi for _lo, hi in merged]

    def __bool__(self) -> bool:
        return bool(self.starts)

    def covers(self, instant: datetime) -> bool:
        at = bisect_right(self.starts, instant) - 1
        return at >= 0 and instant < self.ends[at]

    def minutes_within(self, *, start: datetime, minutes: int) -> int:
        """How many of the whole minutes ``[start + i min, start + (i+1) min)``, i <
        minutes, begin inside a span."""
        if not self.starts:
            return 0
        return sum(1 for i in range(minutes) if self.covers(start + i * MINUTE))


def slot_availability(
    *,
    outcome: str | None,
    slot: datetime,
    minutes: int,
    short: ShortSpans | None = None,
    degraded_weight: Decimal = Decimal(0),
) -> Availability:
    """What one link-check slot gives availability: its ``minutes`` to down
    (``unavailable``), no evidence (``unknown``) or, ``available``, to pass and degraded
    (the minutes that begin in a span of ``short``), the degraded ones weighed by
    ``degraded_weight`` (of the terms its link checks were judged by). ``outcome`` None:
    the slot is excluded and gives nothing."""
    if outcome is None:
        return Availability()
    if outcome == "unavailable":
        return Availability(unavailable_minutes=minutes)
    if outcome == "unknown":
        return Availability(unknown_minutes=minutes)
    degraded = short.minutes_within(start=slot, minutes=minutes) if short else 0
    return Availability(
        available_minutes=minutes,
        degraded_minutes=degraded,
        degraded_weighted=Decimal(degraded) * Decimal(degraded_weight),
    )


@dataclass(frozen=True)
class SlaSummary:
    lease_id: int
    start: datetime
    end: datetime
    by_kind: dict[str, Compliance]
    availability: Availability

    def kind(self, kind: str) -> Compliance:
        return self.by_kind.get(kind, Compliance())

    @property
    def throughput(self) -> Compliance:
        return self.kind("throughput")

    @property
    def credit_compliance_percent(self) -> Decimal | None:
        """The lower of throughput compliance and availability; None when neither exists."""
        figures = [
            figure
            for figure in (self.throughput.percent, self.availability.percent)
            if figure is not None
        ]
        return min(figures) if figures else None
