"""`ping -q` summary: iputils ("rtt min/avg/max/mdev"), BSD and macOS ("round-trip
min/avg/max/stddev") and busybox ("round-trip min/avg/max", no deviation).

The figures are in milliseconds and become microseconds here. With no reply there is no
rtt line: that is a ParseError (no latency was measured), not a zero.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from .base import ParseError, decimal, exact, integer, one_line, storable
from .checks import readable

_COUNTS = re.compile(
    # The look-behind keeps a long run of digits from being retried at every offset.
    r"(?<!\d)(\d{1,20}) packets transmitted, (\d{1,20}) (?:packets )?received,"
    r"(?: \+\d+ errors,)?(?: \+\d+ duplicates,)? ([\d.]+)% packet loss"
)
_RTT = re.compile(
    r"(?:rtt|round-trip) min/avg/max(?P<deviation>/(?:mdev|stddev))? = "
    r"(?P<values>[\d.]+(?:/[\d.]+){2,3}) (?P<unit>ms|us)"
)


@dataclass(frozen=True)
class PingResult:
    transmitted: int
    received: int
    lost_percent: float
    rtt_min_us: float
    rtt_avg_us: float
    rtt_max_us: float
    rtt_mdev_us: float | None


def parse_ping(text: str) -> PingResult:
    counts = _COUNTS.search(readable(text, "ping"))
    if counts is None:
        first = next((line for line in text.splitlines() if line.strip()), "empty input")
        raise ParseError(f"no ping statistics in the output: {one_line(first)}")
    transmitted = int(storable(integer(counts.group(1), "packets transmitted"), "transmitted"))
    received = int(storable(integer(counts.group(2), "packets received"), "received"))
    rtt = _RTT.search(text)
    if received == 0 or rtt is None:
        raise ParseError(
            f"no echo reply: {transmitted} sent, {received} received, no round-trip measured"
        )
    figures = rtt.group("values").split("/")
    if len(figures) != (4 if rtt.group("deviation") else 3):
        raise ParseError(f"ping round-trip line has {len(figures)} figures for its labels")
    factor = Decimal(1000) if rtt.group("unit") == "ms" else Decimal(1)
    values = [_microseconds(text, factor) for text in figures]
    return PingResult(
        transmitted=transmitted,
        received=received,
        lost_percent=float(storable(float(decimal(counts.group(3), "packet loss")), "loss")),
        rtt_min_us=values[0],
        rtt_avg_us=values[1],
        rtt_max_us=values[2],
        rtt_mdev_us=values[3] if len(values) == 4 else None,
    )


def _microseconds(text: str, factor: Decimal) -> float:
    return float(storable(exact(decimal(text, "rtt") * factor), "round-trip time"))
