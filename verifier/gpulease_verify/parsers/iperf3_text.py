"""iperf3's human-readable output, client or server side (src/iperf_locale.c, iperf_api.c).

The figures come from the summary block: a "- - - -" separator, an optional "Test
Complete. Summary Results:", the "[ ID] Interval ..." header, then one line per stream
and, with -P above 1, a [SUM] line, each tagged "sender" or "receiver":

    [  5]   0.00-10.00  sec  1.10 GBytes   943 Mbits/sec    0             sender
    [SUM][TX-C]   0.00-1.05   sec  6.48 GBytes  52.8 Gbits/sec          receiver

- Rates are printed to three or four figures in bits/s with decimal prefixes (Kbits = 10^3)
  or, with `-f K/M/G`, in Bytes/s with binary ones (KBytes = 1024); see src/units.c.
- `--bidir` (3.7+) tags lines [TX-C]/[RX-C] on the client and [RX-S]/[TX-S] on the server;
  TX-C and RX-S are the client-to-server direction.
- UDP before 3.2 printed a single untagged line mixing the sender's rate with the
  receiver's jitter and loss; loss is "%.2g", so 100 % shows as "(1e+02%)".
- A server does not print the side it did not measure (3.2+), or prints it as 0 bits/s
  (3.1); with `--get-server-output` the client appends the server's text, which is
  ignored here.
- `--timestamps` (3.12+) starts every line with a time, by default "%c "
  ("Mon Mar 10 18:47:06 2025 "); it is taken off before reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from .base import BITS_PER_BYTE, Number, ParseError, RunFailed, decimal, exact, one_line
from .iperf3_result import Iperf3Result, checked

# `--timestamps` default "%c " prefix, e.g. "Mon Mar 10 18:47:06 2025 ".
_CLOCK = r"[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} "
_MARKERS = re.compile(
    rf"^(?:{_CLOCK})?"
    r"(Connecting to host |Server listening on |Accepted connection from |\[ ID\]|"
    r"- - - - - |iperf3: (?:error|interrupt) - |\[ *(?:\d+|SUM)\](?:\[[TR]X-[CS]\])?[ \t]+\d)",
    re.MULTILINE,
)
_TIMESTAMP = re.compile(rf"^{_CLOCK}")
_SEPARATOR = re.compile(r"^- - - - - ")
_HEADER = re.compile(r"^\[ ID\](?:\[Role\])?\s+Interval\s+Transfer\s+(?:Bitrate|Bandwidth)")
_SERVER_COPY = re.compile(r"^Server (?:JSON )?output:\s*$")
_BLOCK_END = re.compile(r"^(- - - |-{10,}|Server listening |Accepted connection |iperf Done\.)")
_FAILURE = re.compile(r"^iperf3: (?:error|interrupt) - (.*)$")
_LINE = re.compile(
    r"^\[\s*(?P<id>\d+|SUM)\](?:\[(?P<role>[TR]X-[CS])\])?\s+"
    r"(?P<begin>\d+\.\d+)-\s*(?P<end>\d+\.\d+)\s+sec\s+"
    r"(?P<transfer>\d+(?:\.\d+)?)\s+(?P<transfer_unit>[KMGT]?Bytes)\s+"
    r"(?P<rate>\d+(?:\.\d+)?)\s+(?P<rate_unit>[KMGT]?(?:bits|Bytes)/sec)(?P<rest>.*)$"
)
_UDP = re.compile(
    r"^\s+(?P<jitter>\d+(?:\.\d+)?) ms\s+(?P<lost>\d{1,20}|Unknown)/(?P<total>\d{1,20})"
    r"(?:\s+\((?P<percent>[^)]*)%\))?"
)
_RETRANSMITS = re.compile(r"^\s+(\d{1,20})\s")
_LABEL = re.compile(r"\s(sender|receiver)\s*$")
_BIT_PREFIX = {"": 1, "K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_BYTE_PREFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_FORWARD_ROLES = (None, "TX-C", "RX-S")


@dataclass(frozen=True)
class _Line:
    stream: str
    role: str | None
    end_s: Decimal
    rate_bps: Number
    label: str | None
    retransmits: int | None
    jitter_ms: float | None
    lost: int | None
    total: int | None

    @property
    def is_udp(self) -> bool:
        return self.total is not None


def looks_like_text(text: str) -> bool:
    """True when iperf3's text markers come before any '{' (a JSON document may carry
    the server's text inside a string, and a text output never opens a brace first)."""
    brace = text.find("{")
    # Only the text before the brace is searched (no marker holds a brace, so one that
    # starts before it ends before it): a JSON document is not scanned line by line.
    return _MARKERS.search(text, 0, len(text) if brace < 0 else brace) is not None


def parse_iperf3_text(text: str) -> Iperf3Result:
    lines = _own_lines(text)
    failure = next((m.group(1) for line in lines if (m := _FAILURE.match(line.strip()))), None)
    if failure is not None:
        raise RunFailed(f"iperf3 reported an error: {one_line(failure)}")
    summary = _summary(lines)
    forward = [line for line in summary if line.role in _FORWARD_ROLES]
    backward = [line for line in summary if line.role not in _FORWARD_ROLES]
    if not forward:
        raise ParseError("the iperf3 summary has no client-to-server line")
    sent, received = _side(forward, "sender"), _side(forward, "receiver")
    untagged = _side(forward, None)  # UDP before 3.2: the sender's rate, the receiver's loss
    receiving, timed = received or untagged, received or untagged or sent
    sent_bps, received_bps = _measured(sent or untagged, received), _measured(received, sent)
    if timed is None or (sent_bps is None and received_bps is None):
        raise ParseError("the iperf3 summary has no sender or receiver line with a rate")
    return checked(
        Iperf3Result(
            protocol="udp" if any(line.is_udp for line in forward) else "tcp",
            streams=len({line.stream for line in forward if line.stream != "SUM"}) or 1,
            reverse=_reverse(lines),
            bidir=bool(backward),
            role=_role(lines, summary),
            output="text",
            duration_s=float(timed.end_s),
            sent_bps=sent_bps,
            received_bps=received_bps,
            retransmits=sent.retransmits if sent else None,
            jitter_ms=receiving.jitter_ms if receiving else None,
            lost_percent=_loss(receiving),
            reverse_sent_bps=_measured(_side(backward, "sender"), _side(backward, "receiver")),
            reverse_received_bps=_measured(_side(backward, "receiver"), _side(backward, "sender")),
        )
    )


def _own_lines(text: str) -> list[str]:
    """The lines of this host's run, without a server copy appended by the client."""
    lines = [_TIMESTAMP.sub("", line, count=1) for line in text.splitlines()]
    cut = next((i for i, line in enumerate(lines) if _SERVER_COPY.match(line.strip())), None)
    return lines if cut is None else lines[:cut]


def _summary(lines: list[str]) -> list[_Line]:
    starts = [i for i, line in enumerate(lines) if _summary_header(lines, i)]
    if not starts:
        raise ParseError(
            "no iperf3 summary ('- - -' then '[ ID] Interval ...') in the output: "
            "the run did not finish, or this is not iperf3 output"
        )
    if len(starts) > 1:
        raise ParseError(
            f"the output holds {len(starts)} iperf3 summaries: submit the output of one run"
        )
    result = []
    for line in lines[starts[0] + 1 :]:
        stripped = line.strip()
        if not stripped or _BLOCK_END.match(stripped):
            break
        match = _LINE.match(stripped)
        if match:
            result.append(_read(match))
    if not result:
        raise ParseError("the iperf3 summary header is followed by no summary line")
    return result


def _summary_header(lines: list[str], index: int) -> bool:
    if not _HEADER.match(lines[index].strip()):
        return False
    before = [line.strip() for line in lines[max(0, index - 2) : index]]
    return any(_SEPARATOR.match(line) for line in before)


def _read(match: re.Match[str]) -> _Line:
    rest = match.group("rest")
    label = _LABEL.search(rest)
    udp = _UDP.match(rest)
    retransmits = _RETRANSMITS.match(rest) if not udp else None
    lost = udp.group("lost") if udp else None
    return _Line(
        stream=match.group("id"),
        role=match.group("role"),
        end_s=decimal(match.group("end"), "iperf3 interval end"),
        rate_bps=_rate(match.group("rate"), match.group("rate_unit")),
        label=label.group(1) if label else None,
        retransmits=int(retransmits.group(1)) if retransmits else None,
        jitter_ms=float(decimal(udp.group("jitter"), "iperf3 jitter")) if udp else None,
        lost=int(lost) if lost and lost.isdigit() else None,
        total=int(udp.group("total")) if udp else None,
    )


def _rate(value: str, unit: str) -> Number:
    prefix = unit[0] if unit[0] in "KMGT" else ""
    if "bits" in unit:
        return exact(decimal(value, "iperf3 rate") * _BIT_PREFIX[prefix])
    return exact(decimal(value, "iperf3 rate") * _BYTE_PREFIX[prefix] * BITS_PER_BYTE)


def _side(lines: list[_Line], label: str | None) -> _Line | None:
    """The [SUM] line of one side, or its only stream line; several stream lines without
    a [SUM] line are added up."""
    tagged = [line for line in lines if line.label == label]
    total = next((line for line in tagged if line.stream == "SUM"), None)
    if total is not None or len(tagged) <= 1:
        return total or (tagged[0] if tagged else None)
    first = tagged[0]
    return _Line(
        stream="SUM",
        role=first.role,
        end_s=max(line.end_s for line in tagged),
        rate_bps=sum(line.rate_bps for line in tagged),
        label=label,
        retransmits=None,
        jitter_ms=None,
        lost=None,
        total=None,
    )


def _measured(line: _Line | None, other: _Line | None) -> Number | None:
    """A 0 bits/s line beside a measured other side was not measured by this host."""
    if line is None:
        return None
    if line.rate_bps == 0 and ((other is not None and other.rate_bps) or line.total):
        return None
    return line.rate_bps


def _loss(line: _Line | None) -> float | None:
    if line is None or line.total is None or line.lost is None or line.total == 0:
        return None
    return line.lost * 100 / line.total


def _reverse(lines: list[str]) -> bool | None:
    if any(line.startswith("Reverse mode, remote host ") for line in lines):
        return True
    if any(line.startswith("Connecting to host ") for line in lines):
        return False
    return None


def _role(lines: list[str], summary: list[_Line]) -> str | None:
    roles = {line.role[-1] for line in summary if line.role}
    if roles == {"C"} or any(line.startswith("Connecting to host ") for line in lines):
        return "client"
    if roles == {"S"} or any(line.startswith("Accepted connection from ") for line in lines):
        return "server"
    return None
