"""NIC counter readings of the demo's pay-per-use leases (per GB, 95计费): every 5 minutes
per node, printed as the real counters probe prints them (``ethtool -S`` per port,
``grep -H .`` of the InfiniBand sysfs counters: ``benchmarks.probes.commands.counters``)
and parsed by the probe's own interpreter, so the real ingest turns them into the traffic
samples their invoices bill. ``TRAFFIC`` draws each lease's own traffic: a daily pattern,
a two-hour burst the 95th percentile drops, one node rebooted, its counters restarting
from zero. The counters print each port's timeline (``benchmarks.demo_traffic``): that
traffic plus the bytes of the node's own probes, which ingest keeps out again (the probe
tax)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from benchmarks import demo_outputs
from benchmarks.choices import Tool, Trigger
from benchmarks.demo_traffic import Readings
from benchmarks.models import ProbeRun
from benchmarks.probes.plan import PlanNode
from demo.runs import GIGA, LeaseDemo, SweepSpec, sweep_run
from leases.choices import LinkLayer, ProbeKind
from leases.contract_rules import DEFAULT_PROBE_CADENCE_S

# The kernel's netdev statistics count 1 / KERNEL_SHARE of an mlx5 port's bytes (RoCE
# traffic bypasses the kernel).
KERNEL_SHARE = 50

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

REBOOTED_AT = timedelta(minutes=12)  # into the reboot hour: when its counters restart

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
        ("rx_bytes", rx_phy // KERNEL_SHARE),
        ("tx_bytes", tx_phy // KERNEL_SHARE),
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
    return demo_outputs.synthetic(Tool.COUNTERS, "".join(blocks).rstrip("\n"))


def counters_sweep(demo: LeaseDemo, spec: SweepSpec) -> ProbeRun:
    """The counters of every node, as their ports' timelines stand at the slot."""
    return sweep_run(
        demo,
        spec,
        tool=Tool.COUNTERS,
        outputs={
            name: _counters_output(
                demo.plan[name], [port.sent(spec.slot) for port in demo.ports[name]]
            )
            for name in demo.plan
        },
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


def metered(demo: LeaseDemo, now: datetime, days: int) -> dict[str, list[Readings]] | None:
    """The own traffic of a pay-per-use lease's ports, drawn slot by slot from the first
    whole hour of the last ``min(days, COUNTER_DAYS)`` days (each node's first reading is
    where its traffic starts to count) until the slot after now, and a counters sweep
    every 5 minutes (``demo.sweeps``). None for a lease without a TrafficPlan."""
    plan = TRAFFIC.get(demo.lease.reference)
    if plan is None:
        return None
    lease, nodes = demo.lease, demo.nodes
    zone = ZoneInfo(lease.tenant.time_zone)
    rng = random.Random(f"{lease.reference}/counters")
    this_hour = hour_of(now)
    burst = {this_hour - (plan.burst_hours_ago - k) * HOUR for k in range(plan.burst_hours)}
    reboot = None if plan.reboot_hours_ago is None else this_hour - plan.reboot_hours_ago * HOUR
    # Whatever each port had sent since its node last booted.
    sent = {
        node.hostname: [rng.randrange(10**12, 10**14) for _ in demo.plan[node.hostname].ports]
        for node in nodes
    }
    start = max(lease.starts_at, now - timedelta(days=min(days, COUNTER_DAYS)))
    hour = hour_of(start) if hour_of(start) == start else hour_of(start) + HOUR
    instants: list[datetime] = []
    values: dict[str, list[list[int]]] = {node.hostname: [] for node in nodes}
    if reboot is not None:
        demo.reboots[nodes[-1].hostname] = reboot + REBOOTED_AT

    def reading(slot: datetime) -> None:
        instants.append(slot)
        for node in nodes:
            values[node.hostname].append(list(sent[node.hostname]))

    ended = False
    while hour < now and not ended:
        terms = demo.timeline.at(hour)
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
            reading(slot)
            if slot + COUNTERS_TAKE > now:
                ended = True  # the slot after now: where the last interval is heading
                break
            if terms is not None:
                demo.sweeps.append(
                    SweepSpec(
                        kind=ProbeKind.COUNTERS,
                        terms=terms,
                        slot=slot,
                        started=slot + timedelta(seconds=1),
                        took=COUNTERS_TAKE - timedelta(seconds=1),
                        trigger=Trigger.SCHEDULE,
                        cadence=COUNTER_STEP,
                    )
                )
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
    if not ended:
        reading(hour)
    if len(instants) < 2:
        return None
    return {
        name: [
            Readings(instants, [reading[port] for reading in readings])
            for port in range(len(demo.plan[name].ports))
        ]
        for name, readings in values.items()
    }


def hour_of(instant: datetime) -> datetime:
    return instant.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
