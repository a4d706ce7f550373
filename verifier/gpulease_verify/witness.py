"""The switch-side witness of a throughput probe: what the switch port of the sending node
counted while the probe ran, against what the node's tool reported.

The tenant has root on its nodes, so a node can print any figure; the leaf switch is the
provider's. gpulease reads the client node's switch port (IF-MIB ``ifHCInOctets``: what
the node sent into the fabric) just before and just after the probe, and keeps both
readings in the run's parsed result under ``"witness"``.

**v2 (bytes):** the block also carries ``host_bytes``, what the tool says the client sent
over the whole run, its omitted first second included (``gpulease_verify.probe_tax``: the
bytes the probe tax keeps out of metering); the switch's octets between the two readings
must agree with it within the terms' tolerance. Both count the same bytes whatever the
rate did within the run (the switch adds a frame header per packet: 0.7 % at MTU 9000,
4.6 % at 1500). **v1 (rates)**, the blocks written before: the switch's octets over the
seconds the tool was sending against the tool's figure, which leaves the first second
out, so concurrent flows still settling their shares in that second could differ by
more than the tolerance although nobody lied; v1 blocks are still judged by v1.

When the two disagree, the run is *disputed*: it gets no verdict, so it neither passes
nor earns a credit, and a measurement-integrity incident asks a person to resolve it.

The block is part of the run's hashed content, so an auditor recomputes the agreement
from the readings and the tolerance it carries, with this module (and, given the raw
output, recomputes ``host_bytes`` too).
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gpulease_verify.health import witness_check
from gpulease_verify.telemetry import PortSample
from gpulease_verify.units import format_bps
from gpulease_verify.verdicts import Judgement, Verdict

RULE = "witness_disagreement"
VERSION = 2  # v1: a block without host_bytes, judged by rates
KEY = "witness"
HOST_BYTES = "host_bytes"


def throughput_block(
    *,
    switch: str,
    port: str,
    in_octets_before: int,
    in_octets_after: int,
    seconds: float,
    measured_bps: int,
    tolerance_percent: Decimal | str,
    host_bytes: int | None = None,
) -> dict[str, Any]:
    """The witness block a throughput run's parsed result carries (v2 with
    ``host_bytes``, the bytes the tool says the client sent)."""
    block: dict[str, Any] = {
        "switch": switch,
        "port": port,
        "in_octets_before": int(in_octets_before),
        "in_octets_after": int(in_octets_after),
        "seconds": str(Decimal(str(seconds)).quantize(Decimal("0.001"))),
        "tolerance_percent": str(Decimal(str(tolerance_percent))),
    }
    if host_bytes is not None:
        block[HOST_BYTES] = int(host_bytes)
    block["agrees"] = agrees(block, measured_bps)
    return block


def switch_octets(block: Mapping[str, Any]) -> int:
    """What the switch port counted between the two readings; negative when its counter
    went backwards (the switch rebooted)."""
    return int(block["in_octets_after"]) - int(block["in_octets_before"])


def version_of(block: Mapping[str, Any]) -> int:
    return 2 if HOST_BYTES in block else 1


def switch_bps(block: Mapping[str, Any]) -> int:
    """The switch's rate over the probe: octets x 8 / seconds, whole bits per second. A
    counter that went backwards (the switch rebooted) gives 0: no witness figure."""
    octets = int(block["in_octets_after"]) - int(block["in_octets_before"])
    seconds = Decimal(str(block["seconds"]))
    if octets < 0 or seconds <= 0:
        return 0
    return int(Decimal(octets) * 8 / seconds)


def agrees(block: Mapping[str, Any], measured_bps: int) -> bool:
    tolerance = Decimal(str(block["tolerance_percent"]))
    if version_of(block) == 2:
        octets = switch_octets(block)
        return witness_check(
            host_value=int(block[HOST_BYTES]),
            switch_value=max(octets, 0),
            tolerance_percent=tolerance,
        ).agrees
    return witness_check(
        host_value=measured_bps, switch_value=switch_bps(block), tolerance_percent=tolerance
    ).agrees


def judge(judgement: Judgement, parsed: Mapping[str, Any] | None, measured_bps: int) -> Judgement:
    """The judgement a run gets once its witness is taken into account: unchanged when it
    has no witness or the witness agrees; no verdict, with the two figures, when not."""
    block = (parsed or {}).get(KEY)
    if not isinstance(block, Mapping) or agrees(block, measured_bps):
        return judgement
    where = f"its switch port {block['switch']} {block['port']}"
    tolerance = f"(tolerance {block['tolerance_percent']}%)"
    if version_of(block) == 2:
        reason = (
            f"disputed: the node reported sending {int(block[HOST_BYTES]):,} bytes "
            f"({format_bps(measured_bps)}), {where} counted {max(switch_octets(block), 0):,} "
            f"{tolerance}; neither pass nor credit until resolved"
        )
    else:
        reason = (
            f"disputed: the node reported {format_bps(measured_bps)}, {where} counted "
            f"{format_bps(switch_bps(block))} {tolerance}; neither pass nor credit until "
            "resolved"
        )
    return Judgement(Verdict.NONE, f"{RULE} v{version_of(block)}", reason)


def without_witness(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """The parsed result as the tool's output alone gives it (the re-parse check)."""
    return {key: value for key, value in parsed.items() if key != KEY}


# --- the link state of a node's port, held against its switch port ---------------------
#
# At each telemetry poll gpulease reads the node's switch port: ifOperStatus and
# ifLastChange (RFC 2863: the agent's sysUpTime when the port entered its current state)
# with sysUpTime. A down the host reports between two polls (a down at the poll, or a
# down-then-up cycle its counters show) is a change of the link's state, which the
# switch port sees too: it was down at one of the two readings, or its ifLastChange
# moved between them. When neither, the switch never saw the link change, the host's
# down is disputed, and no rule or availability figure counts it.

LINK_RULE = "witness_link_state"
LINK_VERSION = 1


def link_block(
    *,
    node: str,
    host_port: str,
    oper_up: bool,
    last_change: int,
    uptime: int,
    since_oper_up: bool,
    since_last_change: int,
    since_uptime: int,
) -> dict[str, Any]:
    """The link-state part of a switch reading as a telemetry batch holds it: the node
    and port it witnesses, ifOperStatus, ifLastChange and sysUpTime (TimeTicks, 1/100 s)
    as the interval is judged (read again a few seconds later when the first reading did
    not confirm a down: agents refresh their tables every few seconds), and the previous
    poll's reading, which this one is held against."""
    return {
        "node": node,
        "host_port": host_port,
        "oper_up": bool(oper_up),
        "last_change": int(last_change),
        "uptime": int(uptime),
        "since": {
            "oper_up": bool(since_oper_up),
            "last_change": int(since_last_change),
            "uptime": int(since_uptime),
        },
    }


def switch_saw_change(link: Mapping[str, Any]) -> bool | None:
    """Whether the switch port's state changed between the two readings: down at either,
    or ifLastChange moved. None when it cannot tell: sysUpTime went backwards (the agent
    restarted, or its 497-day counter wrapped)."""
    since = link["since"]
    if int(link["uptime"]) < int(since["uptime"]):
        return None
    return (
        not bool(since["oper_up"])
        or not bool(link["oper_up"])
        or int(link["last_change"]) != int(since["last_change"])
    )


def link_state_dispute(
    host: PortSample, *, switch: str, port: str, link: Mapping[str, Any]
) -> str | None:
    """The sentence disputing ``host`` (the node's interval ending at this poll) when it
    reports a down its switch port never saw; None when the two agree or the switch
    cannot tell. A host that reports its link up throughout is never disputed here: an
    agent can register a transition seconds late, which would blame the next interval,
    and a host hiding an outage forgoes its own credit."""
    if not (host.up is False or host.down_cycles > 0):
        return None
    if switch_saw_change(link) is not False:
        return None
    claimed = "down at the poll" if host.up is False else f"{host.down_cycles} down cycle(s)"
    return (
        f"{host.port} reported {claimed} between {host.start:%H:%M:%S} and "
        f"{host.at:%H:%M:%S} UTC; switch {switch} {port} was up at both readings and its "
        f"ifLastChange stayed {int(link['last_change'])}: the switch never saw the link change"
    )
