"""`ping -q` summary (iputils, and the BSD/busybox "round-trip" spelling).

iputils prints "rtt min/avg/max/mdev = 0.020/0.071/0.230/0.079 ms"; the figures are in
milliseconds and become microseconds here. With no reply there is no rtt line: that is a
ParseError (no latency was measured), not a zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from .base import ParseError, decimal, exact, integer, one_line

_COUNTS = re.compile(
    r"(\d+) packets transmitted, (\d+) (?:packets )?received,"
    r"(?: \+\d+ errors,)?(?: \+\d+ duplicates,)? ([\d.]+)% packet loss"
)
_RTT = re.compile(
    r"(?:rtt|round-trip) min/avg/max/(?:mdev|stddev) = "
    r"([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) (ms|us)"
)


@dataclass(frozen=True)
class PingResult:
    transmitted: int
    received: int
    lost_percent: float
    rtt_min_us: float
    rtt_avg_us: float
    rtt_max_us: float
    rtt_mdev_us: float


def parse_ping(text: str) -> PingResult:
    counts = _COUNTS.search(text)
    if counts is None:
        first = next((line for line in text.splitlines() if line.strip()), "empty input")
        raise ParseError(f"no ping statistics in the output: {one_line(first)}")
    transmitted = integer(counts.group(1), "packets transmitted")
    received = integer(counts.group(2), "packets received")
    rtt = _RTT.search(text)
    if received == 0 or rtt is None:
        raise ParseError(
            f"no echo reply: {transmitted} sent, {received} received, no round-trip measured"
        )
    factor = Decimal(1000) if rtt.group(5) == "ms" else Decimal(1)
    values = [exact(decimal(rtt.group(i), "rtt") * factor) for i in range(1, 5)]
    return PingResult(
        transmitted=transmitted,
        received=received,
        lost_percent=float(decimal(counts.group(3), "packet loss")),
        rtt_min_us=float(values[0]),
        rtt_avg_us=float(values[1]),
        rtt_max_us=float(values[2]),
        rtt_mdev_us=float(values[3]),
    )
