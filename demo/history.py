"""Measurement history for the demo's leases, so that `make run` shows charts, incidents,
credits, fabric health and a fleet view with something in them.

The demo's nodes are not real hosts, so nothing can be measured on them. Instead each
active demo lease gets DAYS of runs as the scheduler would have stored them: every
CADENCE a link check of every node and a throughput run per ring pair, one pair after the
other, and NCCL bus bandwidth every six hours where the contract has a floor. Each run
holds what its tool prints (``benchmarks.demo_outputs``: iperf3 ``-J`` JSON, perftest and
nccl-tests tables, the link check's ``ibstatus`` / ``ethtool`` sections) with the command
the probe runs, after a first line saying it is synthetic; its parsed result, figure and
verdict are what the probes' own interpreter reads from that text against the terms in
force (``gpulease_verify.interpret``), so a bundle fetched with ``raw=1`` re-parses to the
same figures. The runs join their lease's hash chain and ``billing.ingest`` turns them
into rollups, incidents, traffic samples and the probe tax like any other run.

Every reading of a node agrees with the others (``benchmarks.demo_traffic``): the NIC
counters the counters probe and the telemetry poll print hold the node's own traffic plus
its probes' bytes (so ingest takes the probes' bytes back out, as the probe tax says), the
link check's link-down counters count the outages the telemetry sees, and the switch
port that witnesses a node (the Shenzhen fabric's first leaf is read over SNMP:
ZY-2026-001's nodes) counted what the node sent: each throughput run of ZY-2026-001
carries its switch-side witness block, in agreement.

Two episodes make the pages worth reading:
- ZY-2026-001: one node pair dropped to about 38 % of the contract for two days, from
  10:00 three days before this month began (a closed incident, and an SLA credit on last
  month's invoice, which ``leases.demo.load_invoices`` issues); its history reaches back to
  a day before the episode however few days are asked for;
- LX-2026-001: a pair has been below its threshold for the last eight hours (an open
  incident: breached, first in the provider's fleet view).
And one port flaps (``telemetry.demo.FLAP``), in the last 75 minutes of telemetry that
every demo lease gets (``telemetry.demo``).

The pay-per-use leases (per GB, 95计费) also get NIC counter readings every 5 minutes
(``demo.counters``), which the real ingest turns into the traffic samples their
invoices bill, the probes' bytes kept out. A lease whose terms start billing on acceptance
gets a passing acceptance run, every kind the dispatcher would run, when it went live.
The runs are made one by one in ``demo.runs``.

Only leases without any run get history, so running the demo again changes nothing."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from benchmarks import selectors
from benchmarks import services as probe_services
from benchmarks import witness as switch_witness
from benchmarks.choices import Pattern, Tool, Trigger
from benchmarks.demo_traffic import WOBBLE, PortTimeline, ProbeBytes, Steady
from benchmarks.links import link_pending
from benchmarks.models import ProbeRun
from benchmarks.probes.plan import plan_batches
from benchmarks.services import MANUAL_DEADLINE
from common.progress import progress
from demo import counters as demo_counters
from demo.counters import counters_sweep, metered
from demo.runs import (
    CADENCE,
    GIGA,
    SWEEP_TAKES,
    LeaseDemo,
    SweepSpec,
    busbw,
    collective,
    link_sweep,
    pair,
    sends_of,
    witnessed,
)
from gpulease_verify.periods import Period
from gpulease_verify.probe_tax import ProbeSend
from leases import selectors as lease_selectors
from leases.choices import ProbeKind, Technology
from leases.models import Lease, LeaseTerms, Node
from leases.selectors import TermsTimeline
from telemetry import demo as telemetry_demo

DAYS = 21

# A slot's first batch starts this long after the slot; ring pairs run one batch after the
# other, BATCH_STEP apart (each holds its two nodes).
RUN_START = timedelta(seconds=3)
BATCH_STEP = timedelta(seconds=20)

# Each node's own traffic on its data port, as a share of its lease's contracted
# bandwidth (bytes a second); its other ports carry a tenth of that. Light: heavy probes
# run on idle nodes, and a switch port counts the tenant's traffic during a probe too
# (its witness tolerates 10 %).
OWN_SHARE = 0.005

# ZY-2026-001's own traffic, storage and checkpoints over TCP, is all the kernel's (its
# netdev statistics count every byte); other leases' is RoCE's (demo.counters).
KERNEL_SHARE = {"ZY-2026-001": 1}


@dataclass(frozen=True)
class Episode:
    """A node pair of a lease measured at ``share`` of the contract for ``hours``."""

    reference: str
    pair: int
    share: float
    hours: int
    last_month: bool  # True: 10:00 three days before this month began; False: until now

    def start(self, now: datetime, zone: str) -> datetime:
        if self.last_month:
            this_month = Period.containing(now, zone).local_start(zone)
            return this_month - timedelta(days=3) + timedelta(hours=10)
        return now - timedelta(hours=self.hours)


EPISODES = (
    # Last month, whatever day the demo loads on: the SLA credit on the invoice it issues.
    Episode("ZY-2026-001", pair=0, share=0.38, hours=48, last_month=True),
    Episode("LX-2026-001", pair=0, share=0.42, hours=8, last_month=False),
)


@dataclass
class DemoHistory:
    leases: int = 0
    runs: int = 0
    telemetry_polls: int = 0
    telemetry_samples: int = 0
    switch_readings: int = 0


# --- the schedule's history -----------------------------------------------------------------


def _history(demo: LeaseDemo, now: datetime, days: int) -> None:
    """Every CADENCE: a link check (``demo.sweeps``), a throughput run per ring pair and,
    every six hours where the contract has a floor, an all-reduce (``demo.heavy``)."""
    lease, nodes = demo.lease, sorted(demo.plan)
    if len(nodes) < 2:
        return
    rng = random.Random(lease.reference)
    pairs = [(nodes[k], nodes[(k + 1) % len(nodes)]) for k in range(min(4, len(nodes)))]
    episodes = [episode for episode in EPISODES if episode.reference == lease.reference]
    zone = lease.tenant.time_zone
    slow = {
        (episode.pair, episode.start(now, zone) + timedelta(hours=hour))
        for episode in episodes
        for hour in range(episode.hours)
    }
    share = episodes[0].share if episodes else 1.0
    # From a day before an episode at the latest, so that its month has measurements around it.
    start = min(
        [now - timedelta(days=days)]
        + [episode.start(now, zone) - timedelta(days=1) for episode in episodes]
    )
    start = max(lease.starts_at, start)
    demo.switch_cleared = start - timedelta(days=1)
    slot = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    while slot < now:
        terms = demo.timeline.at(slot)
        if terms is None:
            slot += CADENCE
            continue
        contracted = float(terms.contracted_bandwidth_gbps) * GIGA
        demo.sweeps.append(
            SweepSpec(
                ProbeKind.LINK,
                terms,
                slot,
                slot + RUN_START,
                SWEEP_TAKES,
                Trigger.SCHEDULE,
                CADENCE,
            )
        )
        tool = Tool.IB_WRITE_BW if terms.technology == Technology.INFINIBAND else Tool.IPERF3
        started = slot + RUN_START
        for index, (client, server) in enumerate(pairs):
            degraded = any(index == i and slot <= at < slot + CADENCE for i, at in slow)
            factor = share * rng.uniform(0.97, 1.03) if degraded else rng.uniform(0.955, 0.99)
            demo.heavy.append(
                pair(
                    demo,
                    kind=ProbeKind.THROUGHPUT,
                    tool=tool,
                    pattern=Pattern.RING,
                    client=client,
                    server=server,
                    terms=terms,
                    slot=slot,
                    started=started,
                    figure=contracted * factor,
                )
            )
            started += BATCH_STEP
        if terms.collective_busbw_floor_gbps is not None and slot.hour // 2 % 3 == 0:
            demo.heavy.append(
                collective(demo, terms=terms, slot=slot, started=started, busbw=busbw(rng, terms))
            )
        slot += CADENCE


# --- acceptance ---------------------------------------------------------------------------

ACCEPTANCE_BATCH = timedelta(seconds=40)


def _acceptance(demo: LeaseDemo, now: datetime) -> None:
    """The acceptance run of a lease whose terms bill from it: every run the dispatcher
    makes when a lease goes live (every kind, as ``plan_batches`` plans it), one batch
    after the other from the lease's start, all passing."""
    lease = demo.lease
    first = next(iter(demo.timeline), None)
    if first is None or not first.billing_starts_on_acceptance or lease.starts_at > now:
        return
    terms = demo.timeline.at(lease.starts_at) or first
    rng = random.Random(f"{lease.reference}/acceptance")
    contracted = float(terms.contracted_bandwidth_gbps) * GIGA
    elapsed = timedelta()
    for kind in ProbeKind.values:
        for batch in plan_batches(
            kind=kind, nodes=list(demo.plan.values()), technology=terms.technology
        ):
            started = lease.starts_at + elapsed + timedelta(seconds=2)
            common: dict[str, Any] = {
                "terms": terms,
                "slot": lease.starts_at,
                "started": started,
                "trigger": Trigger.ACCEPTANCE,
                "cadence": MANUAL_DEADLINE,
            }
            for index, run in enumerate(batch.runs):
                if kind in (ProbeKind.COUNTERS, ProbeKind.LINK):
                    demo.sweeps.append(
                        SweepSpec(
                            kind,
                            terms,
                            lease.starts_at,
                            started,
                            ACCEPTANCE_BATCH / 2,
                            Trigger.ACCEPTANCE,
                            MANUAL_DEADLINE,
                        )
                    )
                elif kind == ProbeKind.COLLECTIVE:
                    demo.heavy.append(collective(demo, busbw=busbw(rng, terms), **common))
                else:
                    client, server = run.nodes
                    latency = run.tool in (Tool.IB_WRITE_LAT, Tool.PING)
                    figure = (
                        round(rng.uniform(1.8, 2.6), 2)
                        if latency
                        else contracted * rng.uniform(0.96, 0.99)
                    )
                    demo.heavy.append(
                        pair(
                            demo,
                            kind=kind,
                            tool=run.tool,
                            pattern=run.pattern,
                            client=client,
                            server=server,
                            figure=figure,
                            index=index,
                            **common,
                        )
                    )
            elapsed += ACCEPTANCE_BATCH


# --- the nodes' timelines, the sweeps, storing -------------------------------------------


def _timelines(demo: LeaseDemo, now: datetime, days: int, telemetry: timedelta) -> None:
    """Each port's timeline: a metered lease's drawn traffic, else a steady share of the
    contract; the node's probes on its data port; the flapping port's outages."""
    drawn = metered(demo, now, days)
    sends: dict[str, list[ProbeSend]] = {}
    for heavy in demo.heavy:
        sent = sends_of(heavy)
        for send in sent:
            sends.setdefault(send.node, []).append(send)
        # What ingest records (``billing.probe_tax.record_sent``, the same reading): read
        # once here rather than again there.
        heavy.run.sent_bytes = {send.node: send.bytes for send in sent}
    flap = telemetry_demo.FLAP
    first = next(iter(demo.timeline), None)
    rate = float(first.contracted_bandwidth_gbps) * GIGA / 8 * OWN_SHARE if first else 0.0
    rng = random.Random(f"{demo.lease.reference}/traffic")
    for index, name in enumerate(sorted(demo.plan)):
        ports = []
        for number, _port in enumerate(demo.plan[name].ports):
            base = rng.randrange(10**12, 10**14)
            own = (
                drawn[name][number]
                if drawn is not None
                else Steady(
                    base,
                    (rate if number == 0 else rate / 10) * rng.uniform(0.8, 1.2),
                    rng.uniform(0, WOBBLE.total_seconds()),
                )
            )
            timeline = PortTimeline(own)
            if number == 0:
                timeline.probes = ProbeBytes(sends.get(name, []))
                if name in demo.reboots:
                    timeline.reboots = [demo.reboots[name]]
            if (demo.lease.reference, index, number) == (flap.reference, flap.node, flap.port):
                timeline.outages = telemetry_demo.flap_outages(
                    now, telemetry_demo.STEP_S, window=telemetry
                )
            ports.append(timeline)
        demo.ports[name] = ports


def _sweeps(demo: LeaseDemo) -> list[ProbeRun]:
    """The sweeps, printed from the timelines; each link check against the one before."""
    made, previous = [], None
    for spec in sorted(demo.sweeps, key=lambda spec: spec.started):
        if spec.kind == ProbeKind.LINK:
            made.append(link_sweep(demo, spec, previous or spec.started))
            previous = spec.started
        else:
            made.append(counters_sweep(demo, spec))
    return made


def _nodes(lease: Lease) -> list[Node]:
    return lease_selectors.nodes_of_lease(lease=lease)


def build(
    lease: Lease, now: datetime, days: int, telemetry: timedelta = telemetry_demo.WINDOW
) -> LeaseDemo | None:
    """The lease's whole history, not stored yet; None for a lease without nodes."""
    nodes = _nodes(lease)
    if not nodes:
        return None
    ports = list(lease_selectors.nic_ports_of(nodes=nodes).order_by("device", "port_number"))
    demo = LeaseDemo(
        lease=lease,
        nodes=nodes,
        plan=selectors.plan_nodes(nodes, ports),
        timeline=TermsTimeline.for_lease(lease),
        site_id=nodes[0].leaf_switch.fabric.site_id,
        rng=random.Random(f"{lease.reference}/outputs"),
        witness=switch_witness.witness_ports(nodes),
    )
    _acceptance(demo, now)
    _history(demo, now, days)
    _timelines(demo, now, days, telemetry)
    for heavy in demo.heavy:
        witnessed(demo, heavy)
    made = [(heavy.run, [demo.by_name[n] for n in heavy.nodes]) for heavy in demo.heavy]
    made += [(run, []) for run in _sweeps(demo)]
    demo.pending = sorted(made, key=lambda item: item[0].finished_at or now)
    return demo


def store(demo: LeaseDemo, *, before: datetime | None, now: datetime) -> int:
    """Store and chain the lease's runs that finished before ``before`` (all: None)."""
    count = len(demo.pending)
    if before is not None:
        count = next(
            (k for k, (run, _) in enumerate(demo.pending) if (run.finished_at or now) >= before),
            count,
        )
    made, demo.pending = demo.pending[:count], demo.pending[count:]
    if not made:
        return 0
    with transaction.atomic():
        runs = probe_services.bulk_store_runs(
            runs=[run for run, _ in made], nodes=[nodes for _, nodes in made]
        )
    link_pending(lease_id=demo.lease.pk, now=now)
    demo.stored += len(runs)
    return len(runs)


def _telemetry_nodes(demo: LeaseDemo) -> list[telemetry_demo.DemoNode]:
    rng = random.Random(f"{demo.lease.reference}/boot")
    # The nodes were racked and booted before their lease began.
    installed = demo.lease.starts_at - timedelta(days=3, hours=rng.randrange(24))
    return [
        telemetry_demo.DemoNode(
            node=node,
            lease=demo.lease,
            plan=demo.plan[node.hostname],
            ports=demo.ports[node.hostname],
            booted=demo.reboots.get(node.hostname, installed),
            boot_id=telemetry_demo.boot_id(rng),
            kernel_share=KERNEL_SHARE.get(demo.lease.reference, demo_counters.KERNEL_SHARE),
            switch_cleared=demo.switch_cleared or demo.lease.starts_at,
        )
        for node in demo.nodes
    ]


def load_history(
    *,
    now: datetime | None = None,
    days: int = DAYS,
    telemetry: timedelta = telemetry_demo.WINDOW,
) -> DemoHistory:
    """History for every active demo lease that has none (probes_enabled off: the demo's
    own; the network lab's lease is measured for real): its runs, then the last
    ``telemetry`` of every lease's telemetry (75 minutes: ``telemetry.demo.WINDOW``), each
    poll stored after the runs that finished before it, so that the chain holds both in
    time order."""
    from billing.ingest import ingest_all

    now = now or timezone.now()
    result = DemoHistory()
    leases = lease_selectors.active_leases_without_probes().exclude(probe_runs__isnull=False)
    demos = []
    for lease in progress(list(leases.select_related("tenant")), desc="demo history", unit="lease"):
        demo = build(lease, now, days, telemetry)
        if demo is not None and demo.pending:
            demos.append(demo)
    if not demos:
        return result

    def before_poll(at: datetime) -> None:
        for demo in demos:
            store(demo, before=at, now=now)

    def terms_at(lease: Lease, at: datetime) -> LeaseTerms | None:
        return next(demo.timeline.at(at) for demo in demos if demo.lease.pk == lease.pk)

    # One transaction: thousands of small writes, committed (and on SQLite synced to disk)
    # once rather than each on its own.
    with transaction.atomic():
        polls = telemetry_demo.poll_grid(now, telemetry_demo.STEP_S, telemetry)
        for demo in demos:
            store(demo, before=polls[0] if polls else None, now=now)
        loaded = telemetry_demo.load(
            [node for demo in demos for node in _telemetry_nodes(demo)],
            terms_at=terms_at,
            now=now,
            step_s=telemetry_demo.STEP_S,
            before_poll=before_poll,
            window=telemetry,
        )
        for demo in demos:
            store(demo, before=None, now=now)
            result.leases += 1
            result.runs += demo.stored
    result.telemetry_polls, result.telemetry_samples = loaded.polls, loaded.samples
    result.switch_readings = loaded.switch_readings
    if result.runs:
        ingest_all(notify=False)
    return result
