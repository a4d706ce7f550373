"""The reads of incidents that other apps make (the portal, the API, billing's reports,
monitoring's metrics, telemetry's fabric report, ingest). Writes go through
``incidents.services``."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Count, Q, QuerySet, Sum

from incidents.choices import FabricIncidentKind, IncidentState, MeteringIncidentKind
from incidents.models import Incident
from incidents.repair import REPAIR_KINDS


def visible_to(user: Any) -> QuerySet[Incident]:
    """Every incident the user may see (a tenant's own; the provider's staff all)."""
    return Incident.objects.visible_to(user)


def open_for(user: Any) -> QuerySet[Incident]:
    """The open incidents the user sees."""
    return visible_to(user).filter(state=IncidentState.OPEN)


def open_keys(*, lease_ids: Iterable[int]) -> set[tuple[int, str, str, str]]:
    """(lease id, kind, pattern, target) of each open incident of the leases."""
    return set(
        Incident.objects.filter(state=IncidentState.OPEN, lease_id__in=list(lease_ids)).values_list(
            "lease_id", "kind", "pattern", "target"
        )
    )


def overlapping(
    *, lease: Any, start: datetime, end: datetime, kinds: Iterable[str] | None = None
) -> QuerySet[Incident]:
    """The lease's incidents that overlap [start, end): opened before ``end`` and not
    closed before ``start`` (an open one always)."""
    rows = Incident.objects.filter(lease=lease, opened_at__lt=end).exclude(closed_at__lt=start)
    return rows if kinds is None else rows.filter(kind__in=list(kinds))


def fabric_within(*, lease: Any, since: datetime, until: datetime) -> QuerySet[Incident]:
    """The lease's fabric incidents (health rules, integrity disputes) that overlap
    [since, until], both ends included (the fabric report's window)."""
    return Incident.objects.filter(
        lease=lease, kind__in=FabricIncidentKind.values, opened_at__lte=until
    ).exclude(closed_at__lt=since)


def open_fabric_counts(*, leases: Iterable[Any]) -> list[Any]:
    """One row per (lease, kind, pattern) of the leases' open fabric incidents: how many,
    and their violating samples (an integrity incident's disputed samples)."""
    return list(
        Incident.objects.filter(
            lease__in=list(leases), state=IncidentState.OPEN, kind__in=FabricIncidentKind.values
        )
        .values("lease_id", "kind", "pattern")
        .annotate(count=Count("id"), violations=Sum("violations"))
        .order_by()
    )


def lease_counts(
    *, user: Any, lease_ids: Iterable[int], since: datetime
) -> list[tuple[int, str, str, datetime]]:
    """(lease id, state, kind, opened_at) of the leases' incidents the user sees that are
    open or opened since ``since``."""
    return list(
        visible_to(user)
        .filter(lease_id__in=list(lease_ids))
        .filter(Q(state=IncidentState.OPEN) | Q(opened_at__gte=since))
        .values_list("lease_id", "state", "kind", "opened_at")
    )


def resolved_repairs(*, user: Any, lease: Any) -> list[Incident]:
    """The lease's network faults the user sees resolved since it started, with just
    what time to repair reads (``incidents.repair.time_to_repair``)."""
    return list(
        visible_to(user)
        .filter(lease=lease, kind__in=REPAIR_KINDS, closed_at__gte=lease.starts_at)
        .only("kind", "opened_at", "closed_at", "acknowledged_at")
    )


def repairs_resolved(*, lease_id: int, start: datetime, end: datetime) -> list[Incident]:
    """The lease's network faults resolved in [start, end), in order of resolution: what
    the repair-time objective counts (``gpulease_verify.repair.repair_credit``)."""
    return list(
        Incident.objects.filter(
            lease_id=lease_id, kind__in=REPAIR_KINDS, closed_at__gte=start, closed_at__lt=end
        ).order_by("closed_at", "pk")
    )


def repairs_overlapping(*, lease_id: int, start: datetime, end: datetime) -> list[Incident]:
    """The lease's network faults open at some instant of [start, end) or resolved in it,
    with the runs that opened them (an audit bundle's ``incidents``)."""
    return list(
        Incident.objects.filter(lease_id=lease_id, kind__in=REPAIR_KINDS, opened_at__lt=end)
        .exclude(closed_at__lt=start)
        .prefetch_related("runs")
        .order_by("opened_at", "pk")
    )


# --- read by api, billing, portal ---


def incidents_for_provider() -> QuerySet[Incident]:
    """Every incident, unscoped."""
    return Incident.objects.all()


def metering_gaps_at(
    *, lease: Any, targets: Iterable[str], opened_at: Iterable[datetime]
) -> QuerySet[Incident]:
    """The lease's metering-gap incidents of ``targets`` (nodes) opened at one of
    ``opened_at`` (a gap's start)."""
    return Incident.objects.filter(
        lease=lease,
        kind=MeteringIncidentKind.GAP,
        target__in=targets,
        opened_at__in=opened_at,
    )


def metering_gap_spans(
    *, lease: Any, start: datetime, end: datetime
) -> QuerySet[Incident, tuple[datetime, datetime | None]]:
    """(opened_at, closed_at) of the lease's metering gaps that reach into [start, end)."""
    return Incident.objects.filter(
        lease=lease, kind=MeteringIncidentKind.GAP, opened_at__lt=end, closed_at__gt=start
    ).values_list("opened_at", "closed_at")


def metering_gaps_of_tenant(
    *, tenant_id: int, start: datetime, end: datetime
) -> QuerySet[Incident]:
    """The metering gaps of the tenant's leases that reach into [start, end)."""
    return Incident.objects.filter(
        lease__tenant_id=tenant_id,
        kind=MeteringIncidentKind.GAP,
        opened_at__lt=end,
        closed_at__gt=start,
    )
