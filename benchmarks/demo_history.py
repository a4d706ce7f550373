"""Measurement history for the demo's leases, so that `make run` shows charts, incidents,
credits and a fleet view with something in them.

The demo's nodes are not real hosts, so nothing can be measured on them. Instead each
active demo lease gets DAYS of runs as the scheduler would have stored them: every
CADENCE a link check per node and a throughput run per ring pair, and NCCL bus bandwidth
where the contract has a floor. Every raw output says it is synthetic. Verdicts come from
the probes' own rules (``gpulease_verify.verdicts``) against the terms in force, the
runs join their lease's hash chain, and ``billing.ingest`` turns them into rollups and
incidents like any other run.

Two episodes make the pages worth reading:
- ZY-2026-001: one node pair dropped to about 38 % of the contract for two days, from
  10:00 three days before this month began (a closed incident, and an SLA credit on last
  month's invoice, which ``leases.demo.load_invoices`` issues); its history reaches back to
  a day before the episode however few days are asked for;
- LX-2026-001: a pair has been below its threshold for the last eight hours (an open
  incident: breached, first in the provider's fleet view).

The pay-per-use leases (per GB, 95计费) also get NIC counter readings every 5 minutes
per node, printed as the real counters probe prints them (``ethtool -S`` per port,
``benchmarks.probes.commands.counters``) and parsed by the probe's own interpreter, so the
real ingest turns them into the traffic samples their invoices bill (``TRAFFIC``: a daily
pattern, a two-hour burst the 95th percentile drops, one node rebooted, its counters
restarting from zero). A lease whose terms start billing on acceptance gets a passing
acceptance run, every kind the dispatcher would run, when it went live.

Only leases without any run get history, so running the demo again changes nothing."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from benchmarks import chain, selectors
from benchmarks.choices import Pattern, RunState, Tool, Trigger
from benchmarks.models import ProbeRun
from benchmarks.models.outputs import store_unsaved
from benchmarks.probes import commands
from benchmarks.probes.plan import PlannedRun, PlanNode, plan_batches
from benchmarks.services import MANUAL_DEADLINE, terms_view
from common.progress import progress
from gpulease_verify import sweep, verdicts
from gpulease_verify.periods import Period
from leases.choices import LeaseStatus, LinkLayer, ProbeKind, Technology
from leases.contract_rules import DEFAULT_PROBE_CADENCE_S
from leases.models import Lease, LeaseTerms, NicPort, Node
from leases.selectors import TermsTimeline

DAYS = 21
CADENCE = timedelta(hours=2)
GIGA = 10**9


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


def _raw(tool: str, text: str) -> str:
    return f"gpulease demo: synthetic {tool} result, not a measurement\n{text}\n"


def _run(
    *,
    lease: Lease,
    terms: LeaseTerms,
    kind: str,
    tool: str,
    target: str,
    pattern: str,
    slot: datetime,
    site_id: int,
    raw: str,
    judgement: verdicts.Judgement,
    trigger: str = Trigger.SCHEDULE,
    cadence: timedelta = CADENCE,
    started: timedelta = timedelta(seconds=3),
    took: timedelta = timedelta(seconds=12),
    **figures: Any,
) -> ProbeRun:
    return ProbeRun(
        lease=lease,
        kind=kind,
        tool=tool,
        target=target,
        pattern=pattern,
        trigger=trigger,
        slot_at=slot,
        deadline_at=slot + cadence,
        site_id=site_id,
        state=RunState.OK,
        attempts=1,
        started_at=slot + started,
        finished_at=slot + started + took,
        raw_output=raw,
        raw_sha256=hashlib.sha256(raw.encode()).hexdigest(),
        exit_code=0,
        terms=terms,
        verdict=judgement.verdict,
        rule=judgement.rule,
        verdict_reason=judgement.reason,
        **figures,
    )


def _link_output(node: PlanNode) -> str:
    """What the link check prints on a node whose every port is up at its rate, in the
    tools' own formats after a first line saying it is synthetic (so that it parses, as a
    real one would)."""
    parts = []
    for port in node.ports:
        if port.link_layer == LinkLayer.INFINIBAND:
            label = f"{port.device}:{port.port}"
            parts.append(
                f"### ibstatus {label}\nInfiniband device '{port.device}' port {port.port} "
                f"status:\n\tstate:\t\t 4: ACTIVE\n\tphys state:\t 5: LinkUp\n"
                f"\trate:\t\t {port.rate_gbps} Gb/sec (4X)\n\tlink_layer:\t InfiniBand\n"
                f"### link_downed {label}\n0\n"
            )
        elif port.netdev:
            parts.append(
                f"### ethtool {port.netdev}\nSettings for {port.netdev}:\n"
                f"\tSpeed: {port.rate_gbps * 1000}Mb/s\n\tDuplex: Full\n\tLink detected: yes\n"
                f"### carrier_down_count {port.netdev}\n0\n"
            )
    return _raw("link check", "".join(parts).rstrip("\n"))


def _sweep(
    *,
    kind: str,
    tool: str,
    terms: LeaseTerms,
    plan: dict[str, PlanNode],
    outputs: dict[str, str],
    previous: dict[str, dict[str, int]] | None = None,
    **common: Any,
) -> ProbeRun:
    """A sweep of every node (``gpulease_verify.sweep``) whose nodes printed ``outputs``
    (hostname -> output) for the probe's own commands, judged by the probes' own rules."""
    view = terms_view(terms)
    printed = [
        sweep.NodeOutput(
            node=name,
            state=RunState.OK,
            command=(commands.counters if kind == ProbeKind.COUNTERS else commands.link_check)(
                plan[name]
            ),
            exit_code=0,
            stdout=text,
        )
        for name, text in sorted(outputs.items())
    ]
    results = [
        sweep.interpret_node(
            tool=tool,
            output=output,
            terms=view,
            node=plan[output.node],
            previous_link_down=(previous or {}).get(output.node),
        )
        for output in printed
    ]
    judged = sweep.judge(tool=tool, results=results, terms=view)
    return _run(
        kind=kind,
        tool=tool,
        target=sweep.ALL,
        pattern=Pattern.SWEEP,
        terms=terms,
        raw=sweep.transcript(printed),
        judgement=verdicts.Judgement(judged.verdict, judged.rule, judged.reason),
        parsed=sweep.parsed_of(results),
        **common,
    )


def _link_sweep(*, terms: LeaseTerms, plan: dict[str, PlanNode], **common: Any) -> ProbeRun:
    """A link check of every node, every port up at its rate."""
    infiniband = any(p.link_layer == LinkLayer.INFINIBAND for n in plan.values() for p in n.ports)
    tool = Tool.IBSTATUS if infiniband else Tool.ETHTOOL
    outputs = {name: _link_output(node) for name, node in plan.items()}
    previous = {name: {label: 0 for label in _labels(node)} for name, node in plan.items()}
    return _sweep(
        kind=ProbeKind.LINK,
        tool=tool,
        terms=terms,
        plan=plan,
        outputs=outputs,
        previous=previous,
        **common,
    )


def _labels(node: PlanNode) -> list[str]:
    return [
        f"{p.device}:{p.port}" if p.link_layer == LinkLayer.INFINIBAND else p.netdev
        for p in node.ports
        if p.link_layer == LinkLayer.INFINIBAND or p.netdev
    ]


def _nodes(lease: Lease) -> list[Node]:
    return list(
        Node.objects.filter(assignments__lease=lease, assignments__void=False)
        .select_related("leaf_switch__fabric")
        .order_by("hostname")
        .distinct()
    )


def _ports(nodes: list[Node]) -> dict[int, list[NicPort]]:
    ports: dict[int, list[NicPort]] = {}
    for port in NicPort.objects.filter(node__in=nodes).order_by("device", "port_number"):
        ports.setdefault(port.node_id, []).append(port)
    return ports


def _history(lease: Lease, now: datetime, days: int) -> list[tuple[ProbeRun, list[Node]]]:
    rng = random.Random(lease.reference)
    nodes = _nodes(lease)
    if len(nodes) < 2:
        return []
    ports = _ports(nodes)
    versions = list(LeaseTerms.objects.filter(lease=lease).order_by("effective_from"))
    pairs = [(nodes[k], nodes[(k + 1) % len(nodes)]) for k in range(min(4, len(nodes)))]
    site_id = nodes[0].leaf_switch.fabric.site_id
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
    slot = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    plan = selectors.plan_nodes(nodes, [p for found in ports.values() for p in found])
    made: list[tuple[ProbeRun, list[Node]]] = []
    while slot < now:
        terms = next((v for v in reversed(versions) if v.effective_from <= slot), None)
        if terms is None:
            slot += CADENCE
            continue
        view = terms_view(terms)
        contracted = float(terms.contracted_bandwidth_gbps) * GIGA
        common: dict[str, Any] = {"lease": lease, "terms": terms, "slot": slot, "site_id": site_id}
        made.append((_link_sweep(plan=plan, **common), []))
        for index, (client, server) in enumerate(pairs):
            degraded = any(index == i and slot <= at < slot + CADENCE for i, at in slow)
            factor = share * rng.uniform(0.97, 1.03) if degraded else rng.uniform(0.955, 0.99)
            bps = int(contracted * factor)
            tool = Tool.IB_WRITE_BW if terms.technology == Technology.INFINIBAND else Tool.IPERF3
            judgement = verdicts.throughput(measured_bps=bps, terms=view)
            raw = _raw(tool, f"{bps / GIGA:.2f} Gbit/s from {client.hostname} to {server.hostname}")
            run = _run(
                kind=ProbeKind.THROUGHPUT,
                tool=tool,
                target=f"{client.hostname}>{server.hostname}",
                pattern=Pattern.RING,
                raw=raw,
                judgement=judgement,
                measured_bps=bps,
                parsed={"demo": True, "bits_per_second": bps},
                **common,
            )
            made.append((run, [client, server]))
        if terms.collective_busbw_floor_gbps is not None and slot.hour // 2 % 3 == 0:
            # Near the per-node contract, as a healthy ring all-reduce runs (and the
            # training-impact estimate expects), never below the contracted floor.
            floor = float(terms.collective_busbw_floor_gbps) * GIGA
            busbw = int(max(contracted * rng.uniform(0.90, 0.96), floor * rng.uniform(1.02, 1.08)))
            judgement = verdicts.collective(busbw_bps=busbw, terms=view)
            raw = _raw(Tool.ALL_REDUCE_PERF, f"# Avg bus bandwidth : {busbw / 8 / GIGA:.2f}")
            run = _run(
                kind=ProbeKind.COLLECTIVE,
                tool=Tool.ALL_REDUCE_PERF,
                target="all",
                pattern=Pattern.ALL_NODES,
                raw=raw,
                judgement=judgement,
                measured_bps=busbw,
                parsed={"demo": True, "busbw_bps": busbw},
                **common,
            )
            made.append((run, nodes))
        slot += CADENCE
    return made


# --- NIC counters of the pay-per-use leases ---------------------------------------------

COUNTER_STEP = timedelta(seconds=DEFAULT_PROBE_CADENCE_S[ProbeKind.COUNTERS])
HOUR = timedelta(hours=1)
SLOTS_PER_HOUR = HOUR // COUNTER_STEP
# A node's rate in each hour of the tenant's day, in percent of its plan's level: quiet at
# night, busiest in the afternoon.
DAILY_PROFILE = (
    45, 40, 35, 35, 35, 40, 50, 65, 85, 105, 120, 130,
    130, 125, 130, 140, 145, 140, 130, 120, 105, 90, 75, 60,
)  # fmt: skip
# A 5-minute slot sends up to this share more or less than its hour's rate. The slots of an
# hour are paired (+d, -d), so an hour still sends exactly 12 slots at its rate.
JITTER = 0.2
BYTES_PER_MBPS_SLOT = 10**6 * 300 // 8  # bytes 1 Mbps sends in a 5-minute slot
# What a port sends while its node boots (LLDP, ARP, DHCP): its first count after a reset.
BOOT_TX_BYTES = 9_216
# The rebooting node is drained for its hour and reboots in that hour's third slot (xx:10
# to xx:15): the xx:15 reading is the first from zero.
REBOOT_SLOT = 2
COUNTERS_TAKE = timedelta(seconds=2)
# Counter readings go this far back at most (12 runs an hour per node: a longer span makes
# `make run` slow; the chain and ingest handle every run one by one).
COUNTER_DAYS = 7


@dataclass(frozen=True)
class TrafficPlan:
    """What a pay-per-use lease's nodes send. Hours count back from the start of the hour
    the demo loads in."""

    level_mbps: int  # each node, at 100 % of DAILY_PROFILE
    burst_mbps: int  # each node, during the burst
    burst_hours_ago: int  # the burst's first hour
    burst_hours: int
    reboot_hours_ago: int | None = None  # the lease's last node (by hostname) reboots


TRAFFIC = {
    # Inference load tests on 100G RoCE: light traffic and one 40 Gbps-a-node load test.
    "LX-2026-001": TrafficPlan(
        level_mbps=1_600,
        burst_mbps=40_000,
        burst_hours_ago=80,
        burst_hours=2,
        reboot_hours_ago=60,
    ),
    # Fine-tuning on 25G RoCE: steady all-reduce traffic and a checkpoint sync burst.
    "LX-2026-002": TrafficPlan(
        level_mbps=3_000, burst_mbps=20_000, burst_hours_ago=86, burst_hours=2
    ),
}


def _ethtool_block(netdev: str, tx_phy: int) -> str:
    """What ``ethtool -S`` prints for an mlx5 port (a few of its counters) that has sent
    ``tx_phy`` bytes: the *_phy counters see the RoCE traffic, the kernel's a small part."""
    rx_phy = tx_phy - tx_phy // 37
    stats = (
        ("rx_bytes", rx_phy // 50),
        ("tx_bytes", tx_phy // 50),
        ("rx_bytes_phy", rx_phy),
        ("tx_bytes_phy", tx_phy),
        ("rx_crc_errors_phy", 0),
        ("link_down_events_phy", 0),
        ("rx_prio3_pause", rx_phy // (5 * GIGA)),
        ("tx_prio3_pause", tx_phy // (7 * GIGA)),
    )
    lines = "".join(f"     {name}: {value}\n" for name, value in stats)
    return f"### counters {netdev}\n# ethtool -S {netdev}\nNIC statistics:\n{lines}"


def _sysfs_block(device: str, port: int, tx: int) -> str:
    """What ``grep -H . /sys/class/infiniband/DEV/ports/N/counters/*`` prints for a port
    that has sent ``tx`` bytes (the data counters count 4-octet units)."""
    rx = tx - tx // 41
    values = {
        "link_downed": 0,
        "port_rcv_data": rx // 4,
        "port_rcv_errors": 0,
        "port_rcv_packets": rx // 4096,
        "port_xmit_data": tx // 4,
        "port_xmit_discards": 0,
        "port_xmit_packets": tx // 4096,
        "symbol_error": 0,
    }
    base = f"/sys/class/infiniband/{device}/ports/{port}/counters"
    lines = "".join(f"{base}/{name}:{value}\n" for name, value in values.items())
    return f"### counters {device}:{port}\n{lines}"


def _counters_output(node: PlanNode, sent: list[int]) -> str:
    """The counters probe's output for a node whose ports have sent ``sent`` bytes."""
    blocks = [
        _sysfs_block(port.device, port.port, tx)
        if port.link_layer == LinkLayer.INFINIBAND
        else _ethtool_block(port.netdev, tx)
        for port, tx in zip(node.ports, sent, strict=True)
    ]
    return _raw(Tool.COUNTERS, "".join(blocks).rstrip("\n"))


def _counters_sweep(
    *, terms: LeaseTerms, plan: dict[str, PlanNode], sent: dict[str, list[int]], **common: Any
) -> ProbeRun:
    """The counters of every node, whose ports have sent ``sent`` (hostname -> bytes)."""
    return _sweep(
        kind=ProbeKind.COUNTERS,
        tool=Tool.COUNTERS,
        terms=terms,
        plan=plan,
        outputs={name: _counters_output(plan[name], ports) for name, ports in sent.items()},
        **common,
    )


def _slot_bytes(rng: random.Random, mbps: int) -> list[int]:
    """One node's bytes in each slot of an hour at ``mbps``, jittered in +d/-d pairs."""
    base = mbps * BYTES_PER_MBPS_SLOT
    sent = [base] * SLOTS_PER_HOUR
    order = list(range(SLOTS_PER_HOUR))
    rng.shuffle(order)
    for up, down in zip(order[::2], order[1::2], strict=True):
        swing = int(base * JITTER * rng.random())
        sent[up] += swing
        sent[down] -= swing
    return sent


def _counter_history(lease: Lease, now: datetime, days: int) -> list[tuple[ProbeRun, list[Node]]]:
    """A counters run every 5 minutes per node, from the first whole hour of the last
    ``min(days, COUNTER_DAYS)`` days (each node's first reading is where its traffic starts
    to count) until now."""
    plan = TRAFFIC.get(lease.reference)
    nodes = _nodes(lease)
    if plan is None or not nodes:
        return []
    planned = selectors.plan_nodes(nodes, [p for ps in _ports(nodes).values() for p in ps])
    timeline = TermsTimeline.for_lease(lease)
    zone = ZoneInfo(lease.tenant.time_zone)
    rng = random.Random(f"{lease.reference}/counters")
    this_hour = _hour_of(now)
    burst = {this_hour - (plan.burst_hours_ago - k) * HOUR for k in range(plan.burst_hours)}
    reboot = None if plan.reboot_hours_ago is None else this_hour - plan.reboot_hours_ago * HOUR
    # Whatever each port had sent since its node last booted.
    sent = {
        node.hostname: [rng.randrange(10**12, 10**14) for _ in planned[node.hostname].ports]
        for node in nodes
    }
    site_id = nodes[0].leaf_switch.fabric.site_id
    start = max(lease.starts_at, now - timedelta(days=min(days, COUNTER_DAYS)))
    hour = _hour_of(start) if _hour_of(start) == start else _hour_of(start) + HOUR
    made: list[tuple[ProbeRun, list[Node]]] = []
    while hour < now:
        terms = timeline.at(hour)
        local_hour = hour.astimezone(zone).hour
        mbps = (
            plan.burst_mbps if hour in burst else plan.level_mbps * DAILY_PROFILE[local_hour] // 100
        )
        moves = {
            node.hostname: [0] * SLOTS_PER_HOUR
            if hour == reboot and node == nodes[-1]
            else _slot_bytes(rng, mbps)
            for node in nodes
        }
        for index in range(SLOTS_PER_HOUR):
            slot = hour + index * COUNTER_STEP
            if slot + COUNTERS_TAKE > now:
                break
            if terms is not None:
                run = _counters_sweep(
                    lease=lease,
                    terms=terms,
                    plan=planned,
                    sent={name: list(ports) for name, ports in sent.items()},
                    slot=slot,
                    site_id=site_id,
                    cadence=COUNTER_STEP,
                    started=timedelta(seconds=1),
                    took=COUNTERS_TAKE - timedelta(seconds=1),
                )
                made.append((run, []))
            for node in nodes:
                ports, moved = sent[node.hostname], moves[node.hostname][index]
                if hour == reboot and node == nodes[-1] and index == REBOOT_SLOT:
                    ports[:] = [BOOT_TX_BYTES] * len(ports)
                    continue
                for port in range(len(ports)):
                    # Bonded ports share the node's traffic evenly (the first ones take the
                    # odd bytes).
                    ports[port] += moved // len(ports) + (port < moved % len(ports))
        hour += HOUR
    return made


def _hour_of(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


# --- acceptance ---------------------------------------------------------------------------

ACCEPTANCE_BATCH = timedelta(seconds=40)


def _acceptance(lease: Lease, now: datetime) -> list[tuple[ProbeRun, list[Node]]]:
    """The acceptance run of a lease whose terms bill from it: every run the dispatcher
    makes when a lease goes live (every kind, as ``plan_batches`` plans it), one batch
    after the other from the lease's start, all passing."""
    timeline = TermsTimeline.for_lease(lease)
    first = next(iter(timeline), None)
    nodes = _nodes(lease)
    if first is None or not first.billing_starts_on_acceptance or not nodes:
        return []
    if lease.starts_at > now:
        return []
    terms = timeline.at(lease.starts_at) or first
    view = terms_view(terms)
    ports = _ports(nodes)
    planned = selectors.plan_nodes(nodes, [p for found in ports.values() for p in found])
    by_name = {node.hostname: node for node in nodes}
    rng = random.Random(f"{lease.reference}/acceptance")
    contracted = float(terms.contracted_bandwidth_gbps) * GIGA

    def judged(run: PlannedRun) -> tuple[str, verdicts.Judgement, dict[str, Any]]:
        """Raw output, judgement and figures of one passing acceptance run."""
        pair = " from {} to {}".format(*run.nodes) if len(run.nodes) == 2 else ""
        if run.kind == ProbeKind.THROUGHPUT:
            bps = int(contracted * rng.uniform(0.96, 0.99))
            judgement = verdicts.throughput(measured_bps=bps, terms=view)
            figures = {"measured_bps": bps, "parsed": {"demo": True, "bits_per_second": bps}}
            return _raw(run.tool, f"{bps / GIGA:.2f} Gbit/s{pair}"), judgement, figures
        if run.kind == ProbeKind.LATENCY:
            rdma = run.tool == Tool.IB_WRITE_LAT
            latency = round(rng.uniform(1.8, 2.6) if rdma else rng.uniform(18, 30), 2)
            judgement = verdicts.latency(measured_us=latency, terms=view)
            figures = {"latency_us": latency, "parsed": {"demo": True, "latency_us": latency}}
            return _raw(run.tool, f"typical latency {latency} usec{pair}"), judgement, figures
        # The collective: near the per-node contract and above any floor.
        floor = float(terms.collective_busbw_floor_gbps or 0) * GIGA
        busbw = int(max(contracted * rng.uniform(0.90, 0.96), floor * rng.uniform(1.02, 1.08)))
        judgement = verdicts.collective(busbw_bps=busbw, terms=view)
        raw = _raw(run.tool, f"# Avg bus bandwidth : {busbw / 8 / GIGA:.2f}")
        figures = {"measured_bps": busbw, "parsed": {"demo": True, "busbw_bps": busbw}}
        return raw, judgement, figures

    made: list[tuple[ProbeRun, list[Node]]] = []
    elapsed = timedelta()
    for kind in ProbeKind.values:
        for batch in plan_batches(
            kind=kind, nodes=list(planned.values()), technology=terms.technology
        ):
            common: dict[str, Any] = {
                "lease": lease,
                "terms": terms,
                "slot": lease.starts_at,
                "site_id": nodes[0].leaf_switch.fabric.site_id,
                "trigger": Trigger.ACCEPTANCE,
                "cadence": MANUAL_DEADLINE,
                "started": elapsed + timedelta(seconds=2),
                "took": ACCEPTANCE_BATCH / 2,
            }
            for run in batch.runs:
                if kind == ProbeKind.COUNTERS:
                    sent = {
                        name: [rng.randrange(10**9, 10**11) for _ in node.ports]
                        for name, node in planned.items()
                    }
                    probe = _counters_sweep(plan=planned, sent=sent, **common)
                elif kind == ProbeKind.LINK:
                    probe = _link_sweep(plan=planned, **common)
                else:
                    raw, judgement, figures = judged(run)
                    probe = _run(
                        kind=kind,
                        tool=run.tool,
                        target=run.target,
                        pattern=run.pattern,
                        raw=raw,
                        judgement=judgement,
                        **figures,
                        **common,
                    )
                linked = [] if run.pattern == Pattern.SWEEP else [by_name[n] for n in run.nodes]
                made.append((probe, linked))
            elapsed += ACCEPTANCE_BATCH
    return made


def load_history(*, now: datetime | None = None, days: int = DAYS) -> DemoHistory:
    """History for every active demo lease that has none (probes_enabled off: the demo's
    own; the network lab's lease is measured for real)."""
    from billing.ingest import ingest_all

    now = now or timezone.now()
    result = DemoHistory()
    leases = Lease.objects.filter(status=LeaseStatus.ACTIVE, probes_enabled=False).exclude(
        probe_runs__isnull=False
    )
    for lease in progress(list(leases), desc="demo history", unit="lease"):
        made = [
            *_acceptance(lease, now),
            *_history(lease, now, days),
            *_counter_history(lease, now, days),
        ]
        if not made:
            continue
        with transaction.atomic():
            store_unsaved(run for run, _ in made)
            runs = ProbeRun.objects.bulk_create([run for run, _ in made], batch_size=500)
            links = [
                ProbeRun.nodes.through(proberun_id=run.pk, node_id=node.pk)
                for run, (_, nodes) in zip(runs, made, strict=True)
                for node in nodes
            ]
            ProbeRun.nodes.through.objects.bulk_create(links, batch_size=1000)
        chain.link_pending(lease_id=lease.pk, now=now)
        result.leases += 1
        result.runs += len(runs)
    if result.runs:
        ingest_all(notify=False)
    return result
