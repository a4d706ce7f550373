"""Pure parsers for the outputs of the network probe tools.

Each parser takes the tool's text and returns a frozen dataclass whose bandwidths are in
bits per second, or raises ParseError with a one-line reason. Nothing here imports Django.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .base import ParseError, RunFailed
from .counters import CountersResult, parse_counters
from .ethtool import EthtoolResult, parse_ethtool
from .ibstatus import IbPortsResult, parse_ibstat, parse_ibstatus
from .iperf3 import Iperf3Result, parse_iperf3
from .nccl_tests import NcclTestsResult, parse_nccl_tests
from .perftest import PerftestResult, parse_perftest
from .ping import PingResult, parse_ping
from .rdma_link import RdmaLinksResult, parse_rdma_link

ProbeResult = (
    Iperf3Result
    | PerftestResult
    | NcclTestsResult
    | IbPortsResult
    | RdmaLinksResult
    | EthtoolResult
    | CountersResult
    | PingResult
)

PARSERS: dict[str, Callable[[str], Any]] = {
    "iperf3": parse_iperf3,
    "perftest": parse_perftest,
    "nccl-tests": parse_nccl_tests,
    "ibstatus": parse_ibstatus,
    "ibstat": parse_ibstat,
    "rdma-link": parse_rdma_link,
    "ethtool": parse_ethtool,
    "counters": parse_counters,
    "ping": parse_ping,
}

__all__ = [
    "PARSERS",
    "ParseError",
    "ProbeResult",
    "RunFailed",
    "parse",
    "parse_counters",
    "parse_ethtool",
    "parse_ibstat",
    "parse_ibstatus",
    "parse_iperf3",
    "parse_nccl_tests",
    "parse_perftest",
    "parse_ping",
    "parse_rdma_link",
    "to_dict",
]


def parse(tool: str, text: str) -> ProbeResult:
    """Parse `text` as the output of `tool` (one of PARSERS)."""
    parser = PARSERS.get(tool)
    if parser is None:
        raise ParseError(f"unknown tool {tool!r}; known tools: {', '.join(PARSERS)}")
    if not isinstance(text, str):
        raise ParseError(f"{tool} output must be text, not {type(text).__name__}")
    result: ProbeResult = parser(text)
    return result


def to_dict(result: ProbeResult) -> dict[str, Any]:
    """The result as a JSON-ready dict (nested rows become lists of dicts)."""
    if not dataclasses.is_dataclass(result) or isinstance(result, type):
        raise TypeError(f"not a parser result: {result!r}")
    return _json_ready(dataclasses.asdict(result))


def _json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    return value
