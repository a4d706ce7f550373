"""Writes for probing: scheduling runs (the dispatcher) and run-now. Executing a batch is
``benchmarks.execution``, missed slots and the self-check ``benchmarks.missed_slots``.

The flow, learnt from perfSONAR's pScheduler: a dispatcher (Celery beat, every minute)
finds the slots that are due under each lease's terms and creates their runs, state
scheduled, in one transaction; after commit it enqueues one task per batch on the site's
queue. The task claims its runs, holds the nodes if the probe is heavy, runs the batch and
records each run. A slot has one run (a unique constraint), so a redelivered task finds the
run it already has instead of making another.

Run-now (``run_now``) queues one set of on-demand runs per lease at a time, and a tenant
waits RUN_NOW_COOLDOWN_S after it before the next. A scheduled slot that could not run
because the tenant's own run-now runs were on its nodes is skipped with that reason, which
the SLA excludes, instead of missed against the provider.
"""

import logging
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, Subquery
from django.utils import timezone

from benchmarks import hooks, node_runs, orphans, selectors, witness_settle
from benchmarks.choices import Pattern, RunState, Trigger
from benchmarks.missed_slots import mark_missed
from benchmarks.models import (
    ProbeRun,
)
from benchmarks.models.outputs import store_unsaved
from benchmarks.probes.plan import PlannedBatch, PlanNode, plan_batches
from benchmarks.task_names import EXECUTE_BATCH
from common.locks import locking
from common.tasks import send_after_commit
from gpulease_verify.traffic import SLOT_EPOCH
from leases import selectors as lease_selectors
from leases.choices import HEAVY_PROBE_KINDS, HeavyProbePolicy, LeaseStatus, ProbeKind
from leases.contract_rules import MAX_CADENCE_S, in_weekly_windows
from leases.models import Lease, LeaseTerms, Node, Site
from leases.selectors import TermsTimeline

log = logging.getLogger(__name__)

EPOCH = SLOT_EPOCH  # the verifier cuts traffic intervals on the same grid
MANUAL_DEADLINE = timedelta(hours=1)


def slot_start(now: datetime, cadence_s: int) -> datetime:
    """Slots are aligned on a fixed epoch, so every dispatcher agrees on them."""
    elapsed = int((now - EPOCH).total_seconds())
    return EPOCH + timedelta(seconds=elapsed - elapsed % cadence_s)


def heavy_probe_allowed(terms: LeaseTerms, kind: str, at: datetime, zone: str) -> bool:
    if kind not in HEAVY_PROBE_KINDS or terms.heavy_probe_policy == HeavyProbePolicy.ANY_TIME:
        return True
    return in_weekly_windows(terms.heavy_probe_windows, at, zone)


# How old the latest traffic sample may be to say how busy a lease is now (a sample exists
# once the counter reading after its slot is in: about two cadences late).
BUSY_SAMPLE_AGE = timedelta(minutes=30)


def utilisation_percent(
    *, tx_bytes: Decimal | None, seconds: int | None, contracted_gbps: Decimal, nodes: int
) -> Decimal | None:
    """The lease's latest traffic sample's rate (bytes x 8 / seconds; gpulease's own probes
    already kept out of it) as a percentage of its contracted bandwidth, which is per node
    (x nodes). None when there is no recent sample or nothing is contracted."""
    if tx_bytes is None or not seconds or not nodes or not contracted_gbps:
        return None
    rate_bps = Decimal(tx_bytes) * 8 / seconds
    return rate_bps * 100 / (Decimal(contracted_gbps) * 10**9 * nodes)


def busy_reason(
    terms: LeaseTerms, kind: str, at: datetime, zone: str, utilisation: Decimal | None
) -> str:
    """Why a heavy probe is deferred under ``probe_idle_below_percent``: the lease is not
    idle (its utilisation is not below that share of its contracted bandwidth) and ``at``
    is outside the agreed heavy-probe windows. Empty when it may run: not heavy, no such
    condition, no recent sample to judge by, idle, or inside a window."""
    limit = terms.probe_idle_below_percent
    if kind not in HEAVY_PROBE_KINDS or limit is None or utilisation is None:
        return ""
    if utilisation < limit:
        return ""
    if terms.heavy_probe_windows and in_weekly_windows(terms.heavy_probe_windows, at, zone):
        return ""
    shown = Decimal(limit).normalize()
    return (
        f"deferred: the lease was busy, {utilisation:.1f} % of its contracted bandwidth, "
        f"{'above' if utilisation > limit else 'at'} {shown:f} %"
    )


# --- creating runs ------------------------------------------------------------------


@dataclass
class NewBatch:
    batch: uuid.UUID
    site: Site
    runs: list[ProbeRun] = field(default_factory=list)


def _skip_reason(
    batch: PlannedBatch,
    nodes: dict[str, PlanNode],
    terms: LeaseTerms,
    allowed: bool,
    busy: str = "",
) -> str:
    if not allowed:
        return "outside the agreed windows for heavy probes"
    if busy:
        return busy
    if batch.kind == ProbeKind.COLLECTIVE and any(nodes[n].gpus == 0 for n in batch.hostnames):
        return "no GPUs on these nodes, so no NCCL collective can run"
    if batch.kind in (ProbeKind.THROUGHPUT, ProbeKind.LATENCY) and any(
        nodes[n].data_address is None for n in batch.hostnames
    ):
        return "a node has no data address on the fabric"
    return ""


def _build_runs(
    *,
    lease: Lease,
    kind: str,
    slot_at: datetime,
    deadline_at: datetime,
    trigger: str,
    terms: LeaseTerms,
    nodes: list[Node],
    plan: dict[str, PlanNode],
    now: datetime,
    utilisation: Decimal | None = None,
) -> list[NewBatch]:
    """``utilisation``: the lease's, for ``busy_reason`` (None: not judged, as for runs
    asked for now and the acceptance run)."""
    by_name = {node.hostname: node for node in nodes}
    site = nodes[0].leaf_switch.fabric.site
    # Judged at the moment it would run (now), not at the start of its slot.
    allowed = heavy_probe_allowed(terms, kind, now, lease.tenant.time_zone)
    busy = busy_reason(terms, kind, now, lease.tenant.time_zone, utilisation)
    batches = []
    for planned in plan_batches(kind=kind, nodes=list(plan.values()), technology=terms.technology):
        new = NewBatch(batch=uuid.uuid4(), site=site)
        skip = _skip_reason(planned, plan, terms, allowed, busy)
        for run in planned.runs:
            probe = ProbeRun(
                lease=lease,
                kind=kind,
                tool=run.tool,
                target=run.target,
                pattern=run.pattern,
                batch=new.batch,
                trigger=trigger,
                slot_at=slot_at,
                deadline_at=deadline_at,
                site=site,
                terms=terms,
                state=RunState.SKIPPED if skip else RunState.SCHEDULED,
                error=skip,
                finished_at=now if skip else None,
            )
            probe._node_ids = [by_name[name].pk for name in run.nodes]  # type: ignore[attr-defined]
            new.runs.append(probe)
        batches.append(new)
    return batches


def _save(batches: Sequence[NewBatch]) -> None:
    runs = [run for batch in batches for run in batch.runs]
    ProbeRun.objects.bulk_create(runs, batch_size=1000)
    Through = ProbeRun.nodes.through
    # A sweep has no node links: it reads every node its lease holds when it runs.
    Through.objects.bulk_create(
        [
            Through(proberun_id=run.pk, node_id=node_id)
            for run in runs
            if run.pattern != Pattern.SWEEP
            for node_id in run._node_ids  # type: ignore[attr-defined]
        ],
        batch_size=2000,
    )


def _enqueue_after_commit(batches: Sequence[NewBatch]) -> None:
    for batch in batches:
        if any(run.state == RunState.SCHEDULED for run in batch.runs):
            send_after_commit(EXECUTE_BATCH, str(batch.batch), queue=batch.site.probe_queue)


def _enqueue_node_runs_after_commit(batches: Sequence[tuple[uuid.UUID, str]]) -> None:
    for batch, queue in batches:
        send_after_commit(EXECUTE_BATCH, str(batch), queue=queue)


@dataclass(frozen=True)
class Cadences:
    """What the dispatcher reads of every terms version: when it took effect and how
    often each kind runs."""

    pk: int
    lease_id: int
    effective_from: datetime
    probe_cadence_s: dict[str, int]


@dataclass
class DispatchResult:
    leases: int = 0
    batches: int = 0
    runs: int = 0
    skipped: int = 0
    missed: int = 0
    settled: int = 0  # deferred witness readings whose settle never came
    resent: int = 0  # batches whose task was lost, sent again (benchmarks.orphans)
    batch_ids: list[uuid.UUID] = field(default_factory=list)


def _closing_due(now: datetime) -> Q:
    """Leases whose end passed within the longest cadence and that have no closing reading
    yet (``dispatch_due``): active ones, and those an operator ended."""
    closed = ProbeRun.objects.filter(
        lease=OuterRef("pk"),
        kind=ProbeKind.COUNTERS,
        trigger=Trigger.SCHEDULE,
        slot_at=OuterRef("ends_at"),
    )
    return Q(
        status__in=[LeaseStatus.ACTIVE, LeaseStatus.ENDED],
        ends_at__lte=now,
        ends_at__gt=now - timedelta(seconds=MAX_CADENCE_S),
    ) & ~Q(Exists(closed))


def dispatch_due(*, now: datetime | None = None, enqueue: bool = True) -> DispatchResult:
    """One dispatcher cycle: mark missed runs, send again the batches whose task was lost
    (``benchmarks.orphans``), then create the runs of every slot that is due and not yet
    created, for every active lease, in a fixed number of queries.

    The edges of a lease's metering (``gpulease_verify.traffic``): a lease that started
    within the current slot gets its counters read at its start instant (slot_at = its
    start), not at the slot before it began; and a lease whose end has passed gets one
    closing counters reading, slot_at = its end, deadline one counters cadence later, of
    the nodes it held in its last instant. The cycle that makes it is the first at or
    after the end, however late, while the deadline has not passed; the unique slot key
    and the closing reading it finds make it once."""
    now = now or timezone.now()
    result = DispatchResult(missed=mark_missed(now=now))
    result.settled = witness_settle.settle_overdue(now=now)
    if enqueue:
        result.resent = orphans.resend(now=now)
    rows = list(
        lease_selectors.probed_leases(now=now, closing=_closing_due(now)).values_list(
            "pk", "starts_at", "ends_at"
        )
    )
    if not rows:
        return result
    lease_ids = [pk for pk, _starts, _ends in rows]
    starts_of = {pk: starts_at for pk, starts_at, _ends in rows}
    ending = {pk: end for pk, _starts, end in rows if end is not None and end <= now}
    # Every lease's versions as far as "what is due" reads them; the whole rows only of the
    # leases with a kind due that is not node-level (below).
    timelines: dict[int, list[Cadences]] = {lease_id: [] for lease_id in lease_ids}
    for row in lease_selectors.terms_of_leases(lease_ids=lease_ids).values_list(
        "pk", "lease_id", "effective_from", "probe_cadence_s"
    ):
        timelines[row[1]].append(Cadences(*row))
    latest, accepted = _latest_slots(lease_ids, now, max_cadences(timelines))

    # What is due: node-level kinds (a sweep per lease) go to one set-based insert, which
    # reads the nodes itself; only leases with another kind due load their nodes here.
    per_node: list[node_runs.Due] = []
    other: dict[int, list[tuple[str, datetime, datetime, str]]] = defaultdict(list)
    terms_of: dict[int, int] = {}
    for lease_id in lease_ids:
        if lease_id in ending:
            closing = _closing_reading(lease_id, ending[lease_id], timelines[lease_id], now)
            per_node += [closing] if closing is not None else []
            continue
        current = TermsTimeline(timelines[lease_id]).at(now)
        if current is None:
            continue
        terms_of[lease_id] = current.pk
        due: list[tuple[str, datetime, datetime, str]] = []
        if lease_id not in accepted:
            # The acceptance run: every kind, once, when the lease first goes live.
            due += [(k, now, now + MANUAL_DEADLINE, Trigger.ACCEPTANCE) for k in ProbeKind.values]
        for kind, cadence in current.probe_cadence_s.items():
            slot = slot_start(now, cadence)
            if latest.get((lease_id, kind)) is not None and latest[(lease_id, kind)] >= slot:
                continue
            if kind == ProbeKind.COUNTERS and starts_of[lease_id] > slot:
                slot = starts_of[lease_id]  # the opening reading of a lease begun mid-slot
            due.append((kind, slot, slot + timedelta(seconds=cadence), Trigger.SCHEDULE))
        for kind, slot_at, deadline_at, trigger in due:
            if kind in node_runs.NODE_KINDS:
                per_node.append(
                    node_runs.Due(lease_id, kind, slot_at, deadline_at, trigger, current.pk)
                )
            else:
                other[lease_id].append((kind, slot_at, deadline_at, trigger))

    # The leases with another kind due: with their tenant and latest recent traffic sample
    # (whether they are busy), and their terms in force, in two queries.
    latest_sample = hooks.recent_traffic(now - BUSY_SAMPLE_AGE)  # billing's, newest first
    by_pk = (
        {
            lease.pk: lease
            for lease in lease_selectors.leases_among(ids=list(other))
            .select_related("tenant")
            .annotate(
                latest_tx_bytes=Subquery(latest_sample.values("tx_bytes")[:1]),
                latest_tx_seconds=Subquery(latest_sample.values("seconds")[:1]),
            )
        }
        if other
        else {}
    )
    in_force_of = lease_selectors.terms_by_pk(pks=[terms_of[lease_id] for lease_id in other])
    held = lease_selectors.lease_nodes_at(lease_ids=other, at=now)
    ports_by_node: dict[int, list] = defaultdict(list)
    for port in lease_selectors.ports_of(nodes=(node for nodes in held.values() for node in nodes)):
        ports_by_node[port.node_id].append(port)
    batches: list[NewBatch] = []
    for lease_id, due in other.items():
        lease, nodes = by_pk[lease_id], held.get(lease_id, [])
        in_force = in_force_of[terms_of[lease_id]]
        if not nodes:
            continue
        plan = selectors.plan_nodes(nodes, [p for n in nodes for p in ports_by_node[n.pk]])
        utilisation = utilisation_percent(
            tx_bytes=lease.latest_tx_bytes,  # type: ignore[attr-defined]
            seconds=lease.latest_tx_seconds,  # type: ignore[attr-defined]
            contracted_gbps=in_force.contracted_bandwidth_gbps,
            nodes=len(nodes),
        )
        for kind, slot_at, deadline_at, trigger in due:
            batches += _build_runs(
                lease=lease,
                kind=kind,
                slot_at=slot_at,
                deadline_at=deadline_at,
                trigger=trigger,
                terms=in_force,
                nodes=nodes,
                plan=plan,
                now=now,
                # the acceptance run is not deferred for a busy lease
                utilisation=utilisation if trigger == Trigger.SCHEDULE else None,
            )
    result.leases = len(terms_of)
    try:
        with transaction.atomic():
            _save(batches)
            node_batches = node_runs.create(per_node, now=now)
            if enqueue:
                _enqueue_after_commit(batches)
                _enqueue_node_runs_after_commit(node_batches)
    except IntegrityError:
        # Another dispatcher created these slots first; its runs stand, ours are dropped.
        log.warning("dispatcher cycle at %s lost a race for its slots; nothing created", now)
        return result
    for batch in batches:
        result.batches += 1
        result.runs += len(batch.runs)
        result.skipped += sum(run.state == RunState.SKIPPED for run in batch.runs)
        result.batch_ids.append(batch.batch)
    result.batches += len(node_batches)
    result.runs += len(node_batches)
    result.batch_ids += [batch for batch, _queue in node_batches]
    return result


def _closing_reading(
    lease_id: int, ends_at: datetime, versions: list[Cadences], now: datetime
) -> node_runs.Due | None:
    """The closing counters reading of a lease that ended at ``ends_at`` (``dispatch_due``),
    while its deadline, one counters cadence of the terms in force at the end, has not
    passed; the leases fetched are only those without one yet (``_closing_due``)."""
    last = ends_at - timedelta(microseconds=1)  # the lease's last instant
    terms = TermsTimeline(versions).at(last)
    cadence = terms.probe_cadence_s.get(ProbeKind.COUNTERS) if terms is not None else None
    if terms is None or not cadence or now >= ends_at + timedelta(seconds=cadence):
        return None
    return node_runs.Due(
        lease_id,
        ProbeKind.COUNTERS,
        ends_at,
        ends_at + timedelta(seconds=cadence),
        Trigger.SCHEDULE,
        terms.pk,
        held_at=last,
    )


def _latest_slots(
    lease_ids: list[int], now: datetime, cadence_s: dict[str, int]
) -> tuple[dict[tuple[int, str], datetime], set[int]]:
    """Each lease's latest scheduled slot per kind (one index probe per lease and kind,
    in the partitions of that kind's longest cadence up to now: never the months made
    ahead), and the leases that had their acceptance run: one query."""

    def last(kind: str) -> Subquery:
        return Subquery(
            ProbeRun.objects.filter(
                lease=OuterRef("pk"),
                kind=kind,
                trigger=Trigger.SCHEDULE,
                slot_at__gte=now - timedelta(seconds=cadence_s[kind]),
                slot_at__lte=now,  # a slot starts at or before the instant it is made
            )
            .order_by("-slot_at")
            .values("slot_at")[:1]
        )

    kinds = [kind for kind in ProbeKind.values if kind in cadence_s]
    rows = list(
        lease_selectors.leases_among(ids=lease_ids)
        .annotate(
            accepted=Exists(
                ProbeRun.objects.filter(lease=OuterRef("pk"), trigger=Trigger.ACCEPTANCE)
            ),
            **{f"last_{kind}": last(kind) for kind in kinds},
        )
        .values_list("pk", "accepted", *(f"last_{kind}" for kind in kinds))
    )
    latest = {
        (pk, kind): slot
        for pk, _accepted, *slots in rows
        for kind, slot in zip(kinds, slots, strict=True)
        if slot is not None
    }
    return latest, {pk for pk, accepted, *_slots in rows if accepted}


def max_cadences(timelines: dict[int, list[Cadences]]) -> dict[str, int]:
    """Kind -> its longest cadence in any terms version of the leases."""
    longest: dict[str, int] = {}
    for versions in timelines.values():
        for terms in versions:
            for kind, seconds in terms.probe_cadence_s.items():
                longest[kind] = max(longest.get(kind, 0), seconds)
    return longest


def request_runs(
    *,
    lease: Lease,
    kinds: Iterable[str] | None = None,
    trigger: str = Trigger.MANUAL,
    now: datetime | None = None,
    enqueue: bool = True,
) -> list[uuid.UUID]:
    """Runs asked for now (by an operator, a tenant or run_probes), outside the schedule.
    Heavy probes still respect the lease's policy; they are recorded as skipped if not."""
    now = now or timezone.now()
    terms = TermsTimeline.for_lease(lease).at(now)
    if terms is None:
        raise ValueError(f"lease {lease.reference} has no terms in force now")
    nodes = lease_selectors.lease_nodes_at(lease_ids=[lease.pk], at=now).get(lease.pk, [])
    if not nodes:
        raise ValueError(f"lease {lease.reference} holds no node now")
    plan = selectors.plan_nodes(nodes, lease_selectors.ports_of(nodes=nodes))
    batches: list[NewBatch] = []
    for kind in kinds or ProbeKind.values:
        batches += _build_runs(
            lease=lease,
            kind=kind,
            slot_at=now,
            deadline_at=now + MANUAL_DEADLINE,
            trigger=trigger,
            terms=terms,
            nodes=nodes,
            plan=plan,
            now=now,
        )
    with transaction.atomic():
        _save(batches)
        if enqueue:
            _enqueue_after_commit(batches)
    return [batch.batch for batch in batches]


@dataclass(frozen=True)
class RunNow:
    """What a run-now request got: the batches it queued, or those of the lease's earlier
    request that is still pending (``already_pending``)."""

    batches: list[uuid.UUID]
    runs: int
    already_pending: bool


class CoolingDown(Exception):
    """A tenant asked for run-now again too soon after the lease's last one was over."""

    def __init__(self, *, lease: Lease, retry_after_s: int):
        super().__init__(
            f"Lease {lease.reference} ran its probes on demand less than "
            f"{settings.RUN_NOW_COOLDOWN_S} s ago; ask again in {retry_after_s} s."
        )
        self.retry_after_s = retry_after_s


def run_now(
    *,
    lease: Lease,
    kinds: Iterable[str] | None = None,
    tenant_request: bool,
    now: datetime | None = None,
    enqueue: bool = True,
) -> RunNow:
    """Run-now of a lease, asked for by its tenant or by the provider. While an earlier
    request's runs are pending, this one gets those back instead of queueing more; a
    tenant's request within RUN_NOW_COOLDOWN_S after they were over raises CoolingDown (the
    provider's own requests are not limited). The lease row is locked first, so that two
    requests at once queue one set of runs."""
    now = now or timezone.now()
    with transaction.atomic():
        locking(lease_selectors.lease_row(pk=lease.pk)).values_list("pk").first()
        pending = selectors.pending_on_demand_batches(
            lease_id=lease.pk, now=now, live_claims_after=now - orphans.stale_claim_after()
        )
        if pending:
            return RunNow(
                batches=list(dict.fromkeys(pending)), runs=len(pending), already_pending=True
            )
        if tenant_request:
            _refuse_within_cooldown(lease, now)
        batches = request_runs(
            lease=lease,
            kinds=kinds,
            trigger=Trigger.TENANT if tenant_request else Trigger.MANUAL,
            now=now,
            enqueue=enqueue,
        )
        runs = ProbeRun.objects.filter(batch__in=batches).count()
    return RunNow(batches=batches, runs=runs, already_pending=False)


def _refuse_within_cooldown(lease: Lease, now: datetime) -> None:
    over_at = selectors.last_on_demand_over_at(lease_id=lease.pk)
    if over_at is None:
        return
    left = settings.RUN_NOW_COOLDOWN_S - (now - over_at).total_seconds()
    if left > 0:
        raise CoolingDown(lease=lease, retry_after_s=math.ceil(left))


# --- written by billing, demo ---


def record_sent_bytes(*, run: ProbeRun) -> None:
    """Store the run's ``sent_bytes`` as it stands (one pruned row update)."""
    ProbeRun.objects.filter(pk=run.pk, slot_at=run.slot_at).update(sent_bytes=run.sent_bytes)


def bulk_store_runs(*, runs: Sequence[ProbeRun], nodes: Sequence[Iterable[Node]]) -> list[ProbeRun]:
    """Store new runs (their texts first) and link each to its ``nodes`` (the same order),
    in bulk; returns the runs stored."""
    store_unsaved(runs)
    stored = ProbeRun.objects.bulk_create(runs, batch_size=500)
    links = [
        ProbeRun.nodes.through(proberun_id=run.pk, node_id=node.pk)
        for run, held in zip(stored, nodes, strict=True)
        for node in held
    ]
    ProbeRun.nodes.through.objects.bulk_create(links, batch_size=1000)
    return stored
