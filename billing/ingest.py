"""From finished probe runs to what SLA reports and billing read: hourly rollups, traffic
samples and incidents.

A Celery beat task reads the runs that finished since its cursor, in order, and
recomputes only what they touch: the hour of each run's slot, the traffic samples of the
slots a new counter reading changes (from the node's reading before it to its reading
after it: ``gpulease_verify.traffic``), and the incident state of each judged target.
A late result is just a run that finishes late: it touches its own hour and nothing else.
Only scheduled runs are SLA samples; acceptance and manual runs are evidence, not
samples, and a confirmation changes the sample of the scheduled run it confirms
(``gpulease_verify.samples``).
"""

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, Max, Min, Q, QuerySet
from django.utils import timezone

from benchmarks import selectors as run_selectors
from benchmarks.choices import Pattern, RunState, Tool, Trigger, Verdict
from benchmarks.models import (
    NOT_PASSED,
    SLOT_REACH,
    ProbeRun,
    effective_terms_id,
    sample_verdict,
    with_confirmation,
    with_effective_judgement,
)
from billing import metering_gaps, running, thresholds
from billing.models import HourlyRollup, IngestCursor, TrafficSample
from billing.probe_tax import record_sent, sent_of, taxed
from common.locks import lock_in_key_order, locking
from common.progress import counter
from gpulease_verify import probe_tax, sweep
from gpulease_verify.bundle import hour_start
from gpulease_verify.compliance import Availability, ShortSpans, slot_availability
from gpulease_verify.health import unavailable_within
from gpulease_verify.probe_tax import ProbeSend
from gpulease_verify.samples import (
    CONFIRMED_KINDS,
    classify_sample,
    link_slot_outcome,
    short_spans,
    telemetry_slot_outcome,
)
from gpulease_verify.telemetry import PortSample as Sample
from gpulease_verify.traffic import (
    COUNTER_BITS,
    Reading,
    gaps,
    max_rate_bps,
    reading_of,
    slot_traffic,
)
from incidents import selectors as incident_selectors
from incidents import services as incident_services
from incidents.models import Incident
from leases.choices import ProbeKind
from leases.contract_rules import in_weekly_windows
from leases.models import Lease, LeaseTerms
from leases.selectors import terms_of

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
    an audit bundle is recomputed with), by the run's sample verdict: the verdict
    ``with_effective_judgement`` annotates (its latest rejudgement's, else its own), cleared
    by a confirmation that passed (``with_confirmation``), and the maintenance windows of
    ``terms``, the version it counts under (default its own)."""
    judged_by = terms if terms is not None else run.terms
    return classify_sample(
        state=run.state,
        verdict=sample_verdict(run),
        slot_at=run.slot_at,
        maintenance_windows=judged_by.maintenance_windows if judged_by else None,
        zone=zone,
    )


def _judged_by(runs: list[ProbeRun], lease: Lease) -> dict[int, LeaseTerms | None]:
    """Run id -> the terms version it counts under: its own, or its latest rejudgement's
    (the lease's versions are read once, only when some run was re-judged)."""
    rejudged = {run.pk for run in runs if effective_terms_id(run) != run.terms_id}
    versions = {t.pk: t for t in terms_of(lease=lease)} if rejudged else {}
    return {
        run.pk: versions.get(effective_terms_id(run) or 0) if run.pk in rejudged else run.terms
        for run in runs
    }


# --- hourly rollups ---------------------------------------------------------------------


def recompute_hour(*, lease: Lease, kind: str, hour: datetime) -> None:
    recompute_hours(lease=lease, kind=kind, hours=[hour])


# Hours closer than this share one read of runs and telemetry (a probe kind that runs every
# few hours leaves gaps; a late result weeks back is read on its own).
BLOCK_GAP = timedelta(hours=12)


def _blocks(hours: Iterable[datetime]) -> Iterator[list[datetime]]:
    """The hours, sorted and cut where two are further apart than ``BLOCK_GAP``: one query
    reads each block."""
    block: list[datetime] = []
    for hour in sorted(set(hours)):
        if block and hour - block[-1] > BLOCK_GAP:
            yield block
            block = []
        block.append(hour)
    if block:
        yield block


def recompute_hours(*, lease: Lease, kind: str, hours: Iterable[datetime]) -> int:
    """Rebuild the lease's rollups of ``kind`` for ``hours``: each block of nearby hours
    reads its runs and its telemetry in one query each and writes its rollups in one
    upsert (only the hours asked for). Returns the rollups written."""
    written = 0
    for block in _blocks(hours):
        first, end = block[0], block[-1] + HOUR
        runs = with_effective_judgement(
            run_selectors.scheduled_samples(
                lease=lease, kind=kind, states=FINAL, start=first, end=end
            )
        )
        runs = list(with_confirmation(runs) if kind in CONFIRMED_KINDS else runs)
        judged_by = _judged_by(runs, lease)
        by_hour: dict[datetime, list[ProbeRun]] = defaultdict(list)
        for run in runs:
            by_hour[hour_of(run.slot_at)].append(run)
        down: list[tuple[tuple[str, str], Sample]] = []
        short = ShortSpans()
        if kind == ProbeKind.LINK:
            down = telemetry_down(lease=lease, start=first, end=end)
            if runs:
                short = short_throughput(
                    lease=lease,
                    start=min(run.slot_at for run in runs),
                    end=max(run.deadline_at for run in runs),
                )
        rollups = [
            _rollup(lease, kind, hour, by_hour[hour], judged_by, down, short) for hour in block
        ]
        HourlyRollup.objects.bulk_create(
            rollups,
            update_conflicts=True,
            unique_fields=["lease", "kind", "hour"],
            update_fields=[*ROLLUP_FIGURES, "computed_at"],
        )
        written += len(rollups)
    return written


ROLLUP_FIGURES = [
    "passed",
    "failed",
    "unknown",
    "excluded",
    "informational",
    "measured",
    "sum_bps",
    "min_bps",
    "max_bps",
    "sum_latency_us",
    "available_minutes",
    "unavailable_minutes",
    "unknown_minutes",
    "degraded_minutes",
    "degraded_weighted",
]


def short_throughput(*, lease: Lease, start: datetime, end: datetime) -> ShortSpans:
    """The lease's failed throughput slots (``gpulease_verify.samples.short_spans``) that
    reach into ``[start, end)``: its scheduled throughput samples whose ``[slot_at,
    deadline_at)`` overlaps it, by their sample verdict (a confirmation heard) and the
    maintenance windows of the terms they count under. Only samples that did not pass, or
    were re-judged, can make a slot short: one query on the ``run_not_passed`` index (two
    with a rejudgement)."""
    rejudged = run_selectors.failed_rejudgement_run_ids(lease=lease)
    runs = with_confirmation(
        with_effective_judgement(
            run_selectors.scheduled_throughput_reaching(
                lease=lease, states=FINAL, start=start, end=end
            )
            .filter(NOT_PASSED | Q(pk__in=rejudged))
            .select_related("terms")
        )
    )
    runs = list(runs)
    judged_by = _judged_by(runs, lease)
    zone = lease.tenant.time_zone
    return ShortSpans(
        short_spans(
            (run.slot_at, run.deadline_at, classify(run, zone, judged_by[run.pk])) for run in runs
        )
    )


def link_hours_of_throughput(*, lease: Lease, runs: Iterable[ProbeRun]) -> list[datetime]:
    """The hours of the lease's link-check rollups whose minutes throughput ``runs`` (new,
    confirming or re-judged) can degrade: from the hour before each run's slot (a link
    slot that starts then reaches into it) to the hour of its deadline, where a link
    rollup exists already (a link run ingested later reads the throughput itself). One
    query."""
    hours: set[datetime] = set()
    for run in runs:
        if run.kind != ProbeKind.THROUGHPUT:
            continue
        hour = hour_of(run.slot_at) - HOUR
        while hour <= hour_of(run.deadline_at):
            hours.add(hour)
            hour += HOUR
    if not hours:
        return []
    return sorted(
        HourlyRollup.objects.filter(
            lease=lease, kind=ProbeKind.LINK, hour__gte=min(hours), hour__lte=max(hours)
        )
        .filter(hour__in=sorted(hours))
        .values_list("hour", flat=True)
    )


def _rollup(
    lease: Lease,
    kind: str,
    hour: datetime,
    runs: list[ProbeRun],
    judged_by: dict[int, LeaseTerms | None],
    down: list[tuple[tuple[str, str], Sample]],
    short: ShortSpans,
) -> HourlyRollup:
    """The hour's rollup from its scheduled runs, the lease's not-up telemetry and its
    failed throughput slots (``short``: the minutes they cover are degraded)."""
    zone = lease.tenant.time_zone
    counts: dict[str, int] = defaultdict(int)
    figures = [run.measured_bps for run in runs if run.state == RunState.OK and run.measured_bps]
    slots: dict[datetime, list[str]] = defaultdict(list)
    minutes_of: dict[datetime, int] = {}
    weight_of: dict[datetime, Decimal] = {}
    for run in runs:
        outcome = classify(run, zone, judged_by[run.pk])
        counts[outcome] += 1
        if kind == ProbeKind.LINK:
            slots[run.slot_at].append(outcome)
            minutes_of[run.slot_at] = int((run.deadline_at - run.slot_at).total_seconds() // 60)
            terms = judged_by[run.pk]
            weight = terms.degraded_weight if terms else Decimal(0)
            weight_of[run.slot_at] = max(weight_of.get(run.slot_at, weight), weight)
    minutes = Availability()
    # What a slot of this hour hears from telemetry: the intervals that end within two
    # hours after the hour starts (those that can reach into its slots).
    ports: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    if slots:
        for port, sample in down:
            if hour < sample.at <= hour + 2 * HOUR:
                ports[port].append(sample)
    for slot, outcomes in slots.items():
        given = telemetry_slot_outcome(
            link_slot_outcome(outcomes),
            telemetry_down=unavailable_within(
                ports, start=slot, end=slot + timedelta(minutes=minutes_of[slot])
            ),
        )
        minutes += slot_availability(
            outcome=given,
            slot=slot,
            minutes=minutes_of[slot],
            short=short,
            degraded_weight=weight_of[slot],
        )
    return HourlyRollup(
        lease=lease,
        kind=kind,
        hour=hour,
        passed=counts["passed"],
        failed=counts["failed"],
        unknown=counts["unknown"],
        excluded=counts["excluded"],
        informational=counts["informational"],
        measured=len(figures),
        sum_bps=Decimal(sum(figures)),
        min_bps=min(figures, default=None),
        max_bps=max(figures, default=None),
        sum_latency_us=sum(run.latency_us or 0.0 for run in runs if run.state == "ok"),
        available_minutes=minutes.available_minutes,
        unavailable_minutes=minutes.unavailable_minutes,
        unknown_minutes=minutes.unknown_minutes,
        degraded_minutes=minutes.degraded_minutes,
        degraded_weighted=minutes.degraded_weighted,
    )


def telemetry_down(
    *, lease: Lease, start: datetime, end: datetime
) -> list[tuple[tuple[str, str], Sample]]:
    """((node, port), interval) of the lease's telemetry that can make a link-check slot
    in [start, end) unavailable (``gpulease_verify.health.unavailable_only``), as the audit
    bundle carries them, in time order: one query, on the few intervals that are not up."""
    from telemetry import selectors as telemetry_selectors
    from telemetry.links import as_sample

    rows = telemetry_selectors.unavailable_samples(lease=lease, after=start, until=end + HOUR)
    return [((row.node.hostname, row.port), as_sample(row)) for row in rows]


# --- traffic samples ----------------------------------------------------------------------


def _counter_runs(lease: Lease):  # type: ignore[no-untyped-def]
    """The lease's scheduled counters runs that can hold readings: sweeps that are over
    (their nodes read one by one) and, stored before sweeps, per-node runs that ended ok."""
    return run_selectors.counter_reading_runs(lease=lease)


READ = ("pk", "slot_at", "deadline_at", "pattern", "target", "state", "verdict", "parsed")


def _read(rows: Iterable[tuple]) -> Iterator[tuple[int, datetime, datetime, sweep.NodeResult]]:
    """(run id, slot, deadline, node result) of every node read ok in ``rows`` (values of
    ``READ``), in the rows' order."""
    for pk, slot_at, deadline_at, pattern, target, state, verdict, parsed in rows:
        for result in sweep.node_results(
            pattern=pattern, target=target, state=state, verdict=verdict, parsed=parsed
        ):
            if result.ok:
                yield pk, slot_at, deadline_at, result


def _held_spans(lease: Lease, nodes: Iterable[str]) -> dict[str, tuple[datetime, datetime | None]]:
    """Node -> the slots its counters readings for the lease can have: from its first
    assignment to the lease to its last one's end (None: held still), widened by
    ``SLOT_REACH`` (the monthly partitions those runs are in). One query."""
    rows = (
        lease.assignments.filter(void=False, node__hostname__in=list(nodes))
        .values("node__hostname")
        .annotate(
            first=Min("assigned_from"),
            last=Max("assigned_until"),
            held=Count("pk", filter=Q(assigned_until__isnull=True)),
        )
        .order_by()
    )
    return {
        row["node__hostname"]: (
            row["first"] - SLOT_REACH,
            None if row["held"] else row["last"] + SLOT_REACH,
        )
        for row in rows
    }


def _neighbours(
    lease: Lease, slots: dict[str, datetime], *, before: bool
) -> dict[str, tuple[int, datetime]]:
    """Node -> (id, slot) of its counters reading just before (``before``) or just after
    its slot in ``slots``, however far away (a metering gap: ``gpulease_verify.traffic``);
    nodes with none are left out. One query for every node, over the few hours around the
    slots (one or two monthly partitions); one more per node only where it was not read
    then, walking on in the database within the time the lease held the node
    (``_held_spans``: the partitions of its assignments, never every month held)."""
    if not slots:
        return {}
    runs = _counter_runs(lease).filter(Q(pattern=Pattern.SWEEP) | Q(target__in=list(slots)))
    lo, hi = min(slots.values()), max(slots.values())
    near = (
        runs.filter(slot_at__gte=lo - NEIGHBOUR_SPAN, slot_at__lt=hi)
        if before
        else runs.filter(slot_at__gt=lo, slot_at__lte=hi + NEIGHBOUR_SPAN)
    )
    found: dict[str, tuple[int, datetime]] = {}
    for pk, slot_at, _deadline, result in _read(near.order_by("slot_at").values_list(*READ)):
        node = result.node
        if node not in slots or (slot_at >= slots[node] if before else slot_at <= slots[node]):
            continue
        if before or node not in found:
            found[node] = (pk, slot_at)  # before: the latest one wins; after: the first
    unread = [node for node in slots if node not in found]
    spans = _held_spans(lease, unread) if unread else {}
    for node in unread:
        if node not in spans:
            continue
        first, last = spans[node]
        slot = slots[node]
        # Further away: the run that read the node ok, found in the database (a sweep's
        # node entry, or a run of the node stored before sweeps).
        read = Q(pattern=Pattern.SWEEP, **{f"parsed__nodes__{node}__state": sweep.OK})
        near_node = runs.filter(read | Q(target=node, state=RunState.OK))
        if before:
            far = near_node.filter(slot_at__gte=first, slot_at__lt=slot).order_by("-slot_at")
        else:
            far = near_node.filter(slot_at__gt=slot).order_by("slot_at")
            far = far.filter(slot_at__lte=last) if last is not None else far
        row = far.values_list("pk", "slot_at").first()
        if row is not None:
            found[node] = row
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
    return run_selectors.heavy_runs_between(lease=lease, start=start, end=end)


def probe_sends(*, lease: Lease, start: datetime, end: datetime) -> dict[str, list[ProbeSend]]:
    """Node -> what the lease's finished heavy probes that ran in [start, end] sent
    (``gpulease_verify.probe_tax``), to be kept out of its traffic samples. A run whose
    output cannot be read again is logged and counts nothing."""
    return _probe_bytes(lease=lease, start=start, end=end)[0]


def _probe_bytes(
    *, lease: Lease, start: datetime, end: datetime
) -> tuple[dict[str, list[ProbeSend]], dict[str, list[ProbeSend]]]:
    """``probe_sends``, and node -> what those probes sent to it
    (``gpulease_verify.probe_tax.received``), to be kept out of its received bytes."""
    rows = list(
        _heavy_runs(lease=lease, start=start, end=end)
        .order_by("started_at", "pk")
        .values_list("pk", "slot_at", "sent_bytes", "started_at", "finished_at", "target")
    )
    sent_by = sent_of((pk, slot, sent) for pk, slot, sent, _started, _finished, _target in rows)
    found: list[ProbeSend] = []
    received: list[ProbeSend] = []
    for pk, _slot, _sent, started, finished, target in rows:
        assert started is not None and finished is not None
        sent = [
            ProbeSend(node, count, started, max(finished, started))
            for node, count in sorted(sent_by.get(pk, {}).items())
        ]
        found += sent
        received += probe_tax.received(sent, target=target)
    return probe_tax.by_node(found), probe_tax.by_node(received)


def _edges(
    lease: Lease, start: datetime, end: datetime, read: set[str]
) -> tuple[dict[str, tuple[int, datetime]], dict[str, tuple[int, datetime]]]:
    """Node -> (id, slot) of its counters reading just before ``start`` and just after
    ``end``, for every node read in the window (``read``, up to and including ``end``) or
    held by the lease then: the readings just outside the window close the intervals that
    reach into it. A node read neither in nor after the window has no interval there, so
    its reading before is not looked for (a node down for weeks costs no walk back)."""
    targets = read | set(
        lease.assignments.during(start - NEIGHBOUR_SPAN, end + NEIGHBOUR_SPAN).values_list(
            "node__hostname", flat=True
        )
    )
    after = _neighbours(lease, dict.fromkeys(targets, end), before=False)
    before = _neighbours(lease, dict.fromkeys(read | set(after), start), before=True)
    return before, after


def traffic_evidence(*, lease: Lease, start: datetime, end: datetime) -> QuerySet[ProbeRun]:
    """The runs outside [start, end) that the window's traffic samples are rebuilt from:
    each node's counters readings just outside it (its reading at ``end`` and the one
    after) and the heavy probes that ran over its readings' span. An audit bundle's
    stretch of the chain takes them in, so that the verifier rebuilds the samples from the
    runs (``gpulease_verify.traffic.rebuild``)."""
    within = _counter_runs(lease).filter(slot_at__gte=start, slot_at__lte=end)
    read = {result.node for _pk, _slot, _deadline, result in _read(within.values_list(*READ))}
    before, after = _edges(lease, start, end, read)
    edges = [*before.values(), *after.values()]
    lo = min([start, *(slot for _pk, slot in before.values())])
    hi = max([end, *(slot for _pk, slot in after.values())])
    at_end = _counter_runs(lease).filter(slot_at=end).values("pk")  # closes the last slot
    heavy = _heavy_runs(lease=lease, start=lo, end=hi).values("pk")
    return run_selectors.runs_slotted_within(lease=lease, since=lo - SLOT_REACH, until=hi).filter(
        Q(pk__in=[pk for pk, _slot in edges]) | Q(pk__in=at_end) | Q(pk__in=heavy)
    )


def recompute_traffic(*, lease: Lease, start: datetime, end: datetime) -> int:
    """Rebuild the lease's traffic samples of the slots in [start, end) from every node's
    counter readings (``gpulease_verify.traffic``: each node's bytes over its own
    interval, spread over the slots it covers, each sample stamped with its slot's start),
    and record the metering gaps among those intervals (``billing.metering_gaps``).
    Returns the samples written."""
    runs = _counter_runs(lease)
    by_node: dict[str, list[Reading]] = defaultdict(list)
    run_of: dict[tuple[str, datetime], tuple[int, datetime]] = {}
    window = runs.filter(slot_at__gte=start, slot_at__lte=end).order_by("slot_at")
    for pk, slot_at, deadline_at, result in _read(window.values_list(*READ)):
        by_node[result.node].append(
            reading_of(result.parsed, slot_at=slot_at, deadline_at=deadline_at)
        )
        run_of[(result.node, slot_at)] = (pk, slot_at)
    before, after = _edges(lease, start, end, set(by_node))
    edges: dict[tuple[int, str], Reading] = {}
    for pk, slot_at, deadline_at, result in _read(
        run_selectors.runs_keyed([*before.values(), *after.values()]).values_list(*READ)
    ):
        edges[(pk, result.node)] = reading_of(
            result.parsed, slot_at=slot_at, deadline_at=deadline_at
        )
        run_of[(result.node, slot_at)] = (pk, slot_at)
    for node in set(by_node) | set(before) | set(after):
        first = edges.get((before[node][0], node)) if node in before else None
        last = edges.get((after[node][0], node)) if node in after else None
        by_node[node] = [r for r in (first, *by_node[node], last) if r is not None]
    rates = lease.assignments.filter(node__nic_ports__isnull=False).values_list(
        "node__nic_ports__rate_gbps", flat=True
    )
    read = [reading.at for found in by_node.values() for reading in found]
    probes, receipts = (
        _probe_bytes(lease=lease, start=min(read), end=max(read)) if read else ({}, {})
    )
    rate = max_rate_bps(rates)
    slots = slot_traffic(
        by_node,
        start=start,
        end=end,
        counter_bits=COUNTER_BITS,
        max_rate_bps=rate,
        probes=probes,
        receipts=receipts,
    )
    TrafficSample.objects.filter(lease=lease, slot_at__gte=start, slot_at__lt=end).delete()
    TrafficSample.objects.bulk_create(
        TrafficSample(
            lease=lease,
            slot_at=slot.slot_at,
            seconds=slot.seconds,
            tx_bytes=Decimal(slot.bytes),
            rx_bytes=Decimal(slot.rx_bytes),
            nodes=slot.nodes,
            resets=slot.resets,
            wraps=slot.wraps,
            switch_nodes=slot.switch_nodes,
        )
        for slot in slots
    )
    found = gaps(by_node, counter_bits=COUNTER_BITS, max_rate_bps=rate)
    if found:
        metering_gaps.record(
            lease=lease,
            gaps=found,
            evidence={
                gap: [run_of[(gap.node, gap.start)], run_of[(gap.node, gap.end)]] for gap in found
            },
        )
    return len(slots)


# --- incidents ------------------------------------------------------------------------------


def _judged_until(run: ProbeRun, node: str, count: int) -> list[tuple[ProbeRun, str]]:
    """The ``count`` latest judged samples of the run's target up to and including its
    slot, newest first, as (run, verdict): of a sweep's ``node``, the sweeps in which that
    node was judged; of any other run, the runs of its target that were."""
    runs = run_selectors.scheduled_runs_up_to(run=run)
    if run.pattern != Pattern.SWEEP:
        judged = runs.filter(
            target=run.target, state=RunState.OK, verdict__in=[Verdict.PASS, Verdict.FAIL]
        )
        if run.kind in CONFIRMED_KINDS:
            judged = with_confirmation(judged)
        return [(found, sample_verdict(found)) for found in judged[:count]]
    found: list[tuple[ProbeRun, str]] = []
    # Newest first, within the months the run's reach allows; a node is judged in nearly
    # every sweep, so this reads about ``count`` rows.
    for earlier in runs.filter(slot_at__gte=run.slot_at - SLOT_REACH).iterator(chunk_size=16):
        verdict = _node_verdict(earlier, node)
        if verdict is not None:
            found.append((earlier, verdict))
            if len(found) == count:
                break
    return found


def _node_verdict(run: ProbeRun, node: str) -> str | None:
    """The node's verdict in the run when it was judged (pass or fail), else None."""
    for result in run.results():
        if result.node == node and result.ok and result.verdict in (Verdict.PASS, Verdict.FAIL):
            return result.verdict
    return None


def judged_targets(run: ProbeRun) -> list[tuple[str, str]]:
    """(target, verdict) of each target a scheduled run judged: a sweep's nodes that were
    judged, one by one; the target of any other run that ended ok with a verdict. Counters
    are never judged."""
    if run.trigger != Trigger.SCHEDULE or run.tool == Tool.COUNTERS:
        return []
    if run.pattern == Pattern.SWEEP:
        return [
            (result.node, result.verdict)
            for result in run.results()
            if result.ok and result.verdict in (Verdict.PASS, Verdict.FAIL)
        ]
    if run.state == RunState.OK and run.verdict in (Verdict.PASS, Verdict.FAIL):
        return [(run.target, _sample_verdict_of(run))]
    return []


def _sample_verdict_of(run: ProbeRun) -> str:
    """The run's verdict as a sample: a fail of a kind that is confirmed reads its
    confirmation (one query, for the few runs that fail)."""
    if run.verdict != Verdict.FAIL or run.kind not in CONFIRMED_KINDS:
        return run.verdict
    return sample_verdict(with_confirmation(run_selectors.runs_keyed([(run.pk, run.slot_at)]))[0])


def track_incident(
    run: ProbeRun, target: str, verdict: str, *, notify: bool = False
) -> tuple[Incident | None, str]:
    """Open, extend or close the incident of ``target`` (the run's, or one node of a
    sweep) from the run's ``verdict`` of it, through ``incidents.services`` (source
    ingest; ``notify`` queues the tenant's notification). Returns (incident, event) with
    event "opened", "closed" or ""."""
    open_incident = incident_services.find_open(
        lease_id=run.lease_id, kind=run.kind, pattern=run.pattern, target=target
    )
    if open_incident is not None:
        if verdict == Verdict.PASS:
            incident_services.close(
                open_incident,
                at=run.finished_at or run.slot_at,
                actor=incident_services.INGEST,
                notify=notify,
            )
            return open_incident, "closed"
        if not open_incident.runs.filter(pk=run.pk).exists():
            incident_services.extend(
                open_incident,
                runs=[run],
                violations=1,
                worst_bps=run.measured_bps,
                worst_latency_us=run.latency_us,
            )
        return open_incident, ""
    needed = run.terms.incident_after_violations if run.terms else 3
    recent = _judged_until(run, target, needed)
    if len(recent) < needed or any(said != Verdict.FAIL for _found, said in recent):
        return None, ""
    first = recent[-1][0]
    terms = run.terms or first.terms
    assert terms is not None
    incident = incident_services.open_incident(
        actor=incident_services.INGEST,
        terms_id=terms.pk,
        opened_at=first.slot_at,
        violations=len(recent),
        rule=first.rule,
        runs=[violating for violating, _said in recent],
        worst=[(violating.measured_bps, violating.latency_us) for violating, _said in recent],
        notify=notify,
        lease_id=run.lease_id,
        kind=run.kind,
        pattern=run.pattern,
        target=target,
    )
    return incident, "opened"


# --- the job --------------------------------------------------------------------------------


def pending_runs() -> QuerySet[ProbeRun]:
    """The finished runs ingest has not read yet (``ingested_at`` unset; a partial index
    holds just them): the one definition that ingest, issuing, ``/readyz`` and
    ``/metrics`` share. Not a cursor on finished_at: runs commit in any order of it."""
    return run_selectors.runs_not_ingested()


def ingest(*, limit: int = BATCH, notify: bool = True) -> IngestResult:
    """Process the next runs that finished since the cursor. Returns what it touched."""
    result = IngestResult()
    windows: dict[int, tuple[Lease, datetime, datetime]] = {}
    with transaction.atomic():
        # One ingest at a time: the cursor row is the lock (and says how far it read).
        cursor, _ = locking(IngestCursor.objects).get_or_create(name=CURSOR)
        runs = pending_runs().order_by("finished_at", "pk")
        batch = list(runs.select_related("lease__tenant", "terms")[:limit])
        if not batch:
            return result
        hours: set[tuple[int, str, datetime]] = set()
        # lease -> node -> slot of its first and of its last new counter reading
        first_new: dict[int, dict[str, datetime]] = defaultdict(dict)
        last_new: dict[int, dict[str, datetime]] = defaultdict(dict)
        these = run_selectors.runs_keyed((run.pk, run.slot_at) for run in batch)
        lock_in_key_order(these)  # the chain appender may be linking some of them
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
            if run.trigger == Trigger.CONFIRMATION:
                # It changes the sample of the scheduled run it confirms, in that hour.
                hours.add((run.lease_id, run.kind, hour_of(run.slot_at)))
            if run.trigger != Trigger.SCHEDULE:
                continue
            hours.add((run.lease_id, run.kind, hour_of(run.slot_at)))
            if run.kind == ProbeKind.COUNTERS:
                seen_first, seen_last = first_new[run.lease_id], last_new[run.lease_id]
                for node_result in run.results():
                    if node_result.ok:
                        node, slot = node_result.node, run.slot_at
                        seen_first[node] = min(seen_first.get(node, slot), slot)
                        seen_last[node] = max(seen_last.get(node, slot), slot)
        # A throughput sample that failed (or was confirmed) degrades the link minutes it
        # covers: the link rollups of its span are rebuilt too.
        throughput: dict[int, list[ProbeRun]] = defaultdict(list)
        for run in batch:
            if run.kind == ProbeKind.THROUGHPUT and run.trigger != Trigger.ACCEPTANCE:
                throughput[run.lease_id].append(run)
        for lease_id, its_runs in throughput.items():
            for hour in link_hours_of_throughput(lease=leases[lease_id], runs=its_runs):
                hours.add((lease_id, ProbeKind.LINK, hour))
        hours_of: dict[tuple[int, str], list[datetime]] = defaultdict(list)
        for lease_id, kind, hour in hours:
            hours_of[(lease_id, kind)].append(hour)
        for (lease_id, kind), its_hours in sorted(hours_of.items()):
            recompute_hours(lease=leases[lease_id], kind=kind, hours=its_hours)
        for lease_id in sorted(first_new):
            lease = leases[lease_id]
            start, end = traffic_window(
                lease=lease, first=first_new[lease_id], last=last_new[lease_id]
            )
            result.traffic_samples += recompute_traffic(lease=lease, start=start, end=end)
            windows[lease_id] = (lease, start, end)
        if notify:  # the tenants' thresholds, evaluated once this commits
            thresholds.watch_after_commit(windows)
        # A pass where no incident is open changes nothing: most runs of a healthy fleet
        # skip track_incident's queries.
        open_keys = set(incident_selectors.open_keys(lease_ids=leases))
        for run in sorted(batch, key=lambda r: r.slot_at):
            for target, verdict in judged_targets(run):
                key = (run.lease_id, run.kind, run.pattern, target)
                if verdict == Verdict.PASS and key not in open_keys:
                    continue
                incident, event = track_incident(run, target, verdict, notify=notify)
                if event == "opened":
                    open_keys.add(key)
                elif event == "closed":
                    open_keys.discard(key)
                if incident is not None and event:
                    (result.opened if event == "opened" else result.closed).append(incident.pk)
        these.update(ingested_at=timezone.now())
        last = batch[-1]
        cursor.finished_at, cursor.run_id = last.finished_at, last.pk
        cursor.save()
        result.runs, result.hours = len(batch), len(hours)
    _refresh_running(windows)
    return result


def _refresh_running(windows: dict[int, tuple[Lease, datetime, datetime]]) -> None:
    """The running figures /metrics reads (``billing.running.refresh_running``) of the
    months whose samples the batch rewrote, once it has committed: the runs and the cursor
    are not held meanwhile. One that fails is logged; the lease's next samples refresh
    its month again."""
    try:
        with transaction.atomic():
            running.refresh_running(windows, instant=timezone.now())
    except Exception:
        log.exception("running figures of leases %s not refreshed", sorted(windows))


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
    hours = []
    hour = hour_of(start)
    while hour < end:
        hours.append(hour)
        hour += HOUR
    return sum(recompute_hours(lease=lease, kind=kind, hours=hours) for kind in ProbeKind.values)


def now_hour() -> datetime:
    return hour_of(timezone.now())
