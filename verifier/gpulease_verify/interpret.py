"""From a run's raw output to its parsed result, headline figure and verdict.

Pure: the same raw output and terms always give the same answer, so a stored run can be
re-judged, by the server and by an auditor from an audit bundle. Garbage raises
ParseError with the reason. The server's ``benchmarks.probes.interpret`` is this module.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gpulease_verify import verdicts
from gpulease_verify.parsers import (
    ParseError,
    parse_counters,
    parse_ethtool,
    parse_ibstatus,
    parse_iperf3,
    parse_nccl_tests,
    parse_perftest,
    parse_ping,
    to_dict,
)
from gpulease_verify.parsers.perftest import PerftestBandwidthResult, PerftestLatencyResult

GIGA = 10**9

# The tool names stored on runs (``benchmarks.choices.Tool`` holds the same values).
ETHTOOL = "ethtool"
IBSTATUS = "ibstatus"
COUNTERS = "counters"
IPERF3 = "iperf3"
IB_WRITE_BW = "ib_write_bw"
PING = "ping"
IB_WRITE_LAT = "ib_write_lat"
ALL_REDUCE_PERF = "all_reduce_perf"
# Link layers of a port (``leases.choices.LinkLayer``).
INFINIBAND = "infiniband"
ETHERNET = "ethernet"

SECTION = re.compile(r"^### (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class PlanPort:
    device: str
    port: int
    netdev: str
    address: str | None
    link_layer: str
    rate_gbps: int


@dataclass(frozen=True)
class PlanNode:
    hostname: str
    leaf: str
    gpus: int
    ports: tuple[PlanPort, ...]

    @property
    def data_address(self) -> str | None:
        return next((port.address for port in self.ports if port.address), None)

    @property
    def rdma_port(self) -> PlanPort | None:
        return next((port for port in self.ports if port.device.startswith("mlx")), None)


def split_sections(text: str) -> dict[str, str]:
    """A node check's raw output cut at its '### label' header lines: label -> text."""
    found = list(SECTION.finditer(text))
    return {
        match.group(1).strip(): text[
            match.end() + 1 : found[i + 1].start() if i + 1 < len(found) else len(text)
        ]
        for i, match in enumerate(found)
    }


@dataclass(frozen=True)
class Interpretation:
    parsed: dict[str, Any]
    judgement: verdicts.Judgement
    measured_bps: int | None = None
    latency_us: float | None = None
    notes: list[str] = field(default_factory=list)


def interpret(
    *,
    tool: str,
    raw_output: str,
    terms: verdicts.TermsView,
    node: PlanNode | None = None,
    previous_link_down: dict[str, int] | None = None,
) -> Interpretation:
    if tool == IPERF3:
        result = parse_iperf3(raw_output)
        measured = int(result.received_bps or 0)
        return Interpretation(
            to_dict(result), verdicts.throughput(measured_bps=measured, terms=terms), measured
        )
    if tool == IB_WRITE_BW:
        bandwidth = parse_perftest(raw_output)
        if not isinstance(bandwidth, PerftestBandwidthResult):
            raise ParseError("ib_write_bw printed a latency test's output, not a bandwidth")
        measured = int(bandwidth.bw_avg_bps or 0)
        return Interpretation(
            to_dict(bandwidth), verdicts.throughput(measured_bps=measured, terms=terms), measured
        )
    if tool == PING:
        ping = parse_ping(raw_output)
        judgement = verdicts.latency(measured_us=ping.rtt_avg_us, terms=terms)
        return Interpretation(to_dict(ping), judgement, latency_us=ping.rtt_avg_us)
    if tool == IB_WRITE_LAT:
        lat = parse_perftest(raw_output)
        if not isinstance(lat, PerftestLatencyResult):
            raise ParseError("ib_write_lat printed a bandwidth test's output, not a latency")
        typical = lat.t_typical_us if lat.t_typical_us is not None else lat.t_avg_us
        if typical is None:
            raise ParseError("the latency test printed no typical or average latency")
        judgement = verdicts.latency(measured_us=float(typical), terms=terms)
        return Interpretation(to_dict(lat), judgement, latency_us=float(typical))
    if tool == ALL_REDUCE_PERF:
        nccl = parse_nccl_tests(raw_output)
        busbw = nccl.avg_busbw_bps if nccl.avg_busbw_bps is not None else nccl.peak_busbw_bps
        if busbw is None:
            raise ParseError("nccl-tests printed no bus bandwidth")
        return Interpretation(
            to_dict(nccl), verdicts.collective(busbw_bps=busbw, terms=terms), int(busbw)
        )
    if node is None:
        raise ValueError(f"{tool} needs the node it ran on")
    if tool == COUNTERS:
        return _counters(raw_output, node)
    return _link(tool, raw_output, node, terms, previous_link_down or {})


def _section_int(sections: dict[str, str], label: str) -> int | None:
    text = sections.get(label, "").strip()
    return int(text) if text.isdigit() else None


def port_state(entry: dict[str, Any]) -> verdicts.PortState:
    """A parsed link port back as the verdict reads it (``expected_bps`` and
    ``previous_link_down_count`` are there on runs parsed since they were stored)."""
    return verdicts.PortState(
        label=entry["label"],
        up=bool(entry["up"]),
        speed_bps=entry.get("speed_bps"),
        expected_bps=entry.get("expected_bps", 0),
        link_down_count=entry.get("link_down_count"),
        previous_link_down_count=entry.get("previous_link_down_count"),
    )


def _link(
    tool: str,
    raw_output: str,
    node: PlanNode,
    terms: verdicts.TermsView,
    previous: dict[str, int],
) -> Interpretation:
    sections = split_sections(raw_output)
    if not sections:
        raise ParseError("the link check printed none of its sections")
    states: list[verdicts.PortState] = []
    for port in node.ports:
        if port.link_layer == INFINIBAND:
            label = f"{port.device}:{port.port}"
            parsed = parse_ibstatus(sections.get(f"ibstatus {label}", ""))
            match = next((p for p in parsed.ports if p.port == port.port), None)
            if match is None:
                raise ParseError(f"ibstatus did not report port {label}")
            up, speed = match.state == "ACTIVE", match.rate_bps
            downs = _section_int(sections, f"link_downed {label}")
        elif port.netdev:
            label = port.netdev
            ethtool = parse_ethtool(sections.get(f"ethtool {label}", ""))
            up, speed = bool(ethtool.link_detected), ethtool.speed_bps
            downs = _section_int(sections, f"carrier_down_count {label}")
        else:
            continue
        states.append(
            verdicts.PortState(
                label=label,
                up=up,
                speed_bps=speed,
                expected_bps=port.rate_gbps * GIGA,
                link_down_count=downs,
                previous_link_down_count=previous.get(label),
            )
        )
    parsed_ports = [
        {
            "label": s.label,
            "up": s.up,
            "speed_bps": s.speed_bps,
            "expected_bps": s.expected_bps,
            "link_down_count": s.link_down_count,
            "previous_link_down_count": s.previous_link_down_count,
        }
        for s in states
    ]
    return Interpretation({"ports": parsed_ports}, verdicts.link(ports=states, terms=terms))


def _counters(raw_output: str, node: PlanNode) -> Interpretation:
    sections = split_sections(raw_output)
    ports = []
    for label, text in sections.items():
        result = parse_counters(text)
        for port in result.ports:
            entry = to_dict(port)
            entry["section"] = label
            ports.append(entry)
    if not ports:
        raise ParseError("the counters probe printed no counter")
    traffic = ", ".join(
        f"{port['name']}: rx {port['rx_bytes']} B, tx {port['tx_bytes']} B"
        for port in ports
        if port.get("rx_bytes") is not None
    )
    judgement = verdicts.Judgement(
        verdicts.Verdict.NONE, "counters are recorded for metering", traffic
    )
    return Interpretation({"ports": ports}, judgement)


__all__ = [
    "Interpretation",
    "PlanNode",
    "PlanPort",
    "interpret",
    "port_state",
    "split_sections",
]
