"""Reads of probe runs that other apps make for their views, reports and metrics: every
run (unscoped) or the runs a user may see, runs by key, their node links, and the
figures the portal, the API, monitoring and telemetry's fabric report read. Writes go
through ``benchmarks.services``."""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Count, OuterRef, QuerySet

from benchmarks.choices import Pattern, RunState
from benchmarks.models import SLOT_REACH, MissedRunCount, ProbeRun
from leases.choices import ProbeKind

__all__ = [
    "integrity_disputes",
    "missed_totals_by_site",
    "newest_counter_sweep",
    "newest_ok_finish",
    "queued_counts_by_site",
    "run_counts_by_site_and_state",
    "run_node_links",
    "runs_for_provider",
    "runs_keyed",
    "runs_visible_to",
]

# --- read by api, portal, billing, monitoring, telemetry ---


def runs_for_provider() -> QuerySet[ProbeRun]:
    """Every probe run, unscoped."""
    return ProbeRun.objects.all()


def runs_visible_to(user: Any) -> QuerySet[ProbeRun]:
    """The probe runs the user may see (ProbeRun.objects.visible_to)."""
    return ProbeRun.objects.visible_to(user)


def runs_keyed(keys: Iterable[tuple[int, datetime]]) -> QuerySet[ProbeRun]:
    """The runs given as (id, slot), each found in its partition (ProbeRun.objects.keyed)."""
    return ProbeRun.objects.keyed(keys)


def run_node_links() -> QuerySet[Any]:
    """Every (run, node) link of the runs' ``nodes``, unscoped."""
    return ProbeRun.nodes.through.objects.all()


def newest_ok_finish(*, kind: str) -> QuerySet[ProbeRun, Any]:
    """A subquery on the outer lease: when its newest run of ``kind`` that ended ``ok``
    finished (its (lease, kind, -slot) index)."""
    return (
        ProbeRun.objects.filter(lease=OuterRef("pk"), kind=kind, state=RunState.OK)
        .order_by("-slot_at")
        .values("finished_at")[:1]
    )


def newest_counter_sweep(*, instant: datetime) -> QuerySet[ProbeRun, Any]:
    """A subquery on the outer lease: the parsed output of its newest counters sweep over
    by ``instant``, in the months a current reading can be in."""
    return (
        ProbeRun.objects.filter(
            lease=OuterRef("pk"),
            kind=ProbeKind.COUNTERS,
            pattern=Pattern.SWEEP,
            finished_at__isnull=False,
            # the months a current reading can be in, not every month held or made ahead
            slot_at__gte=instant - SLOT_REACH,
            slot_at__lte=instant,
        )
        .order_by("-slot_at")
        .values("parsed")[:1]
    )


def run_counts_by_site_and_state(
    *, since: datetime, until: datetime
) -> QuerySet[Any, tuple[int, str, int]]:
    """(site id, state, count) of the runs with a slot in [since, until]."""
    return (
        ProbeRun.objects.filter(slot_at__gte=since, slot_at__lte=until)
        .values_list("site_id", "state")
        .annotate(n=Count("pk"))
        .order_by()
    )


def queued_counts_by_site() -> dict[int, int]:
    """Site id -> how many runs are queued (``scheduled``)."""
    return dict(
        ProbeRun.objects.filter(state=RunState.SCHEDULED)
        .values_list("site_id")
        .annotate(n=Count("pk"))
        .order_by()
    )


def missed_totals_by_site() -> dict[int, int]:
    """Site id -> how many runs it has missed in all (MissedRunCount)."""
    return dict(MissedRunCount.objects.values_list("site_id", "total"))


def integrity_disputes(
    *, lease: Any, since: datetime, until: datetime, rule_prefix: str
) -> QuerySet[ProbeRun]:
    """The lease's runs with a slot in [since, until] judged by a rule that starts with
    ``rule_prefix`` (the switch witness's disputes), by slot."""
    return ProbeRun.objects.filter(
        lease=lease, slot_at__gte=since, slot_at__lte=until, rule__startswith=rule_prefix
    ).order_by("slot_at")
