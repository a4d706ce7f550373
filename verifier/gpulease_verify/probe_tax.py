"""The probe tax: the bytes gpulease's own heavy probes sent, so that metering leaves them
out. Pure (no Django, no database): the server builds its traffic samples with it and an
auditor rebuilds them from a bundle's runs (with ``raw=1`` for iperf3) with the same code.

**What a probe sent**, per node, from what the tool printed (only bytes *sent* are
metered, so each byte is counted once, on the node that sent it):

- ``iperf3`` (client JSON, ``-c`` without ``-R``): the client sent ``end.sum_sent.bytes``
  plus the omitted first second(s) (``-O``), which iperf3 leaves out of ``end``: the
  ``intervals`` marked ``"omitted": true``, or, when the JSON has none although
  ``start.test_start.omit`` says seconds were omitted, ``omit x end.sum_sent.bits_per_second
  / 8`` (an estimate). With ``-R`` the server is the sender; with ``--bidir`` the server
  also sent ``end.sum_sent_bidir_reverse.bytes``.
- ``ib_write_bw``: the client wrote ``#bytes x #iterations`` of each printed row (parsed
  ``rows``; the headline row when there are none); ``-b`` (bidirectional): the server the
  same.
- ``ib_write_lat``: a ping-pong, so the client and the server each sent ``#bytes x
  #iterations``.
- ``ping``: each echo request is a 98-byte Ethernet frame (56 bytes of data, 8 ICMP, 20
  IPv4, 14 Ethernet): the client sent ``transmitted x 98``, the server ``received x 98``
  replies. Tiny, counted anyway.
- ``all_reduce_perf`` (nccl-tests, an estimate): a ring all-reduce over ``n`` ranks sends
  ``2 (n - 1) / n x size`` per rank per iteration; with a node's ranks adjacent on the
  ring, only the node's last rank sends over its NIC, so each node sent that much per
  iteration. Per printed size: ``-n`` iterations (default 20) out of place, as many in
  place when the row has an in-place group, and ``-w`` warm-up iterations (default 5). On
  one node nothing crossed the fabric: 0.
- every other tool, and a run that did not end ``ok``: nothing is counted.

**Over which seconds**: the run's ``[started_at, finished_at)``. Its bytes are spread over
that time pro rata (whole bytes, the pieces adding up exactly) and each piece is taken
away from the sending node's counter share of the slot it falls in, never below zero
(``take_away``). A probe outside every counter interval of its node was never metered, so
there is nothing to take away.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from gpulease_verify.parsers import ParseError
from gpulease_verify.parsers.iperf3_json import STREAM_EVENT, _load_json, _load_stream

_MICRO = timedelta(microseconds=1)
OK = "ok"
HEAVY_KINDS = frozenset({"throughput", "latency", "collective"})
PING_FRAME_BYTES = 98
NCCL_ITERATIONS = 20
NCCL_WARMUP_ITERATIONS = 5
ESTIMATED = frozenset({"all_reduce_perf"})
# Tools whose bytes are read from the raw output (the parsed result does not carry them).
NEEDS_RAW = frozenset({"iperf3"})


@dataclass(frozen=True)
class ProbeSend:
    """Bytes one node sent for a probe over ``[start, end)``."""

    node: str
    bytes: int
    start: datetime
    end: datetime


def _flag_value(command: str, flag: str) -> int | None:
    try:
        words = shlex.split(command or "")
    except ValueError:
        words = (command or "").split()
    for index, word in enumerate(words[:-1]):
        if word == flag and words[index + 1].isdigit():
            return int(words[index + 1])
    return None


def _has_flag(command: str, *flags: str) -> bool:
    words = set((command or "").split())
    return any(flag in words for flag in flags)


def _iperf3_document(raw_output: str) -> dict[str, Any]:
    if STREAM_EVENT.search(raw_output):
        return _load_stream(raw_output)
    return _load_json(raw_output)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return max(0, int(value))


def iperf3_bytes(raw_output: str) -> tuple[int, int, bool]:
    """(bytes the client-to-server direction sent, bytes the server-to-client direction
    sent, reverse) from an iperf3 client's JSON; ParseError when it is not one."""
    try:
        return _iperf3_bytes(_iperf3_document(raw_output))
    except (AttributeError, TypeError) as error:
        raise ParseError(f"iperf3 JSON is not laid out as iperf3 writes it: {error}") from None


def _iperf3_bytes(document: dict[str, Any]) -> tuple[int, int, bool]:
    start = document.get("start") or {}
    test_start = start.get("test_start") or {}
    end = document.get("end") or {}
    reverse = bool(test_start.get("reverse"))
    sent = end.get("sum_sent") or end.get("sum") or {}
    forward = _int(sent.get("bytes"))
    omitted = [
        _int((interval.get("sum") or {}).get("bytes"))
        for interval in document.get("intervals") or []
        if isinstance(interval, dict) and (interval.get("sum") or {}).get("omitted")
    ]
    omit_s = _int(test_start.get("omit"))
    if omitted:
        forward += sum(omitted)
    elif omit_s:
        forward += int(omit_s * _int(sent.get("bits_per_second")) // 8)
    back = _int((end.get("sum_sent_bidir_reverse") or {}).get("bytes"))
    return forward, back, reverse


def _perftest_bytes(parsed: Mapping[str, Any]) -> int:
    rows = parsed.get("rows") or [parsed]
    return sum(_int(row.get("msg_size_bytes")) * _int(row.get("iterations")) for row in rows)


def _nccl_bytes(parsed: Mapping[str, Any], command: str, nodes: int) -> int:
    ranks = _int(parsed.get("ranks")) or _flag_value(command, "-np") or 0
    if nodes <= 1 or ranks <= 1:
        return 0
    iterations = _flag_value(command, "-n") or NCCL_ITERATIONS
    warmup = _flag_value(command, "-w")
    warmup = NCCL_WARMUP_ITERATIONS if warmup is None else warmup
    sent = 0
    for row in parsed.get("rows") or []:
        times = iterations * (2 if row.get("in_place") else 1) + warmup
        sent += 2 * (ranks - 1) * _int(row.get("size_bytes")) * times
    return sent // ranks


def bytes_sent(
    *,
    tool: str,
    state: str,
    parsed: Mapping[str, Any] | None,
    raw_output: str | None,
    command: str,
    target: str,
    nodes: Sequence[str],
) -> dict[str, int]:
    """Node -> bytes it sent for one run (module docstring); empty when nothing is
    counted. ``target`` is ``client>server`` for a pair; ``nodes`` every node of the run
    (a collective's). An iperf3 run needs its raw output (ParseError without it)."""
    if state != OK or not parsed:
        return {}
    pair = target.split(">") if ">" in target else []
    client, server = (pair[0], pair[1]) if len(pair) == 2 else (None, None)
    sent: dict[str, int] = {}

    def add(node: str | None, count: int) -> None:
        if node and count > 0:
            sent[node] = sent.get(node, 0) + count

    if tool in NEEDS_RAW and not raw_output:
        raise ParseError(f"an {tool} run's probe bytes need its raw output")
    if tool == "iperf3":
        assert raw_output is not None
        forward, back, reverse = iperf3_bytes(raw_output)
        add(server if reverse else client, forward)
        add(client if reverse else server, back)
    elif tool == "ib_write_bw":
        total = _perftest_bytes(parsed)
        add(client, total)
        if _has_flag(command, "-b", "--bidirectional"):
            add(server, total)
    elif tool == "ib_write_lat":
        total = _perftest_bytes(parsed)
        add(client, total)
        add(server, total)
    elif tool == "ping":
        add(client, _int(parsed.get("transmitted")) * PING_FRAME_BYTES)
        add(server, _int(parsed.get("received")) * PING_FRAME_BYTES)
    elif tool == "all_reduce_perf":
        members = sorted(set(nodes))
        each = _nccl_bytes(parsed, command, len(members))
        for node in members:
            add(node, each)
    return sent


def sends(
    *,
    tool: str,
    state: str,
    parsed: Mapping[str, Any] | None,
    raw_output: str | None,
    command: str,
    target: str,
    nodes: Sequence[str],
    started_at: datetime | None,
    finished_at: datetime | None,
) -> list[ProbeSend]:
    """``bytes_sent`` of one run, each over the run's ``[started_at, finished_at)``."""
    if started_at is None or finished_at is None:
        return []
    found = bytes_sent(
        tool=tool,
        state=state,
        parsed=parsed,
        raw_output=raw_output,
        command=command,
        target=target,
        nodes=nodes,
    )
    return [
        ProbeSend(node, count, started_at, max(finished_at, started_at))
        for node, count in sorted(found.items())
    ]


def received(sent: Sequence[ProbeSend], *, target: str) -> list[ProbeSend]:
    """What one run's nodes received of what it sent (``sent``: its ``sends``), over the
    same seconds, to be taken away from their received bytes: a pair's (``client>server``)
    client received what the server sent and the server what the client sent; a
    collective's ring gives each node what its neighbour sent, the same amount every node
    sent (``all_reduce_perf``), so each node received what it sent."""
    pair = target.split(">") if ">" in target else []
    if len(pair) != 2:
        return list(sent)
    other = {pair[0]: pair[1], pair[1]: pair[0]}
    return [
        ProbeSend(other[send.node], send.bytes, send.start, send.end)
        for send in sent
        if send.node in other
    ]


def by_node(found: Iterable[ProbeSend]) -> dict[str, list[ProbeSend]]:
    grouped: dict[str, list[ProbeSend]] = {}
    for send in found:
        grouped.setdefault(send.node, []).append(send)
    return grouped


def bytes_within(send: ProbeSend, start: datetime, end: datetime) -> int:
    """The part of ``send``'s bytes that falls in ``[start, end)``, pro rata by time:
    ``floor(B t_end / T) - floor(B t_start / T)``, so the pieces of a partition add up to
    ``B``. A send of no duration lies wholly at its start."""
    whole = (send.end - send.start) // _MICRO
    if whole <= 0:
        return send.bytes if start <= send.start < end else 0
    lo = min(max((start - send.start) // _MICRO, 0), whole)
    hi = min(max((end - send.start) // _MICRO, 0), whole)
    if hi <= lo:
        return 0
    return send.bytes * hi // whole - send.bytes * lo // whole


def take_away(share_bytes: int, found: Sequence[ProbeSend], start: datetime, end: datetime) -> int:
    """A node's counter share of ``[start, end)`` less the bytes its probes sent in that
    time, never below zero."""
    probe = sum(bytes_within(send, start, end) for send in found)
    return max(0, share_bytes - probe)


__all__ = [
    "ESTIMATED",
    "HEAVY_KINDS",
    "PING_FRAME_BYTES",
    "ProbeSend",
    "by_node",
    "bytes_sent",
    "bytes_within",
    "iperf3_bytes",
    "received",
    "sends",
    "take_away",
]
