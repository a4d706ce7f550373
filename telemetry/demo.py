"""The demo's fabric telemetry: the last stretch of every demo lease's polls, printed as the
telemetry command prints them on a node (``benchmarks.probes.commands.telemetry``: boot
id, uptime, each port's sysfs files and ``ethtool -S``) from the nodes' traffic timelines
(``benchmarks.demo_traffic``), and stored by the telemetry cycle's own ``record``: each
poll's intervals, the switch readings that witness them, a chain link per lease, the
availability they take and the health rules' incidents. The switch ports read are the
timelines' too, so host and switch agree as on a healthy fabric.

One port flaps: ``FLAP`` takes a port of a ZY-2026-001 node down four times in about seven
minutes, each time across two consecutive polls (down about 65 s, its link-down counters
one higher), then up again: a flap to the health rules (three down-then-up cycles in ten
minutes) and to gpud's (three outages seen on two polls at least 25 s apart, within 12
hours).
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from benchmarks.demo_traffic import Outage, PortTimeline, switch_octets
from benchmarks.probes.plan import PlanNode, PlanPort
from benchmarks.switch_snmp import SwitchPortReading
from benchmarks.witness import WitnessPort
from leases.choices import LinkLayer
from leases.models import Lease, LeaseTerms, Node
from telemetry import services


@dataclass(frozen=True)
class Flap:
    """Which port of which lease flaps, and how: ``events`` outages, one every ``every``
    polls, each down from ``down_before`` ahead of a poll until ``up_after`` past the next
    one (so two consecutive polls see it down)."""

    reference: str
    node: int  # index among the lease's nodes, by hostname
    port: int  # index among the node's ports
    events: int = 4
    every: int = 4
    down_before: timedelta = timedelta(seconds=15)
    up_after: timedelta = timedelta(seconds=20)
    # The episode starts about this long before the demo loads: inside the last hour that
    # ``manage.py fabric_health`` shows by default, and recent enough that the health
    # rules' hold-down keeps the finding (and its incident) open when the demo is loaded.
    ago: timedelta = timedelta(minutes=12)


FLAP = Flap("ZY-2026-001", node=2, port=1)
# The telemetry history the demo stores: every poll of the last 75 minutes, 30 s apart
# (the terms' default telemetry interval). A shorter window (``demo --telemetry-minutes``)
# loads faster; below FLAP_WINDOW it has no room for the flap, which is then left out.
WINDOW = timedelta(minutes=75)
FLAP_WINDOW = timedelta(minutes=30)
MARGIN = timedelta(minutes=2)
STEP_S = 30
# The counters a poll reads before any outage: the carrier went down and up once at boot.
CARRIER_CHANGES_AT_BOOT = 2


def poll_grid(now: datetime, step_s: int, window: timedelta = WINDOW) -> list[datetime]:
    """The polls of the ``window`` before ``now``, ``step_s`` apart on the minute grid."""
    if window <= timedelta(0):
        return []
    first = now - window
    first = first.replace(second=0, microsecond=0) + timedelta(minutes=1)
    polls, at = [], first
    while at <= now:
        polls.append(at)
        at += timedelta(seconds=step_s)
    return polls


def flap_outages(
    now: datetime, step_s: int, flap: Flap = FLAP, window: timedelta = WINDOW
) -> list[Outage]:
    """The flapping port's outages before ``now``: ``flap.events`` of them from about
    ``flap.ago`` on the poll grid, none across a whole hour, when link checks and heavy
    probes run; none in a window shorter than ``FLAP_WINDOW``."""
    if window < FLAP_WINDOW:
        return []
    polls = poll_grid(now, step_s, window)
    span = timedelta(seconds=step_s * (flap.every * (flap.events - 1) + 2))
    start = now - flap.ago
    hour = (start + span).replace(minute=0, second=0, microsecond=0)
    if start - timedelta(minutes=1) <= hour <= start + span + timedelta(minutes=1):
        # Clear of the hour's link check and probes: after it if there is time, else before.
        after = hour + MARGIN
        start = after if after + span < now - timedelta(minutes=1) else hour - span - MARGIN
    first = polls.index(min(polls, key=lambda at: abs(at - start)))
    return [
        Outage(
            down=polls[first + k * flap.every] - flap.down_before,
            up=polls[first + k * flap.every + 1] + flap.up_after,
        )
        for k in range(flap.events)
    ]


@dataclass
class DemoNode:
    """A demo node as its telemetry poll reads it."""

    node: Node
    lease: Lease
    plan: PlanNode
    ports: Sequence[PortTimeline]  # in ``plan.ports`` order
    booted: datetime
    boot_id: str
    kernel_share: int  # the kernel's statistics count 1 / kernel_share of a port's bytes
    switch_cleared: datetime  # when its leaf switch's port counters started from zero

    def received(self, port: PortTimeline, at: datetime) -> int:
        return port.sent(at) * 97 // 100


def boot_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _rate(port: PlanPort) -> str:
    width, name = ("4X", "NDR") if port.rate_gbps >= 400 else ("4X", "EDR")
    if port.rate_gbps <= 25:
        width = "1X"
    return f"{port.rate_gbps} Gb/sec ({width} {name})"


def _ib_section(node: DemoNode, port: PlanPort, timeline: PortTimeline, at: datetime) -> str:
    base = f"/sys/class/infiniband/{port.device}/ports/{port.port}"
    sent, received, up = timeline.sent(at), node.received(timeline, at), timeline.up(at)
    infiniband = port.link_layer == LinkLayer.INFINIBAND
    mtu = 4096 if infiniband else 8192
    values = [
        ("state", "4: ACTIVE" if up else "1: DOWN"),
        ("phys_state", "5: LinkUp" if up else "2: Polling"),
        ("rate", _rate(port)),
        ("link_layer", "InfiniBand" if infiniband else "Ethernet"),
        ("counters/VL15_dropped", 0),
        ("counters/excessive_buffer_overrun_errors", 0),
        ("counters/link_downed", timeline.downs(at)),
        ("counters/link_error_recovery", 0),
        ("counters/local_link_integrity_errors", 0),
        ("counters/port_rcv_constraint_errors", 0),
        ("counters/port_rcv_data", received // 4),
        ("counters/port_rcv_errors", 0),
        ("counters/port_rcv_packets", received // mtu),
        ("counters/port_rcv_remote_physical_errors", 0),
        ("counters/port_rcv_switch_relay_errors", 0),
        ("counters/port_xmit_constraint_errors", 0),
        ("counters/port_xmit_data", sent // 4),
        ("counters/port_xmit_discards", 0),
        ("counters/port_xmit_packets", sent // mtu),
        ("counters/port_xmit_wait", sent // 10**7),
        ("counters/symbol_error", 0),
    ]
    if infiniband:
        values += [
            ("hw_counters/duplicate_request", 0),
            ("hw_counters/local_ack_timeout_err", 0),
            ("hw_counters/out_of_buffer", 0),
            ("hw_counters/out_of_sequence", 0),
        ]
    else:
        # DCQCN at work on a busy RoCE port: ECN marks and CNPs, far under the limits.
        values += [
            ("hw_counters/np_cnp_sent", received // 10**8),
            ("hw_counters/np_ecn_marked_roce_packets", received // (5 * 10**7)),
            ("hw_counters/out_of_buffer", 0),
            ("hw_counters/out_of_sequence", 0),
            ("hw_counters/roce_slow_restart", 0),
            ("hw_counters/rp_cnp_handled", sent // 10**8),
        ]
    return "\n".join(f"{base}/{name}:{value}" for name, value in values)


def _net_section(node: DemoNode, port: PlanPort, timeline: PortTimeline, at: datetime) -> str:
    net = f"/sys/class/net/{port.netdev}"
    up, downs = timeline.up(at), timeline.downs(at)
    sent = timeline.sent(at) // node.kernel_share
    received = node.received(timeline, at) // node.kernel_share
    lines = [
        f"{net}/operstate:{'up' if up else 'down'}",
        f"{net}/carrier:{1 if up else 0}",
        f"{net}/carrier_changes:{CARRIER_CHANGES_AT_BOOT + 2 * downs - (0 if up else 1)}",
        # A down link's speed cannot be read (EINVAL): grep says so on stderr (2>&1).
        f"{net}/speed:{port.rate_gbps * 1000}" if up else f"grep: {net}/speed: Invalid argument",
    ]
    for name, value in (
        ("rx_bytes", received),
        ("rx_dropped", 0),
        ("rx_errors", 0),
        ("rx_packets", received // 8192),
        ("tx_bytes", sent),
        ("tx_dropped", 0),
        ("tx_errors", 0),
        ("tx_packets", sent // 8192),
    ):
        lines.append(f"{net}/statistics/{name}:{value}")
    return "\n".join(lines)


def _ethtool_section(node: DemoNode, timeline: PortTimeline, at: datetime) -> str:
    sent, received = timeline.sent(at), node.received(timeline, at)
    stats = (
        ("rx_bytes", received // node.kernel_share),
        ("tx_bytes", sent // node.kernel_share),
        ("rx_bytes_phy", received),
        ("tx_bytes_phy", sent),
        ("rx_discards_phy", 0),
        ("rx_crc_errors_phy", 0),
        ("link_down_events_phy", timeline.downs(at)),
        ("rx_prio3_pause", received // (5 * 10**9)),
        ("tx_prio3_pause", sent // (7 * 10**9)),
    )
    return "NIC statistics:\n" + "\n".join(f"     {name}: {value}" for name, value in stats)


def node_output(node: DemoNode, at: datetime) -> str:
    """What the telemetry command prints on the node at ``at``."""
    uptime = (at - node.booted).total_seconds()
    parts = [("boot_id", node.boot_id), ("clock", f"{uptime:.2f} {uptime * 61.7:.2f}")]
    for port, timeline in zip(node.plan.ports, node.ports, strict=True):
        if port.link_layer == LinkLayer.INFINIBAND or port.device.startswith("mlx"):
            parts.append((f"ib {port.device}:{port.port}", _ib_section(node, port, timeline, at)))
        if port.netdev:
            parts.append((f"net {port.netdev}", _net_section(node, port, timeline, at)))
            if port.device.startswith("mlx"):
                parts.append((f"ethtool {port.netdev}", _ethtool_section(node, timeline, at)))
    return "".join(f"### {label}\n{text}\n" for label, text in parts)


def switch_reading(
    port: WitnessPort, data: PortTimeline, at: datetime, cleared: datetime
) -> SwitchPortReading:
    """What the switch port that a node's data port plugs into counts at ``at``: what
    the node sent since the switch's counters were ``cleared``, plus frame overhead.
    (Counted from a recent clearing, the octets stay under 10^15: SQLite keeps a
    DecimalField to 15 significant digits, and the telemetry chain hashes them.)"""
    sent = data.sent(at) - data.sent(cleared)
    return SwitchPortReading(
        if_name=port.if_name,
        if_index=int(port.if_name.rsplit("/", 1)[-1]),
        in_octets=switch_octets(sent),
        out_octets=switch_octets(sent * 97 // 100),
        oper_up=data.up(at),
        in_errors=0,
        out_discards=0,
    )


def _switch_reader(
    nodes: Mapping[str, DemoNode], at: datetime
) -> Callable[[Mapping[str, WitnessPort]], dict[str, SwitchPortReading]]:
    """What the witness ports' switches answer at ``at``."""

    def read(ports: Mapping[str, WitnessPort]) -> dict[str, SwitchPortReading]:
        return {
            hostname: switch_reading(
                port, nodes[hostname].ports[0], at, nodes[hostname].switch_cleared
            )
            for hostname, port in ports.items()
        }

    return read


@dataclass
class Loaded:
    polls: int = 0
    samples: int = 0
    switch_readings: int = 0
    incidents: int = 0


def load(
    nodes: Sequence[DemoNode],
    *,
    terms_at: Callable[[Lease, datetime], LeaseTerms | None],
    now: datetime,
    step_s: int,
    before_poll: Callable[[datetime], None],
    window: timedelta = WINDOW,
) -> Loaded:
    """Every poll of the window before ``now`` over ``nodes``, stored by the telemetry
    cycle (``telemetry.services.record``); ``before_poll(at)`` runs first at each poll (the
    demo stores the runs that finished by then, so that the chain holds both in time
    order)."""
    loaded = Loaded()
    by_name = {node.plan.hostname: node for node in nodes}
    for at in poll_grid(now, step_s, window):
        before_poll(at)
        due = []
        for node in nodes:
            terms = terms_at(node.lease, at)
            if terms is not None and terms.telemetry_interval_s and node.booted < at:
                due.append(services.Held(node.node, node.lease, terms))
        printed = {
            held.node.pk: (None, node_output(by_name[held.node.hostname], at)) for held in due
        }
        result = services.record(due, at, printed, read_switch=_switch_reader(by_name, at))
        if result.failed:
            raise ValueError(f"the demo's telemetry did not parse: {result.failed}")
        loaded.polls += 1
        loaded.samples += result.samples
        loaded.switch_readings += result.switch_readings
        loaded.incidents += len(result.opened)
    return loaded
