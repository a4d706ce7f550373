"""Executing a batch: claim its runs, hold the nodes of a heavy probe, run it over the
nodes' transports and record each run. The dispatcher (``benchmarks.services``) created
the runs; a Celery task per batch (``benchmarks.tasks``) calls ``execute_batch``."""

import asyncio
import concurrent.futures
import logging
import time
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmarks import confirmation, orphans, selectors, witness_settle
from benchmarks import witness as switch_witness
from benchmarks.choices import FINAL_STATES, Pattern, RunState
from benchmarks.missed_slots import give_up
from benchmarks.models import NodeLock, PendingWitness, ProbeRun
from benchmarks.probes import runner
from benchmarks.probes.plan import PlanNode
from benchmarks.recording import terms_view
from benchmarks.transports import AsyncTransport, LocalTransport, SSHTarget, SSHTransport, kept_open
from common.locks import locking
from leases import selectors as lease_selectors
from leases.choices import HEAVY_PROBE_KINDS, ProbeKind
from leases.models import Lease, Node

log = logging.getLogger(__name__)


class NodesBusy(Exception):
    """Another heavy probe holds one of the nodes; try again a little later."""


class StillRunning(Exception):
    """The batch is being run by a live worker (a duplicate delivery): look again later,
    once that worker has finished or is known dead."""

    def __init__(self, seconds: float):
        super().__init__(f"batch is running elsewhere; look again in {seconds:.0f} s")
        self.seconds = seconds


class TransportRetry(Exception):
    """Some runs could not reach their nodes; they are scheduled again for another try."""


def _claim(batch: uuid.UUID, now: datetime) -> list[ProbeRun]:
    """Take the batch's runs that nobody is running. Raises StillRunning when a live
    worker holds some, so a redelivered task comes back instead of dropping them."""
    held_until = None
    if PendingWitness.objects.filter(batch=batch).exists():
        return []  # it ran; its settle records it (benchmarks.witness_settle)
    with transaction.atomic():
        runs = list(locking(ProbeRun.objects).filter(batch=batch).order_by("pk"))
        claimable, late = [], []
        for run in runs:
            if run.state in FINAL_STATES:
                continue
            if (
                run.state == RunState.RUNNING
                and run.claimed_at
                and (now - run.claimed_at < orphans.stale_claim_after())
            ):
                # A live worker has it (or had it, until it died: then it goes stale).
                held_until = run.claimed_at + orphans.stale_claim_after()
                continue
            if run.deadline_at < now:
                late.append(run)
                continue
            claimable.append(run)
        give_up(late, now)
        for run in claimable:
            run.state, run.claimed_at, run.attempts = RunState.RUNNING, now, run.attempts + 1
            run.save(update_fields=["state", "claimed_at", "attempts"])
    if not claimable and held_until is not None:
        raise StillRunning((held_until - now).total_seconds() + 1)
    return claimable


def _lock_nodes(batch: uuid.UUID, node_ids: list[int], now: datetime) -> None:
    expires = now + orphans.stale_claim_after()
    with transaction.atomic():
        NodeLock.objects.filter(node_id__in=node_ids, expires_at__lt=now).delete()
        NodeLock.objects.filter(node_id__in=node_ids, batch=batch).delete()  # our own, retried
        try:
            with transaction.atomic():
                NodeLock.objects.bulk_create(
                    [
                        NodeLock(node_id=n, batch=batch, acquired_at=now, expires_at=expires)
                        for n in node_ids
                    ]
                )
        except IntegrityError:
            raise NodesBusy(f"nodes of batch {batch} are held by another heavy probe") from None


def _release(runs: list[ProbeRun]) -> None:
    """Put claimed runs back to scheduled (nodes busy: the task will try again)."""
    ProbeRun.objects.filter(pk__in=[r.pk for r in runs], state=RunState.RUNNING).update(
        state=RunState.SCHEDULED, claimed_at=None, released_at=timezone.now()
    )


def transport_for(node: Node) -> AsyncTransport:
    if node.management_address == "local":
        return LocalTransport()
    return SSHTransport(
        SSHTarget(
            host=node.management_address,
            port=node.ssh_port,
            username=node.ssh_user,
            host_key=node.ssh_host_key or None,
            private_key_path=str(settings.PROBE_SSH_KEY),
            connect_timeout_s=settings.PROBE_CONNECT_TIMEOUT_S,
        )
    )


def execute_batch(
    batch: uuid.UUID,
    *,
    now: datetime | None = None,
    connect: Callable[[Node], AsyncTransport] = transport_for,
    max_attempts: int | None = None,
) -> list[ProbeRun]:
    """Claim the batch's runs, run them together (and again at once when a scheduled
    sample failed: ``benchmarks.confirmation``), record them. Returns the batch's runs
    (empty when another worker has them or they are over). A throughput batch read by a
    switch witness releases its nodes when its clients end and is recorded once the
    switch's counters have settled (``benchmarks.witness_settle``): its runs are returned
    still running. Raises NodesBusy when a node is held by another heavy probe, and
    TransportRetry when a node could not be reached and the run has attempts left: only
    transport faults are retried, never a tool's failure."""
    now = now or timezone.now()
    runs = _claim(batch, now)
    if not runs:
        return []
    lease = lease_selectors.lease_row(pk=runs[0].lease_id).get()
    if runs[0].pattern == Pattern.SWEEP:
        # A sweep reads every node the lease holds when it runs (in its last instant once
        # it has ended: its closing reading, or a sweep that runs just after the end); it
        # has no node links.
        held = lease_selectors.lease_nodes_at(
            lease_ids=[lease.pk], at=sweep_nodes_at(lease, now)
        ).get(lease.pk, [])
        nodes = {node.pk: node for node in held}
        links = [(run.pk, node.pk) for run in runs for node in held]
    else:
        links = list(
            ProbeRun.nodes.through.objects.filter(proberun__in=runs).values_list(
                "proberun_id", "node_id"
            )
        )
        nodes = {
            node.pk: node
            for node in lease_selectors.nodes_with_leaf(pks={node_id for _, node_id in links})
        }
    heavy = runs[0].kind in HEAVY_PROBE_KINDS
    if heavy:
        try:
            _lock_nodes(batch, sorted(nodes), now)
        except NodesBusy:
            _release(runs)
            raise
    fenced: set[int] = set()
    try:
        node_ids: dict[int, list[int]] = {run.pk: [] for run in runs}
        for run_id, node_id in links:
            node_ids[run_id].append(node_id)
        hostnames = {pk: [nodes[n].hostname for n in ids] for pk, ids in node_ids.items()}
        plan = selectors.plan_nodes(nodes.values(), lease_selectors.ports_of(nodes=nodes.values()))
        terms = runs[0].terms or lease_selectors.terms_in_force(lease=lease, at=now)
        planned = [_planned(run, hostnames[run.pk], plan) for run in runs]
        by_name = {node.hostname: node for node in nodes.values()}
        witness_ports = (
            switch_witness.witness_ports(nodes.values())
            if runs[0].kind in (ProbeKind.THROUGHPUT, ProbeKind.COUNTERS)
            else {}
        )
        throughput = bool(witness_ports) and runs[0].kind == ProbeKind.THROUGHPUT

        # The worker's connections to the nodes stay open from one batch to the next (not
        # those of a transport given for a test or a command).
        kept = kept_open.kept_open(connect) if connect is transport_for else None

        def measure(
            these: list[ProbeRun], ready: concurrent.futures.Future | None = None
        ) -> witness_settle.Measured:
            started = timezone.now()
            ProbeRun.objects.filter(pk__in=[r.pk for r in these]).update(started_at=started)
            for run in these:
                run.started_at = started
            batch_run = runner.run_batch(
                runs=planned,
                nodes=plan,
                connect=lambda hostname: (kept.transport if kept else connect)(by_name[hostname]),
                options=runner.Options(
                    throughput_seconds=settings.PROBE_THROUGHPUT_SECONDS,
                    grace_seconds=settings.PROBE_COMMAND_GRACE_S,
                    contracted_gbps=float(terms.contracted_bandwidth_gbps) if terms else 100.0,
                ),
                ready=ready,
                close=kept is None,
            )
            if kept is None:
                return witness_settle.Measured(these, asyncio.run(batch_run))
            executions = kept.run(batch_run)
            # A node that could not be reached gets a fresh connection next time.
            kept.drop(
                by_name[name].pk
                for planned_run, execution in zip(planned, executions, strict=True)
                if execution.state == RunState.UNREACHABLE
                for name in planned_run.nodes
            )
            return witness_settle.Measured(these, executions)

        # Throughput: the switch's count around each measurement, the first one read while
        # the pairs log in and start their servers (every client waits for it); counters:
        # the switch port's own count, read right after the node's.
        readings: list = []
        if throughput:
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="witness") as pool:
                before = pool.submit(switch_witness.read, witness_ports)
                measured = [measure(runs, before)]
                readings.append(before.result())
        else:
            measured = [measure(runs)]
        view = terms_view(terms) if terms is not None else None
        if confirmation.due(runs, measured[0].executions, terms=terms, view=view, plan=plan):
            assert terms is not None
            time.sleep(confirmation.pause_s(terms, witnessed=throughput))
            if throughput:
                readings.append(switch_witness.read(witness_ports))
            again = confirmation.create(runs, node_ids, now=timezone.now())
            if again:
                for run, repeat in zip(runs, again, strict=True):
                    hostnames[repeat.pk] = hostnames[run.pk]
                measured.append(measure(again))
        reached = all(
            execution.state != RunState.UNREACHABLE
            for measurement in measured
            for execution in measurement.executions
        )
        if throughput and reached:
            # The nodes are free now; the switch's settled reading closes the last
            # measurement later, and only the client ports it reads stay fenced.
            fenced = witness_settle.defer(
                batch=batch,
                lease=lease,
                queue=runs[0].site.probe_queue,
                ports=witness_ports,
                readings=readings,
                measured=measured,
                clients={
                    by_name[client].pk
                    for run in runs
                    if ">" in run.target
                    for client in run.target.split(">")[:1]
                    if client in witness_ports
                },
            )
            return runs
        if throughput:
            readings.append(switch_witness.read_settled(witness_ports))
        witness_settle.record(
            measured=measured,
            terms=terms,
            plan=plan,
            hostnames=hostnames,
            witnesses=witness_settle.witnesses(
                witness_ports,
                readings if throughput else [{}, switch_witness.read(witness_ports)],
            )
            if witness_ports
            else None,
        )
    finally:
        if heavy:
            NodeLock.objects.filter(batch=batch).exclude(node_id__in=fenced).delete()
    attempts = settings.PROBE_MAX_ATTEMPTS if max_attempts is None else max_attempts
    again = [
        run
        for run in runs
        if run.state == RunState.UNREACHABLE
        and run.attempts < attempts
        and run.deadline_at > timezone.now()
    ]
    if again:
        ProbeRun.objects.filter(pk__in=[run.pk for run in again]).update(
            state=RunState.SCHEDULED, claimed_at=None, released_at=timezone.now()
        )
        raise TransportRetry(f"{len(again)} run(s) of batch {batch} could not reach a node")
    return runs


def sweep_nodes_at(lease: Lease, now: datetime) -> datetime:
    """The instant whose assignments a sweep of the lease reads: now, or the lease's last
    instant once it has ended (``dispatch_due``'s closing reading)."""
    if lease.ends_at is not None and lease.ends_at <= now:
        return lease.ends_at - timedelta(microseconds=1)
    return now


def _planned(run: ProbeRun, hostnames: list[str], plan: dict[str, PlanNode]):  # type: ignore[no-untyped-def]
    from benchmarks.probes.plan import PlannedRun

    # A pair's target is "client>server": keep that order, whatever the database returned.
    ordered = tuple(run.target.split(">")) if ">" in run.target else tuple(sorted(hostnames))
    return PlannedRun(run.kind, run.tool, run.pattern, ordered)
