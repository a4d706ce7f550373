"""SLA evaluation of a lease over any window, from the hourly rollups (never raw runs).

Policy for samples that measured nothing (the probe failed, timed out, could not reach a
node, printed garbage, or its slot was missed): they are *unknown*, shown in every report,
and never counted as compliant. The provider runs the probes, so for credits an unknown
sample counts against the provider: compliance = passed / (passed + failed + unknown).
The compliance over measured samples only, passed / (passed + failed), is reported beside
it. Samples inside a maintenance window of the terms in force are excluded from both.

The compliance that credits are computed on is the lower of throughput compliance and
availability (the share of minutes in which every node's links were up, less the degraded
minutes its terms' degraded_weight counts as down: ``gpulease_verify.compliance``), over
the figures the lease has."""

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import Max, Min, Q, QuerySet, Sum
from django.db.models.functions import TruncDate

from billing.models import HourlyRollup
from gpulease_verify.compliance import Availability, Compliance, SlaSummary
from leases.choices import ProbeKind
from leases.models import Lease

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
            degraded=Sum("degraded_minutes"),
            degraded_weighted=Sum("degraded_weighted"),
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
                degraded_minutes=row["degraded"] or 0,
                degraded_weighted=row["degraded_weighted"] or Decimal(0),
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
