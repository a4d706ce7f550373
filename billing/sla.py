"""SLA evaluation of a lease over any window, from the hourly rollups (never raw runs).

Policy for samples that measured nothing (the probe failed, timed out, could not reach a
node, printed garbage, or its slot was missed): they are *unknown*, shown in every report,
and never counted as compliant. The provider runs the probes, so for credits an unknown
sample counts against the provider: compliance = passed / (passed + failed + unknown).
The compliance over measured samples only, passed / (passed + failed), is reported beside
it. Samples inside a maintenance window of the terms in force are excluded from both.

The compliance that credits are computed on is the lower of throughput compliance and
availability (the share of minutes in which every node's links were up), over the figures
the lease has."""

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import Max, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from billing.models import HourlyRollup
from leases.choices import ProbeKind
from leases.models import Lease

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
        return self.kind(ProbeKind.THROUGHPUT)

    @property
    def credit_compliance_percent(self) -> Decimal | None:
        """The lower of throughput compliance and availability; None when neither exists."""
        figures = [
            figure
            for figure in (self.throughput.percent, self.availability.percent)
            if figure is not None
        ]
        return min(figures) if figures else None


# Rollup rows summed into one Compliance (evaluate_many, daily).
COMPLIANCE_SUMS = {
    "passed": Sum("passed"),
    "failed": Sum("failed"),
    "unknown": Sum("unknown"),
    "excluded": Sum("excluded"),
    "informational": Sum("informational"),
    "measured": Sum("measured"),
    "sum_bps": Sum("sum_bps"),
    "min_bps": Min("min_bps"),
    "max_bps": Max("max_bps"),
    "sum_latency_us": Sum("sum_latency_us"),
}


def _compliance(row: Mapping[str, Any]) -> Compliance:
    return Compliance(
        passed=row["passed"],
        failed=row["failed"],
        unknown=row["unknown"],
        excluded=row["excluded"],
        informational=row["informational"],
        measured=row["measured"],
        sum_bps=row["sum_bps"] or Decimal(0),
        min_bps=row["min_bps"],
        max_bps=row["max_bps"],
        sum_latency_us=row["sum_latency_us"] or 0.0,
    )


def evaluate_many(
    *, windows: dict[int, tuple[datetime, datetime]], rollups: QuerySet | None = None
) -> dict[int, SlaSummary]:
    """``evaluate`` for many leases, each over its own window, in one grouped query.
    ``rollups`` narrows the rows read (a page passes the user's visible ones)."""
    if not windows:
        return {}
    scope = Q()
    for lease_id, (start, end) in windows.items():
        scope |= Q(lease_id=lease_id, hour__gte=start, hour__lt=end)
    rows = (
        (rollups if rollups is not None else HourlyRollup.objects.all())
        .filter(scope)
        .values("lease_id", "kind")
        .annotate(
            **COMPLIANCE_SUMS,
            available=Sum("available_minutes"),
            unavailable=Sum("unavailable_minutes"),
            unknown_minutes=Sum("unknown_minutes"),
        )
        .order_by()
    )
    by_kind: dict[int, dict[str, Compliance]] = defaultdict(dict)
    availability: dict[int, Availability] = {}
    for row in rows:
        by_kind[row["lease_id"]][row["kind"]] = _compliance(row)
        if row["kind"] == ProbeKind.LINK:
            availability[row["lease_id"]] = Availability(
                available_minutes=row["available"] or 0,
                unavailable_minutes=row["unavailable"] or 0,
                unknown_minutes=row["unknown_minutes"] or 0,
            )
    return {
        lease_id: SlaSummary(
            lease_id,
            start,
            end,
            by_kind.get(lease_id, {}),
            availability.get(lease_id, Availability()),
        )
        for lease_id, (start, end) in windows.items()
    }


def evaluate(*, lease: Lease | int, start: datetime, end: datetime) -> SlaSummary:
    """The lease's SLA over [start, end) from the hourly rollups whose hour starts inside
    it: one query whatever the length of the window."""
    lease_id = lease if isinstance(lease, int) else lease.pk
    return evaluate_many(windows={lease_id: (start, end)})[lease_id]


def daily(*, lease: Lease, start: datetime, end: datetime) -> dict[tuple[str, str], Compliance]:
    """(local day "YYYY-MM-DD" in the tenant's zone, kind) -> that day's figures, summed
    from the hourly rollups in one query (the daily aggregate of SLA history)."""
    zone = ZoneInfo(lease.tenant.time_zone)
    rows = (
        HourlyRollup.objects.filter(lease=lease, hour__gte=start, hour__lt=end)
        .annotate(day=TruncDate("hour", tzinfo=zone))
        .values("day", "kind")
        .annotate(**COMPLIANCE_SUMS)
        .order_by("day", "kind")
    )
    return {(row["day"].isoformat(), row["kind"]): _compliance(row) for row in rows}
