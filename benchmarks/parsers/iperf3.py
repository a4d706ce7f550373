"""`iperf3 -J` (JSON) output.

iperf3 already reports bits_per_second in bits per second. What differs between versions:

- TCP: end.sum_sent / end.sum_received in every 3.x version; sum_sent carries
  "retransmits" only when the sender could read TCP_INFO (Linux).
- UDP: end.sum holds jitter and loss (3.0 spelled it loss_percent); its bits_per_second is
  always the *sending* side (esnet/iperf PR #1174). end.sum_sent / end.sum_received exist
  only from 3.10 on, so older UDP runs have no received rate: it is reported as None.
- A failed run still prints JSON, with an "error" member and possibly partial data.
- When no test time elapsed iperf3 writes 0 bits/s for the receiver ("If no tests were run,
  set received bandwidth to 0"); that zero means "not measured" and becomes None.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from .base import Number, ParseError, RunFailed, one_line


@dataclass(frozen=True)
class Iperf3Result:
    protocol: str
    streams: int
    reverse: bool
    duration_s: float
    sent_bps: Number | None
    received_bps: Number | None
    retransmits: int | None
    jitter_ms: float | None
    lost_percent: float | None


def parse_iperf3(text: str) -> Iperf3Result:
    document = _load_json(text)
    error = document.get("error")
    if error:
        raise RunFailed(f"iperf3 reported an error: {error}")
    test_start = _member(_member(document, "start"), "test_start")
    end = _member(document, "end")
    if not end:
        raise ParseError("iperf3 output has an empty 'end' section: the test did not finish")

    protocol = _protocol(test_start)
    if protocol == "tcp":
        return _tcp_result(test_start, end)
    return _udp_result(test_start, end)


def _tcp_result(test_start: dict[str, Any], end: dict[str, Any]) -> Iperf3Result:
    sum_sent = _member(end, "sum_sent")
    sum_received = _member(end, "sum_received")
    received_bps = _rate(sum_received, "end.sum_received")
    if sum_received.get("bytes") == 0 and sum_sent.get("bytes", 0) > 0:
        # TCP delivered what the sender sent; a receiver count of 0 means it was not taken.
        raise ParseError(
            f"iperf3 TCP receiver reported 0 bytes although {sum_sent['bytes']} were sent: "
            "the received rate was not measured"
        )
    if received_bps is None:
        raise ParseError("iperf3 TCP result has no received rate (end.sum_received is empty)")
    return Iperf3Result(
        protocol="tcp",
        streams=_streams(test_start, end),
        reverse=_reverse(test_start),
        duration_s=_seconds(sum_received, "end.sum_received"),
        sent_bps=_rate(sum_sent, "end.sum_sent"),
        received_bps=received_bps,
        retransmits=_retransmits(sum_sent),
        jitter_ms=None,
        lost_percent=None,
    )


def _udp_result(test_start: dict[str, Any], end: dict[str, Any]) -> Iperf3Result:
    summary = _member(end, "sum")
    sum_sent = end.get("sum_sent")
    sum_received = end.get("sum_received")
    if isinstance(sum_sent, dict):
        sent_bps = _rate(sum_sent, "end.sum_sent")
    else:
        sent_bps = _rate(summary, "end.sum")
    received_bps = None
    if isinstance(sum_received, dict):
        received_bps = _rate(sum_received, "end.sum_received")
    lost = summary.get("lost_percent", summary.get("loss_percent"))
    jitter = summary.get("jitter_ms")
    if summary.get("packets", summary.get("total_packets")) == 0:
        # No datagram counted: iperf3 then prints an arbitrary 0 or 100 % loss.
        lost = jitter = None
    return Iperf3Result(
        protocol="udp",
        streams=_streams(test_start, end),
        reverse=_reverse(test_start),
        duration_s=_seconds(summary, "end.sum"),
        sent_bps=sent_bps,
        received_bps=received_bps,
        retransmits=None,
        jitter_ms=_optional_float(jitter, "end.sum.jitter_ms"),
        lost_percent=_optional_float(lost, "end.sum.lost_percent"),
    )


def _load_json(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise ParseError("not iperf3 JSON output: no '{' found (was iperf3 run with -J?)")
    try:
        document, _ = json.JSONDecoder(parse_constant=_reject_constant).raw_decode(text, start)
    except json.JSONDecodeError as error:
        reason = f"iperf3 JSON is truncated or invalid: {error.msg} at character {error.pos}"
        raise ParseError(reason) from None
    if not isinstance(document, dict):
        raise ParseError("iperf3 JSON is not an object")
    return document


def _reject_constant(name: str) -> Any:
    raise ParseError(f"iperf3 JSON contains {name}, not a measured number")


def _member(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    if not isinstance(value, dict):
        raise ParseError(f"iperf3 JSON has no '{key}' object")
    return value


def _protocol(test_start: dict[str, Any]) -> str:
    protocol = str(test_start.get("protocol", "")).lower()
    if protocol not in ("tcp", "udp"):
        raise ParseError(f"iperf3 protocol {one_line(protocol)!r} is not TCP or UDP")
    return protocol


def _streams(test_start: dict[str, Any], end: dict[str, Any]) -> int:
    count = test_start.get("num_streams")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count
    streams = end.get("streams")
    if isinstance(streams, list) and streams:
        return len(streams)
    raise ParseError("iperf3 JSON does not say how many streams ran")


def _reverse(test_start: dict[str, Any]) -> bool:
    value = test_start.get("reverse")
    if value in (0, 1) or isinstance(value, bool):
        return bool(value)
    raise ParseError("iperf3 JSON has no start.test_start.reverse flag")


def _number(value: Any, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"iperf3 {where} is not a number")
    if not math.isfinite(value):
        raise ParseError(f"iperf3 {where} is not finite")
    return value


def _seconds(summary: dict[str, Any], where: str) -> float:
    seconds = _number(summary.get("seconds"), f"{where}.seconds")
    if seconds < 0:
        raise ParseError(f"iperf3 {where}.seconds is negative")
    return float(seconds)


def _rate(summary: dict[str, Any], where: str) -> Number | None:
    if not summary:
        return None
    rate = _number(summary.get("bits_per_second"), f"{where}.bits_per_second")
    if rate < 0:
        raise ParseError(f"iperf3 {where}.bits_per_second is negative")
    if _number(summary.get("seconds", 0), f"{where}.seconds") <= 0:
        return None
    return rate


def _retransmits(sum_sent: dict[str, Any]) -> int | None:
    value = sum_sent.get("retransmits")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _optional_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    return float(_number(value, where))
