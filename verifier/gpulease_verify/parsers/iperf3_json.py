"""iperf3 `-J` JSON and `--json-stream` lines (3.17+, one {"event", "data"} object per line).

What differs between versions and modes:

- TCP: end.sum_sent / end.sum_received in every 3.x version; sum_sent carries
  "retransmits" only when the sender could read TCP_INFO (Linux).
- UDP: end.sum holds jitter and loss (3.0 spelled it loss_percent); its bits_per_second is
  always the *sending* side (esnet/iperf PR #1174). end.sum_sent / end.sum_received exist
  only from 3.10 on, so older UDP runs have no received rate: it is reported as None.
- `--bidir` (3.7+) adds the server-to-client direction. From 3.11 it is named
  end.sum_sent_bidir_reverse / sum_received_bidir_reverse; 3.7 to 3.10 printed a second
  "sum_sent" / "sum_received" / "sum" in the same object (esnet/iperf #952, #1196). The
  first of each pair is client to server on both ends, so a repeated key is read as the
  reverse direction rather than letting the second silently replace the first.
- The server's own JSON (start.accepted_connection) has zeros for the side it did not
  measure: sum_sent of a normal test, sum_received of a `-R` test (esnet/iperf #1410).
  iperf3 also writes 0 bits/s when no test time elapsed. Such a zero beside a non-zero
  other side means "not measured" and becomes None; a TCP result whose received rate was
  not measured is refused.
- A failed run still prints JSON, with an "error" member and possibly partial data.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from .base import MAX_FIGURE, Number, ParseError, RunFailed, one_line
from .iperf3_result import Iperf3Result, checked

# --- JSON documents -------------------------------------------------------------------

STREAM_EVENT = re.compile(r'^[ \t]*\{[ \t]*"event"[ \t]*:', re.MULTILINE)
_REPEATABLE = ("sum", "sum_sent", "sum_received")


def _load_json(text: str) -> dict[str, Any]:
    start = text.find("{")
    if start < 0:
        raise ParseError("not iperf3 output: no '{' and no iperf3 summary lines")
    document, end = _decode(text, start, "iperf3 JSON")
    if not isinstance(document, dict):
        raise ParseError("iperf3 JSON is not an object")
    if text[end:].lstrip().startswith("{"):
        raise ParseError("the output holds more than one iperf3 JSON document: submit one run")
    return document


def _load_stream(text: str) -> dict[str, Any]:
    """`--json-stream`: one {"event": ..., "data": ...} object per line."""
    document: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip().startswith("{"):
            continue
        where = f"iperf3 --json-stream line {number}"
        event, _ = _decode(line.strip(), 0, where)
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise ParseError(f"{where} is not an event")
        name = event["event"]
        if name in ("start", "end", "error") and name in document:
            raise ParseError(f"the output holds more than one iperf3 '{name}' event")
        if name in ("start", "end", "error"):
            document[name] = event.get("data")
    if "end" not in document and "error" not in document:
        raise ParseError("iperf3 --json-stream output has no 'end' event: the test did not finish")
    return document


def _decode(text: str, start: int, where: str) -> tuple[Any, int]:
    """The JSON value that starts at `start` and the index where it ends."""
    decoder = json.JSONDecoder(object_pairs_hook=_object, parse_constant=_reject_constant)
    try:
        return decoder.raw_decode(text, start)
    except ParseError:
        raise
    except json.JSONDecodeError as error:
        reason = f"{where} is truncated or invalid: {error.msg} at character {error.pos}"
        raise ParseError(reason) from None
    except ValueError:  # an integer of more than 4300 digits
        raise ParseError(f"{where} holds a number too long to be iperf3 output") from None
    except RecursionError:
        raise ParseError(f"{where} is nested too deeply to be iperf3 output") from None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = dict(pairs)
    if len(result) == len(pairs):
        return result  # no key repeated (almost every object): as the loop below makes it
    result = {}
    for key, value in pairs:
        if key in result and key in _REPEATABLE and f"{key}_bidir_reverse" not in result:
            result[f"{key}_bidir_reverse"] = value
        else:
            result[key] = value
    return result


def _reject_constant(name: str) -> Any:
    raise ParseError(f"iperf3 JSON contains {name}, not a measured number")


def _from_document(document: dict[str, Any], output: str) -> Iperf3Result:
    error = document.get("error")
    if error:
        raise RunFailed(f"iperf3 reported an error: {one_line(str(error))}")
    start = _member(document, "start")
    test_start = _member(start, "test_start")
    end = _member(document, "end")
    if not end:
        raise ParseError("iperf3 output has an empty 'end' section: the test did not finish")
    common = {
        "streams": _streams(test_start, end),
        "reverse": _flag(test_start, "reverse", required=True),
        "bidir": bool(_flag(test_start, "bidir", required=False)) or _has_reverse(end),
        "role": _role(start),
        "output": output,
    }
    if _protocol(test_start) == "tcp":
        return checked(_tcp_result(end, common))
    return checked(_udp_result(end, common))


def _tcp_result(end: dict[str, Any], common: dict[str, Any]) -> Iperf3Result:
    sum_sent = _member(end, "sum_sent")
    sum_received = _member(end, "sum_received")
    sent, received = _direction(end, "")
    if received is None and _bytes(sum_received) == 0 and _bytes(sum_sent):
        raise ParseError(
            f"iperf3 TCP receiver reported 0 bytes although {_bytes(sum_sent)} were sent: "
            "the received rate was not measured (a server's own output of a -R test, or "
            "a run too short to time)"
        )
    reverse_sent, reverse_received = _direction(end, "_bidir_reverse")
    return Iperf3Result(
        protocol="tcp",
        duration_s=_seconds(sum_received, "end.sum_received"),
        sent_bps=sent,
        received_bps=received,
        retransmits=_retransmits(sum_sent),
        jitter_ms=None,
        lost_percent=None,
        reverse_sent_bps=reverse_sent,
        reverse_received_bps=reverse_received,
        **common,
    )


def _udp_result(end: dict[str, Any], common: dict[str, Any]) -> Iperf3Result:
    summary = _member(end, "sum")
    if _has_direction(end, ""):
        sent, received = _direction(end, "")
    else:
        sent, received = _rate(summary, "end.sum"), None
    lost = summary.get("lost_percent", summary.get("loss_percent"))
    jitter = summary.get("jitter_ms")
    if summary.get("packets", summary.get("total_packets")) == 0:
        # No datagram counted: iperf3 then prints an arbitrary 0 or 100 % loss.
        lost = jitter = None
    reverse_sent, reverse_received = _direction(end, "_bidir_reverse")
    return Iperf3Result(
        protocol="udp",
        duration_s=_seconds(summary, "end.sum"),
        sent_bps=sent,
        received_bps=received,
        retransmits=None,
        jitter_ms=_optional_float(jitter, "end.sum.jitter_ms"),
        lost_percent=_optional_float(lost, "end.sum.lost_percent"),
        reverse_sent_bps=reverse_sent,
        reverse_received_bps=reverse_received,
        **common,
    )


def _member(parent: dict[str, Any], key: str) -> dict[str, Any]:
    value = parent.get(key)
    if not isinstance(value, dict):
        raise ParseError(f"iperf3 JSON has no '{key}' object")
    return value


def _protocol(test_start: dict[str, Any]) -> str:
    protocol = str(test_start.get("protocol", "")).lower()
    if protocol not in ("tcp", "udp"):
        raise ParseError(f"iperf3 protocol {one_line(protocol)[:40]!r} is not TCP or UDP")
    return protocol


def _streams(test_start: dict[str, Any], end: dict[str, Any]) -> int:
    count = test_start.get("num_streams")
    if isinstance(count, int) and not isinstance(count, bool) and count > 0:
        return count
    streams = end.get("streams")
    if isinstance(streams, list) and streams:
        return len(streams)
    raise ParseError("iperf3 JSON does not say how many streams ran")


def _flag(test_start: dict[str, Any], key: str, *, required: bool) -> bool | None:
    value = test_start.get(key)
    if value in (0, 1) or isinstance(value, bool):
        return bool(value)
    if required:
        raise ParseError(f"iperf3 JSON has no start.test_start.{key} flag")
    return None


def _number(value: Any, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParseError(f"iperf3 {where} is not a number")
    if isinstance(value, int) and abs(value) > MAX_FIGURE:
        raise ParseError(f"iperf3 {where} is too large to be a measurement")
    if not math.isfinite(value):
        raise ParseError(f"iperf3 {where} is not finite")
    return value


def _bytes(summary: dict[str, Any]) -> int | float:
    value = summary.get("bytes", 0)
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


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


def _role(start: dict[str, Any]) -> str | None:
    if "accepted_connection" in start:
        return "server"
    return "client" if "connecting_to" in start else None


def _has_direction(end: dict[str, Any], suffix: str) -> bool:
    return all(isinstance(end.get(f"{key}{suffix}"), dict) for key in ("sum_sent", "sum_received"))


def _has_reverse(end: dict[str, Any]) -> bool:
    return _has_direction(end, "_bidir_reverse")


def _direction(end: dict[str, Any], suffix: str) -> tuple[Number | None, Number | None]:
    """The sent and received rates of one direction (suffix "" is client to server unless
    -R; "_bidir_reverse" is --bidir's server to client). A side with 0 bytes beside a
    measured other side was not measured by whoever printed this output."""
    if not _has_direction(end, suffix):
        if suffix:
            return None, None
        raise ParseError("iperf3 JSON has no 'sum_sent' and 'sum_received' objects")
    sent, received = end[f"sum_sent{suffix}"], end[f"sum_received{suffix}"]
    sent_bps = _rate(sent, f"end.sum_sent{suffix}")
    received_bps = _rate(received, f"end.sum_received{suffix}")
    if _bytes(sent) == 0 and _bytes(received):
        sent_bps = None
    if _bytes(received) == 0 and _bytes(sent):
        received_bps = None
    return sent_bps, received_bps


def _retransmits(sum_sent: dict[str, Any]) -> int | None:
    value = sum_sent.get("retransmits")
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _optional_float(value: Any, where: str) -> float | None:
    if value is None:
        return None
    return float(_number(value, where))


def parse_iperf3_json(text: str) -> Iperf3Result:
    if STREAM_EVENT.search(text):
        return _from_document(_load_stream(text), "json-stream")
    return _from_document(_load_json(text), "json")
