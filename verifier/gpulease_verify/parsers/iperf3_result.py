"""The result every iperf3 reader returns, and the bounds it is held to."""

from __future__ import annotations

from dataclasses import dataclass

from .base import Number, ParseError, storable


@dataclass(frozen=True)
class Iperf3Result:
    """Rates in bits/s, None where the output did not measure them. `received_bps` is
    the receiver's rate of the client-to-server direction (server-to-client with -R);
    `reverse_*` is --bidir's server-to-client direction. `role` is "client", "server" or
    None (a bare summary); `reverse` is None when a text output does not say; `output` is
    "json", "json-stream" or "text" (text rates carry only the digits iperf3 printed)."""

    protocol: str
    streams: int
    reverse: bool | None
    bidir: bool
    role: str | None
    output: str
    duration_s: float
    sent_bps: Number | None
    received_bps: Number | None
    retransmits: int | None
    jitter_ms: float | None
    lost_percent: float | None
    reverse_sent_bps: Number | None = None
    reverse_received_bps: Number | None = None


def checked(result: Iperf3Result) -> Iperf3Result:
    """`result` if every figure in it can be stored, else ParseError (shared by both
    readers, so the text and the JSON of one run are held to the same bounds)."""
    figures = {
        "streams": result.streams,
        "duration": result.duration_s,
        "sent rate": result.sent_bps,
        "received rate": result.received_bps,
        "reverse sent rate": result.reverse_sent_bps,
        "reverse received rate": result.reverse_received_bps,
        "retransmits": result.retransmits,
        "jitter": result.jitter_ms,
        "loss": result.lost_percent,
    }
    for what, value in figures.items():
        if value is not None:
            storable(value, f"iperf3 {what}")
    if result.protocol == "tcp" and result.received_bps is None:
        raise ParseError("iperf3 TCP result has no received rate: the receiver's side is missing")
    return result
