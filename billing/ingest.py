"""From finished probe runs to what SLA reports and billing read: hourly rollups, traffic
samples and incidents.

A Celery beat task reads the runs that finished since its cursor, in order, and
recomputes only what they touch: the hour of each run's slot, the traffic samples of the
slots a new counter reading changes (from the node's reading before it to its reading
after it: ``gpulease_verify.traffic``), and the incident state of each judged target.
A late result is just a run that finishes late: it touches its own hour and nothing else.
Only scheduled runs are SLA samples; acceptance and manual runs are evidence, not
samples.
"""

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from benchmarks.choices import RunState, Tool, Trigger, Verdict
from benchmarks.models import (
    SLOT_REACH,
    ProbeRun,
    effective_terms_id,
    effective_verdict,
    with_effective_judgement,
)
from billing.choices import IncidentState
from billing.models import HourlyRollup, Incident, IngestCursor, TrafficSample
from billing.probe_tax import record_sent, sent_of, taxed
from common.progress import counter
from gpulease_verify import probe_tax
from gpulease_verify.bundle import hour_start
from gpulease_verify.health import unavailable_within
from gpulease_verify.probe_tax import ProbeSend
from gpulease_verify.samples import classify_sample, link_slot_outcome, telemetry_slot_outcome
from gpulease_verify.telemetry import PortSample as Sample
from gpulease_verify.traffic import COUNTER_BITS, max_rate_bps, reading_of, slot_traffic
from leases.choices import HEAVY_PROBE_KINDS, ProbeKind
from leases.contract_rules import in_weekly_windows
from leases.models import Lease, LeaseTerms

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)
# How far around new counter readings their neighbours are looked for in one query.
NEIGHBOUR_SPAN = timedelta(hours=2)
CURSOR = "runs"
BATCH = 5000
# A run that measured nothing: an unknown sample, never a compliant one.
UNKNOWN_STATES = frozenset(
    {RunState.FAILED, RunState.TIMEOUT, RunState.UNREACHABLE, RunState.UNPARSABLE, RunState.MISSED}
)
FINAL = [*UNKNOWN_STATES, RunState.OK, RunState.SKIPPED]


hour_of = hour_start  # the rollup hour, as the verifier cuts it


@dataclass
class IngestResult:
    runs: int = 0
    hours: int = 0
    traffic_samples: int = 0  # samples written
    opened: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)


# --- classifying one run --------------------------------------------------------------


def in_maintenance(run: ProbeRun, zone: str) -> bool:
    return bool(
        run.terms
        and run.terms.maintenance_windows
        and in_weekly_windows(run.terms.maintenance_windows, run.slot_at, zone)
    )


def classify(run: ProbeRun, zone: str, terms: LeaseTerms | None = None) -> str:
    """passed, failed, unknown, excluded or informational (``gpulease_verify.samples``, the rule
    an audit bundle is recomputed with), by the run's effective judgement: the verdict
    ``with_effective_judgement`` annotates (its latest rejudgement's, else its own) and the
    maintenance windows of ``terms``, the version it counts under (default its own)."""
    judged_by = terms if terms is not None else run.terms
    return classify_sample(
        state=run.state,
        verdict=effective_verdict(run),
        slot_at=run.slot_at,
        maintenance_windows=judged_by.maintenance_windows if judged_by else None,
        zone=zone,
    )


def _judged_by(runs: list[ProbeRun], lease: Lease) -> dict[int, LeaseTerms | None]:
    """Run id -> the terms version it counts under: its own, or its latest rejudgement's
    (the lease's versions are read once, only when some run was re-judged)."""
    rejudged = {run.pk for run in runs if effective_terms_id(run) != run.terms_id}
    versions = {t.pk: t for t in LeaseTerms.objects.filter(lease=lease)} if rejudged else {}
    return {
        run.pk: versions.get(effective_terms_id(run) or 0) if run.pk in rejudged else run.terms
        for run in runs
    }


# --- hourly rollups ---------------------------------------------------------------------


def recompute_hour(*, lease: Lease, kind: str, hour: datetime) -> HourlyRollup:
    runs = list(
        with_effective_judgement(
            ProbeRun.objects.filter(
                lease=lease,
                kind=kind,
                trigger=Trigger.SCHEDULE,
                state__in=FINAL,
                slot_at__gte=hour,
                slot_at__lt=hour + HOUR,
            ).select_related("terms")
        )
    )
    zone = lease.tenant.time_zone
    judged_by = _judged_by(runs, lease)
    counts: dict[str, int] = defaultdict(int)
    figures = [run.measured_bps for run in runs if run.state == RunState.OK and run.measured_bps]
    slots: dict[datetime, list[str]] = defaultdict(list)
    minutes_of: dict[datetime, int] = {}
    for run in runs:
        outcome = classify(run, zone, judged_by[run.pk])
        counts[outcome] += 1
        if kind == ProbeKind.LINK:
            slots[run.slot_at].append(outcome)
            minutes_of[run.slot_at] = int((run.deadline_at - run.slot_at).total_seconds() // 60)
    minutes = {"available": 0, "unavailable": 0, "unknown": 0}
    down = telemetry_down(lease=lease, hour=hour) if slots else {}
    for slot, outcomes in slots.items():
        given = telemetry_slot_outcome(
            link_slot_outcome(outcomes),
            telemetry_down=unavailable_within(
                down, start=slot, end=slot + timedelta(minutes=minutes_of[slot])
            ),
        )
        if given is not None:
            minutes[given] += minutes_of[slot]
    rollup, _ = HourlyRollup.objects.update_or_create(
        lease=lease,
        kind=kind,
        hour=hour,
        defaults={
            "passed": counts["passed"],
            "failed": counts["failed"],
            "unknown": counts["unknown"],
            "excluded": counts["excluded"],
            "informational": counts["informational"],
            "measured": len(figures),
            "sum_bps": Decimal(sum(figures)),
            "min_bps": min(figures, default=None),
            "max_bps": max(figures, default=None),
            "sum_latency_us": sum(run.latency_us or 0.0 for run in runs if run.state == "ok"),
            "available_minutes": minutes["available"],
            "unavailable_minutes": minutes["unavailable"],
            "unknown_minutes": minutes["unknown"],
        },
    )
    return rollup


def telemetry_down(*, lease: Lease, hour: datetime) -> dict[tuple[str, str], list[Sample]]:
    """(node, port) -> the telemetry intervals of the lease's batches that can make a
    link-check slot of the hour unavailable (``gpulease_verify.health.unavailable_only``),
    as the audit bundle carries them: one query, on the few intervals that are not up."""
    from benchmarks.chain import as_sample
    from telemetry.models import PortSample

    found: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    rows = (
        PortSample.objects.filter(batch__lease=lease, at__gt=hour, at__lte=hour + 2 * HOUR)
        .filter(Q(up=False) | Q(down_cycles__gt=0))
        .select_related("node")
        .order_by("at")
    )
    for row in rows:
        found[(row.node.hostname, row.port)].append(as_sample(row))
    return found


# --- traffic samples ----------------------------------------------------------------------


def _counter_runs(lease: Lease):  # type: ignore[no-untyped-def]
    return ProbeRun.objects.filter(
        lease=lease, kind=ProbeKind.COUNTERS, trigger=Trigger.SCHEDULE, state=RunState.OK
    )


def _neighbours(
    lease: Lease, slots: dict[str, datetime], *, before: bool
) -> dict[str, tuple[int, datetime]]:
    """Node -> (id, slot) of its counters reading just before (``before``) or just after
    its slot in ``slots``; nodes with none are left out. One query for every node, over
    the few hours around the slots (one or two monthly partitions); one more per node
    only where its neighbour is further away than that."""
    if not slots:
        return {}
    runs = _counter_runs(lease).filter(target__in=list(slots))
    lo, hi = min(slots.values()), max(slots.values())
    near = (
        runs.filter(slot_at__gte=lo - NEIGHBOUR_SPAN, slot_at__lt=hi)
        if before
        else runs.filter(slot_at__gt=lo, slot_at__lte=hi + NEIGHBOUR_SPAN)
    )
    found: dict[str, tuple[int, datetime]] = {}
    for pk, target, slot_at in near.order_by("slot_at").values_list("pk", "target", "slot_at"):
        if before and slot_at < slots[target]:
            found[target] = (pk, slot_at)  # the latest one before wins
        elif not before and slot_at > slots[target] and target not in found:
            found[target] = (pk, slot_at)
    for target, slot_at in slots.items():
        if target in found:
            continue
        far = (
            runs.filter(target=target, slot_at__lt=slot_at).order_by("-slot_at")
            if before
            else runs.filter(target=target, slot_at__gt=slot_at).order_by("slot_at")
        )
        row = far.values_list("pk", "slot_at").first()
        if row is not None:
            found[target] = row
    return found


def traffic_window(
    *, lease: Lease, first: dict[str, datetime], last: dict[str, datetime]
) -> tuple[datetime, datetime]:
    """The slots that new readings can change: each node's intervals that start or end at
    a new reading, i.e. from its reading before its first new one to its reading after
    its last new one (``first`` and ``last``: node -> slot of its new readings)."""
    before = _neighbours(lease, first, before=True)
    after = _neighbours(lease, last, before=False)
    starts = [before[t][1] if t in before else slot for t, slot in first.items()]
    ends = [after[t][1] if t in after else slot for t, slot in last.items()]
    return min(starts), max(ends)


def _probe_senders(run: ProbeRun) -> list[str]:
    """The nodes whose traffic samples a finished heavy run may change: a pair's two
    nodes, or every node with counters for a collective."""
    if not taxed(run):
        return []
    assert run.started_at is not None and run.finished_at is not None
    if ">" in run.target:
        return run.target.split(">")
    # A collective: every node the lease held while it ran.
    return list(
        run.lease.assignments.during(run.started_at, run.finished_at).values_list(
            "node__hostname", flat=True
        )
    )


def _heavy_runs(*, lease: Lease, start: datetime, end: datetime) -> QuerySet[ProbeRun]:
    """The lease's finished heavy probes that ran in [start, end]: what the traffic
    samples of that span are taken away from."""
    return ProbeRun.objects.filter(
        lease=lease,
        kind__in=HEAVY_PROBE_KINDS,
        state=RunState.OK,
        started_at__lte=end,
        finished_at__gte=start,
        slot_at__gte=start - SLOT_REACH,  # the partitions such runs can be in
        slot_at__lte=end,
    )


def probe_sends(*, lease: Lease, start: datetime, end: datetime) -> dict[str, list[ProbeSend]]:
    """Node -> what the lease's finished heavy probes that ran in [start, end] sent
    (``gpulease_verify.probe_tax``), to be kept out of its traffic samples. A run whose
    output cannot be read again is logged and counts nothing."""
    rows = list(
        _heavy_runs(lease=lease, start=start, end=end)
        .order_by("started_at", "pk")
        .values_list("pk", "slot_at", "sent_bytes", "started_at", "finished_at")
    )
    sent_by = sent_of((pk, slot, sent) for pk, slot, sent, _started, _finished in rows)
    found: list[ProbeSend] = []
    for pk, _slot, _sent, started, finished in rows:
        assert started is not None and finished is not None
        found += [
            ProbeSend(node, count, started, max(finished, started))
            for node, count in sorted(sent_by.get(pk, {}).items())
        ]
    return probe_tax.by_node(found)


def _edges(
    lease: Lease, start: datetime, end: datetime, read: set[str]
) -> tuple[dict[str, tuple[int, datetime]], dict[str, tuple[int, datetime]]]:
    """Node -> (id, slot) of its counters reading just before ``start`` and just after
    ``end``, for every node read in the window (``read``) or held by the lease then: the
    readings just outside the window close the intervals that reach into it."""
    targets = read | set(
        lease.assignments.during(start - NEIGHBOUR_SPAN, end + NEIGHBOUR_SPAN).values_list(
            "node__hostname", flat=True
        )
    )
    before = _neighbours(lease, dict.fromkeys(targets, start), before=True)
    after = _neighbours(lease, dict.fromkeys(targets, end), before=False)
    return before, after


def traffic_evidence(*, lease: Lease, start: datetime, end: datetime) -> QuerySet[ProbeRun]:
    """The runs outside [start, end) that the window's traffic samples are rebuilt from:
    each node's counters readings just outside it (its reading at ``end`` and the one
    after) and the heavy probes that ran over its readings' span. An audit bundle's
    stretch of the chain takes them in, so that the verifier rebuilds the samples from the
    runs (``gpulease_verify.traffic.rebuild``)."""
    read = set(
        _counter_runs(lease)
        .filter(slot_at__gte=start, slot_at__lt=end)
        .values_list("target", flat=True)
        .distinct()
    )
    before, after = _edges(lease, start, end, read)
    edges = [*before.values(), *after.values()]
    lo = min([start, *(slot for _pk, slot in before.values())])
    hi = max([end, *(slot for _pk, slot in after.values())])
    at_end = _counter_runs(lease).filter(slot_at=end).values("pk")  # closes the last slot
    heavy = _heavy_runs(lease=lease, start=lo, end=hi).values("pk")
    return ProbeRun.objects.filter(
        lease=lease, slot_at__gte=lo - SLOT_REACH, slot_at__lte=hi
    ).filter(Q(pk__in=[pk for pk, _slot in edges]) | Q(pk__in=at_end) | Q(pk__in=heavy))


def recompute_traffic(*, lease: Lease, start: datetime, end: datetime) -> int:
    """Rebuild the lease's traffic samples of the slots in [start, end) from every node's
    counter readings (``gpulease_verify.traffic``: each node's bytes over its own
    interval, spread over the slots it covers, each sample stamped with its slot's start).
    Returns the samples written."""
    runs = _counter_runs(lease)
    by_node: dict[str, list[ProbeRun]] = defaultdict(list)
    for run in runs.filter(slot_at__gte=start, slot_at__lte=end).order_by("slot_at"):
        by_node[run.target].append(run)
    before, after = _edges(lease, start, end, set(by_node))
    edges = ProbeRun.objects.in_bulk([pk for pk, _slot in (*before.values(), *after.values())])
    for target in set(by_node) | set(before) | set(after):
        outside = (edges.get(before.get(target, (0,))[0]), edges.get(after.get(target, (0,))[0]))
        by_node[target] = [r for r in (outside[0], *by_node[target], outside[1]) if r is not None]
    rates = lease.assignments.filter(node__nic_ports__isnull=False).values_list(
        "node__nic_ports__rate_gbps", flat=True
    )
    read = [run.slot_at for found in by_node.values() for run in found]
    probes = probe_sends(lease=lease, start=min(read), end=max(read)) if read else {}
    slots = slot_traffic(
        {
            target: [
                reading_of(run.parsed, slot_at=run.slot_at, deadline_at=run.deadline_at)
                for run in found
            ]
            for target, found in by_node.items()
        },
        start=start,
        end=end,
        counter_bits=COUNTER_BITS,
        max_rate_bps=max_rate_bps(rates),
        probes=probes,
    )
    TrafficSample.objects.filter(lease=lease, slot_at__gte=start, slot_at__lt=end).delete()
    TrafficSample.objects.bulk_create(
        TrafficSample(
            lease=lease,
            slot_at=slot.slot_at,
            seconds=slot.seconds,
            tx_bytes=Decimal(slot.bytes),
            nodes=slot.nodes,
            resets=slot.resets,
            wraps=slot.wraps,
            switch_nodes=slot.switch_nodes,
        )
        for slot in slots
    )
    return len(slots)


# --- incidents ------------------------------------------------------------------------------


def _judged_until(run: ProbeRun):  # type: ignore[no-untyped-def]
    """The judged samples of the run's target up to and including its slot, newest first."""
    return ProbeRun.objects.filter(
        lease_id=run.lease_id,
        kind=run.kind,
        pattern=run.pattern,
        target=run.target,
        trigger=Trigger.SCHEDULE,
        state=RunState.OK,
        verdict__in=[Verdict.PASS, Verdict.FAIL],
        slot_at__lte=run.slot_at,
    ).order_by("-slot_at")


def _worse(incident: Incident, run: ProbeRun) -> None:
    if run.measured_bps is not None and (
        incident.worst_bps is None or run.measured_bps < incident.worst_bps
    ):
        incident.worst_bps = run.measured_bps
    if run.latency_us is not None and (
        incident.worst_latency_us is None or run.latency_us > incident.worst_latency_us
    ):
        incident.worst_latency_us = run.latency_us


def track_incident(run: ProbeRun) -> tuple[Incident | None, str]:
    """Open, extend or close the incident of the run's target. Returns (incident, event)
    with event "opened", "closed" or ""."""
    key = {"lease_id": run.lease_id, "kind": run.kind, "pattern": run.pattern, "target": run.target}
    open_incident = Incident.objects.filter(state=IncidentState.OPEN, **key).first()
    if open_incident is not None:
        if run.verdict == Verdict.PASS:
            open_incident.state = IncidentState.CLOSED
            open_incident.closed_at = run.finished_at or run.slot_at
            open_incident.save()
            return open_incident, "closed"
        if not open_incident.runs.filter(pk=run.pk).exists():
            open_incident.runs.add(run)
            open_incident.violations += 1
            _worse(open_incident, run)
            open_incident.save()
        return open_incident, ""
    needed = run.terms.incident_after_violations if run.terms else 3
    recent = list(_judged_until(run)[:needed])
    if len(recent) < needed or any(r.verdict != Verdict.FAIL for r in recent):
        return None, ""
    first = recent[-1]
    incident = Incident(
        state=IncidentState.OPEN,
        opened_at=first.slot_at,
        violations=len(recent),
        rule=first.rule,
        terms=run.terms or first.terms,
        **key,
    )
    for violating in recent:
        _worse(incident, violating)
    incident.save()
    incident.runs.set(recent)
    return incident, "opened"


def _notify_after_commit(incident: Incident, event: str) -> None:
    from billing.tasks import notify_incident

    transaction.on_commit(lambda: notify_incident.delay(incident.pk, event))


# --- the job --------------------------------------------------------------------------------


def pending_runs() -> QuerySet[ProbeRun]:
    """The finished runs ingest has not read yet (``ingested_at`` unset; a partial index
    holds just them): the one definition that ingest, issuing, ``/readyz`` and
    ``/metrics`` share. Not a cursor on finished_at: runs commit in any order of it."""
    return ProbeRun.objects.filter(finished_at__isnull=False, ingested_at__isnull=True)


def ingest(*, limit: int = BATCH, notify: bool = True) -> IngestResult:
    """Process the next runs that finished since the cursor. Returns what it touched."""
    result = IngestResult()
    with transaction.atomic():
        # One ingest at a time: the cursor row is the lock (and says how far it read).
        cursor, _ = IngestCursor.objects.select_for_update().get_or_create(name=CURSOR)
        runs = pending_runs().order_by("finished_at", "pk")
        batch = list(runs.select_related("lease__tenant", "terms")[:limit])
        if not batch:
            return result
        hours: set[tuple[int, str, datetime]] = set()
        # lease -> node -> slot of its first and of its last new counter reading
        first_new: dict[int, dict[str, datetime]] = defaultdict(dict)
        last_new: dict[int, dict[str, datetime]] = defaultdict(dict)
        leases = {run.lease_id: run.lease for run in batch}
        record_sent(batch)
        for run in batch:
            # A heavy probe's bytes leave the samples of the slots it ran in, whatever
            # started it: those slots are rebuilt, even if their counters were read before.
            for node in _probe_senders(run):
                assert run.started_at is not None and run.finished_at is not None
                seen_first, seen_last = first_new[run.lease_id], last_new[run.lease_id]
                seen_first[node] = min(seen_first.get(node, run.started_at), run.started_at)
                seen_last[node] = max(seen_last.get(node, run.finished_at), run.finished_at)
            if run.trigger != Trigger.SCHEDULE:
                continue
            hours.add((run.lease_id, run.kind, hour_of(run.slot_at)))
            if run.kind == ProbeKind.COUNTERS and run.state == RunState.OK:
                seen_first, seen_last = first_new[run.lease_id], last_new[run.lease_id]
                seen_first[run.target] = min(seen_first.get(run.target, run.slot_at), run.slot_at)
                seen_last[run.target] = max(seen_last.get(run.target, run.slot_at), run.slot_at)
        for lease_id, kind, hour in sorted(hours, key=lambda h: (h[0], h[1], h[2])):
            recompute_hour(lease=leases[lease_id], kind=kind, hour=hour)
        for lease_id in sorted(first_new):
            lease = leases[lease_id]
            start, end = traffic_window(
                lease=lease, first=first_new[lease_id], last=last_new[lease_id]
            )
            result.traffic_samples += recompute_traffic(lease=lease, start=start, end=end)
        judged = [
            run
            for run in batch
            if run.trigger == Trigger.SCHEDULE
            and run.state == RunState.OK
            and run.verdict in (Verdict.PASS, Verdict.FAIL)
            and run.tool != Tool.COUNTERS
        ]
        # A pass where no incident is open changes nothing: most runs of a healthy fleet
        # skip track_incident's queries.
        open_keys = set(
            Incident.objects.filter(state=IncidentState.OPEN, lease_id__in=leases).values_list(
                "lease_id", "kind", "pattern", "target"
            )
        )
        for run in sorted(judged, key=lambda r: r.slot_at):
            key = (run.lease_id, run.kind, run.pattern, run.target)
            if run.verdict == Verdict.PASS and key not in open_keys:
                continue
            incident, event = track_incident(run)
            if event == "opened":
                open_keys.add(key)
            elif event == "closed":
                open_keys.discard(key)
            if incident is not None and event:
                (result.opened if event == "opened" else result.closed).append(incident.pk)
                if notify:
                    _notify_after_commit(incident, event)
        ProbeRun.objects.filter(
            pk__in=[run.pk for run in batch],
            # the partitions these runs are in, not every month's
            slot_at__gte=min(run.slot_at for run in batch),
            slot_at__lte=max(run.slot_at for run in batch),
        ).update(ingested_at=timezone.now())
        last = batch[-1]
        cursor.finished_at, cursor.run_id = last.finished_at, last.pk
        cursor.save()
        result.runs, result.hours = len(batch), len(hours)
    return result


def pending_since() -> datetime | None:
    """When the oldest finished run that ingest has not read yet finished (None: caught
    up). ``/readyz`` measures the ingest lag from it; two queries, on the cursor's index."""
    return (
        pending_runs().order_by("finished_at", "pk").values_list("finished_at", flat=True).first()
    )


def ingest_all(*, notify: bool = True) -> IngestResult:
    """Ingest until caught up (commands and tests; the beat task takes one batch a time)."""
    total = IngestResult()
    with counter(desc="ingest", unit="runs") as bar:
        while True:
            step = ingest(notify=notify)
            if not step.runs:
                return total
            bar.update(step.runs)
            total.runs += step.runs
            total.hours += step.hours
            total.traffic_samples += step.traffic_samples
            total.opened += step.opened
            total.closed += step.closed


def recompute_window(*, lease: Lease, start: datetime, end: datetime) -> int:
    """Recompute every hourly rollup of the lease in [start, end): after its terms were
    corrected for a past window and its runs re-judged. Returns the rollups written."""
    written = 0
    hour = hour_of(start)
    while hour < end:
        for kind in ProbeKind.values:
            recompute_hour(lease=lease, kind=kind, hour=hour)
            written += 1
        hour += HOUR
    return written


def now_hour() -> datetime:
    return hour_of(timezone.now())
