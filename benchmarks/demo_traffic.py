"""What the demo's nodes have sent at any instant, so that every reading of them agrees as
it does on a real fabric: the counters probe, the telemetry poll, the link check's link
-down counters and the switch port that witnesses a node all read one timeline.

A port's bytes sent are its tenant's own traffic plus, on the node's data port (the first:
iperf3 binds to its address, ib_write_bw runs on its device), the bytes of the node's
probe runs, each spread over the run's time as the probe tax spreads it
(``gpulease_verify.probe_tax.bytes_within``). The switch port of a node's data port
received what the node sent plus its frames' headers.

Pure: no database. ``demo.history`` and ``telemetry.demo`` build and read it.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from gpulease_verify.probe_tax import ProbeSend, bytes_within

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
# A tenant's traffic swings +-50 % around its rate over this period.
WOBBLE = timedelta(minutes=17)
# What a switch port counts on top of the node's bytes: Ethernet headers and FCS of
# jumbo frames, about 0.2 %.
FRAME_OVERHEAD_PER_MILLE = 2
# No demo probe runs longer than this.
LONGEST_RUN = timedelta(minutes=5)


@dataclass(frozen=True)
class Steady:
    """A port's own traffic from ``base`` bytes: ``rate`` bytes a second, swinging with a
    slow wobble that never runs it backwards."""

    base: int
    rate: float
    phase: float = 0.0  # seconds: nodes' swings do not keep step

    def at(self, instant: datetime) -> int:
        seconds = (instant - EPOCH).total_seconds() + self.phase
        omega = 2 * math.pi / WOBBLE.total_seconds()
        # d/dt (rate t + A sin wt) = rate + A w cos wt >= rate / 2 with A = rate / (2 w).
        return self.base + int(
            self.rate * seconds + self.rate / (2 * omega) * math.sin(omega * seconds)
        )


@dataclass(frozen=True)
class Readings:
    """A port's counter at given instants (``at``, ascending) and straight between them:
    the counters probe's readings of the metered leases, whose own traffic the demo draws
    slot by slot. A counter lower than the one before restarted (the node rebooted): it
    holds until that reading."""

    instants: Sequence[datetime]
    values: Sequence[int]

    def at(self, instant: datetime) -> int:
        index = bisect.bisect_right(self.instants, instant) - 1
        if index < 0:
            return self.values[0]
        if index + 1 >= len(self.values):
            return self.values[-1]
        before, after = self.values[index], self.values[index + 1]
        if after < before:
            return before
        start, end = self.instants[index], self.instants[index + 1]
        return before + (after - before) * ((instant - start) // timedelta(microseconds=1)) // (
            (end - start) // timedelta(microseconds=1)
        )


@dataclass
class ProbeBytes:
    """The bytes a node's probe runs had sent by an instant, each run's spread over its
    time (the probe tax's rule)."""

    sends: list[ProbeSend] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sends.sort(key=lambda send: (send.end, send.start))
        self._ends = [send.end for send in self.sends]
        self._done = [0]
        for send in self.sends:
            self._done.append(self._done[-1] + send.bytes)

    def at(self, instant: datetime) -> int:
        done = bisect.bisect_right(self._ends, instant)
        total = self._done[done]
        for send in self.sends[done:]:
            if send.end > instant + LONGEST_RUN:
                break  # this one and every later one started after ``instant``
            total += bytes_within(send, send.start, instant)
        return total

    def between(self, start: datetime, end: datetime) -> int:
        return self.at(end) - self.at(start)


@dataclass(frozen=True)
class Outage:
    """A port down from ``down`` until ``up``: the link check and the telemetry poll see
    its link-down counters go up by one at ``down``."""

    down: datetime
    up: datetime


@dataclass
class PortTimeline:
    """One port of one node: what it sent (its own traffic and, on the data port, its
    probes' since the node last booted) and when its link went down."""

    own: Steady | Readings
    probes: ProbeBytes | None = None
    outages: list[Outage] = field(default_factory=list)
    reboots: list[datetime] = field(default_factory=list)  # counters restart from zero

    def sent(self, instant: datetime) -> int:
        """Bytes sent by ``instant``."""
        if self.probes is None:
            return self.own.at(instant)
        booted = max((at for at in self.reboots if at <= instant), default=None)
        probes = self.probes.between(booted, instant) if booted else self.probes.at(instant)
        return self.own.at(instant) + probes

    def downs(self, instant: datetime) -> int:
        """Link-down events by ``instant``."""
        return sum(1 for outage in self.outages if outage.down <= instant)

    def up(self, instant: datetime) -> bool:
        return not any(outage.down <= instant < outage.up for outage in self.outages)


def switch_octets(node_sent: int) -> int:
    """What the switch port counted of what its node sent: the bytes and their frames."""
    return node_sent + node_sent * FRAME_OVERHEAD_PER_MILLE // 1000


def by_node(sends: Iterable[ProbeSend]) -> dict[str, ProbeBytes]:
    grouped: dict[str, list[ProbeSend]] = {}
    for send in sends:
        grouped.setdefault(send.node, []).append(send)
    return {node: ProbeBytes(found) for node, found in grouped.items()}
