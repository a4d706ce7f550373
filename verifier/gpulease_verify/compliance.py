"""Compliance and availability figures of a window: what the SLA report, the invoice's
credit and an auditor's recomputation all read (``billing.sla`` fills them from rollups,
``gpulease-verify`` from the runs in a bundle). Percentages are half-up to 0.001."""

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

PERCENT_QUANTUM = Decimal("0.001")


def _percent(part: int, whole: int) -> Decimal | None:
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
    available_minutes: int = 0
    unavailable_minutes: int = 0
    unknown_minutes: int = 0

    @property
    def percent(self) -> Decimal | None:
        return _percent(
            self.available_minutes,
            self.available_minutes + self.unavailable_minutes + self.unknown_minutes,
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
