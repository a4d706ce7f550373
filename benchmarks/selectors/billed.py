"""Reads of probe runs and rejudgements that billing makes: the acceptance attempts, the
chain links of a period or a stretch, the samples ingest rolls up and the heavy runs the
probe tax counts. Each returns the rows (or a lazy QuerySet the caller narrows) exactly
as billing reads them. Writes go through ``benchmarks.services``."""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.db.models import Min, Q, QuerySet

from benchmarks.choices import Pattern, RunState, Trigger, Verdict
from benchmarks.models import SLOT_REACH, ProbeRun, Rejudgement, with_effective_judgement
from leases.choices import HEAVY_PROBE_KINDS, ProbeKind

__all__ = [
    "acceptance_links",
    "acceptance_rows",
    "acceptance_rows_of",
    "chain_head_before",
    "chain_stretch",
    "counter_reading_runs",
    "deferred_heavy_count",
    "failed_rejudgement_run_ids",
    "heavy_runs_between",
    "heavy_runs_started_within",
    "judged_links_within",
    "linked_rejudgements",
    "runs_in_period",
    "runs_not_ingested",
    "runs_slotted_within",
    "scheduled_closing_runs",
    "scheduled_runs_up_to",
    "scheduled_samples",
    "scheduled_throughput_reaching",
    "spanning_throughput_start",
    "tenant_runs_in_period",
]

# --- read by billing ---


def acceptance_rows(
    *, lease_id: int
) -> QuerySet[ProbeRun, tuple[datetime, str, str, datetime | None]]:
    """(slot, state, verdict, finished_at) of the lease's acceptance runs not skipped, in
    slot order (``gpulease_verify.window.billing_start`` reads them)."""
    return (
        ProbeRun.objects.filter(lease_id=lease_id, trigger=Trigger.ACCEPTANCE)
        .exclude(state=RunState.SKIPPED)
        .order_by("slot_at", "pk")
        .values_list("slot_at", "state", "verdict", "finished_at")
    )


def acceptance_rows_of(
    *, lease_ids: Iterable[int]
) -> QuerySet[ProbeRun, tuple[int, datetime, str, str, datetime | None]]:
    """(lease id, slot, state, verdict, finished_at) of the leases' acceptance runs not
    skipped, by lease and slot: one query for a page of leases."""
    return (
        ProbeRun.objects.filter(lease_id__in=lease_ids, trigger=Trigger.ACCEPTANCE)
        .exclude(state=RunState.SKIPPED)
        .order_by("lease_id", "slot_at", "pk")
        .values_list("lease_id", "slot_at", "state", "verdict", "finished_at")
    )


def acceptance_links(*, lease: Any) -> QuerySet[ProbeRun]:
    """The lease's linked acceptance runs not skipped, with lease and terms, in slot
    order."""
    return (
        ProbeRun.objects.filter(lease=lease, trigger="acceptance", chain_index__isnull=False)
        .exclude(state="skipped")
        .select_related("lease", "terms")
        .order_by("slot_at", "pk")
    )


def linked_rejudgements(
    *, lease: Any, run_ids: Iterable[int], first: int, last: int
) -> list[Rejudgement]:
    """The lease's linked rejudgements of ``run_ids`` and those whose link lies in
    [first, last], with lease, run and terms, in chain order."""
    return list(
        Rejudgement.objects.filter(lease=lease, chain_index__isnull=False)
        .filter(Q(run_id__in=run_ids) | Q(chain_index__gte=first, chain_index__lte=last))
        .select_related("lease", "run", "terms")
        .order_by("chain_index")
    )


def failed_rejudgement_run_ids(*, lease: Any) -> QuerySet[Rejudgement, Any]:
    """The ids (``run_id``) of the lease's runs re-judged a fail, as a subquery."""
    return Rejudgement.objects.filter(lease=lease, verdict=Verdict.FAIL).values("run_id")


def runs_in_period(*, lease: Any, start: datetime, end: datetime) -> QuerySet[ProbeRun]:
    """The lease's runs with a slot in [start, end)."""
    return ProbeRun.objects.filter(lease=lease, slot_at__gte=start, slot_at__lt=end)


def tenant_runs_in_period(*, tenant_id: int, start: datetime, end: datetime) -> QuerySet[ProbeRun]:
    """The runs of the tenant's leases with a slot in [start, end)."""
    return ProbeRun.objects.filter(
        lease__tenant_id=tenant_id,
        slot_at__gte=start,
        slot_at__lt=end,
    )


def runs_slotted_within(*, lease: Any, since: datetime, until: datetime) -> QuerySet[ProbeRun]:
    """The lease's runs with a slot in [since, until]."""
    return ProbeRun.objects.filter(lease=lease, slot_at__gte=since, slot_at__lte=until)


def spanning_throughput_start(*, lease: Any, start: datetime) -> int | None:
    """The first link among the lease's linked scheduled (or confirming) throughput
    samples whose slot began before ``start`` and reaches past it; None when none."""
    return ProbeRun.objects.filter(
        lease=lease,
        kind=ProbeKind.THROUGHPUT,
        trigger__in=(Trigger.SCHEDULE, Trigger.CONFIRMATION),
        slot_at__gte=start - SLOT_REACH,
        slot_at__lt=start,
        deadline_at__gt=start,
        chain_index__isnull=False,
    ).aggregate(lo=Min("chain_index"))["lo"]


def chain_stretch(*, lease: Any, first: int, last: int) -> list[ProbeRun]:
    """The lease's runs linked at [first, last], with their effective judgement, lease,
    terms and nodes, in chain order."""
    return list(
        with_effective_judgement(
            ProbeRun.objects.filter(lease=lease, chain_index__gte=first, chain_index__lte=last)
        )
        .select_related("lease", "terms")
        .prefetch_related("nodes")
        .order_by("chain_index")
    )


def chain_head_before(*, lease_id: int, end: datetime) -> tuple[int | None, str] | None:
    """(index, hash) of the lease's last link of a run whose slot is before ``end``; None
    when there is none."""
    return (
        ProbeRun.objects.filter(lease_id=lease_id, chain_index__isnull=False, slot_at__lt=end)
        .order_by("-chain_index")
        .values_list("chain_index", "run_hash")
        .first()
    )


def judged_links_within(*, lease: Any, start: datetime, end: datetime) -> QuerySet[ProbeRun]:
    """The lease's linked scheduled (or confirming) runs with a slot in [start, end)."""
    return ProbeRun.objects.filter(
        lease=lease,
        # a confirmation is judged with the sample it confirms
        trigger__in=[Trigger.SCHEDULE, Trigger.CONFIRMATION],
        chain_index__isnull=False,
        slot_at__gte=start,
        slot_at__lt=end,
    )


def scheduled_closing_runs(
    *, lease_id: int, kind: str, pattern: str, opened_at: datetime, closed_at: datetime
) -> QuerySet[ProbeRun]:
    """The scheduled runs of the lease's ``kind`` and ``pattern`` with a slot in
    [opened_at, closed_at] that finished at ``closed_at``."""
    return ProbeRun.objects.filter(
        lease_id=lease_id,
        kind=kind,
        pattern=pattern,
        trigger=Trigger.SCHEDULE,
        slot_at__gte=opened_at,
        slot_at__lte=closed_at,
        finished_at=closed_at,
    )


def scheduled_samples(
    *, lease: Any, kind: str, states: Iterable[str], start: datetime, end: datetime
) -> QuerySet[ProbeRun]:
    """The lease's scheduled runs of ``kind`` in ``states`` with a slot in [start, end),
    with their terms."""
    return ProbeRun.objects.filter(
        lease=lease,
        kind=kind,
        trigger=Trigger.SCHEDULE,
        state__in=states,
        slot_at__gte=start,
        slot_at__lt=end,
    ).select_related("terms")


def scheduled_throughput_reaching(
    *, lease: Any, states: Iterable[str], start: datetime, end: datetime
) -> QuerySet[ProbeRun]:
    """The lease's scheduled throughput samples in ``states`` whose [slot_at,
    deadline_at) overlaps [start, end)."""
    return ProbeRun.objects.filter(
        lease=lease,
        kind=ProbeKind.THROUGHPUT,
        trigger=Trigger.SCHEDULE,
        state__in=states,
        slot_at__gte=start - SLOT_REACH,
        slot_at__lt=end,
        deadline_at__gt=start,
    )


def scheduled_runs_up_to(*, run: ProbeRun) -> QuerySet[ProbeRun]:
    """The scheduled runs of the run's lease, kind and pattern up to and including its
    slot, newest first."""
    return ProbeRun.objects.filter(
        lease_id=run.lease_id,
        kind=run.kind,
        pattern=run.pattern,
        trigger=Trigger.SCHEDULE,
        slot_at__lte=run.slot_at,
    ).order_by("-slot_at")


def counter_reading_runs(*, lease: Any) -> QuerySet[ProbeRun]:
    """The lease's scheduled counters runs that can hold readings: sweeps that are over
    and, stored before sweeps, per-node runs that ended ok."""
    return ProbeRun.objects.filter(
        lease=lease, kind=ProbeKind.COUNTERS, trigger=Trigger.SCHEDULE
    ).filter(Q(state=RunState.OK) | Q(pattern=Pattern.SWEEP, finished_at__isnull=False))


def heavy_runs_between(*, lease: Any, start: datetime, end: datetime) -> QuerySet[ProbeRun]:
    """The lease's heavy probes that ended ok and ran in [start, end]."""
    return ProbeRun.objects.filter(
        lease=lease,
        kind__in=HEAVY_PROBE_KINDS,
        state=RunState.OK,
        started_at__lte=end,
        finished_at__gte=start,
        slot_at__gte=start - SLOT_REACH,  # the partitions such runs can be in
        slot_at__lte=end,
    )


def heavy_runs_started_within(
    *, lease: Any, start: datetime, end: datetime, slots_from: datetime
) -> QuerySet[ProbeRun]:
    """The lease's finished heavy probes that ended ok and started in [start, end), with a
    slot in [slots_from, end), that sent bytes (ingest records ``{}`` for an output it
    cannot read)."""
    return ProbeRun.objects.filter(
        lease=lease,
        kind__in=HEAVY_PROBE_KINDS,
        state=RunState.OK,
        started_at__gte=start,
        started_at__lt=end,
        finished_at__isnull=False,
        slot_at__gte=slots_from,
        slot_at__lt=end,
    ).exclude(sent_bytes={})


def deferred_heavy_count(*, lease: Any, start: datetime, end: datetime, prefix: str) -> int:
    """How many of the lease's heavy probes with a slot in [start, end) were skipped with
    an error that starts with ``prefix`` (deferred)."""
    return ProbeRun.objects.filter(
        lease=lease,
        kind__in=HEAVY_PROBE_KINDS,
        state=RunState.SKIPPED,
        error__startswith=prefix,
        slot_at__gte=start,
        slot_at__lt=end,
    ).count()


def runs_not_ingested() -> QuerySet[ProbeRun]:
    """The finished runs ingest has not read yet (``ingested_at`` unset; a partial index
    holds just them)."""
    return ProbeRun.objects.filter(finished_at__isnull=False, ingested_at__isnull=True)
