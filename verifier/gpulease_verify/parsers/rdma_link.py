"""`rdma link show` (text) and `rdma -j link show` (JSON) from iproute2.

Text lines look like ``link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1f0``
(InfiniBand ports add subnet_prefix/lid/sm_lid/lmc and have no netdev; -d adds indented
detail lines). The JSON form is a list of objects with ifname, port, state, physical_state
and netdev. physical_state is reported in the same vocabulary as ibstatus (LINK_UP ->
LINKUP) so that the two probes compare directly.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from .base import ParseError, integer, one_line, storable
from .checks import name, readable


@dataclass(frozen=True)
class RdmaLink:
    device: str
    port: int
    state: str | None
    physical_state: str | None
    netdev: str | None


@dataclass(frozen=True)
class RdmaLinksResult:
    links: tuple[RdmaLink, ...]


# "link mlx5_0/1 state ...", "link mlx5_0/1: state ..." (MLNX iproute2) and, from newer
# iproute2, "8/1: mlx5_bond_0/1: state ..." (ifindex/port prefix, no "link" word).
_LINK_LINE = re.compile(r"^(?:\d+/\d+:\s+)?(?:link\s+)?([^\s/]+)/(\d{1,20}):?(\s.*)$")


_JSON_START = re.compile(r"\{|\[\s*[{\]]")


def parse_rdma_link(text: str) -> RdmaLinksResult:
    stripped = readable(text, "rdma link").strip()
    if _JSON_START.match(stripped):
        # rdma -j prints one JSON array ("[ {" with -p); a shell prompt "[root@host ~]#" is text.
        return _parse_json(stripped)
    return _parse_text(text)


def _parse_text(text: str) -> RdmaLinksResult:
    links = []
    for line in text.splitlines():
        match = _LINK_LINE.match(line.strip())
        if not match:
            continue
        words = match.group(3).split()
        if "state" not in words:
            continue
        values = dict(itertools.pairwise(words))
        links.append(
            RdmaLink(
                device=match.group(1),
                port=_port(integer(match.group(2), "rdma link port")),
                state=_state(values.get("state")),
                physical_state=_physical_state(values.get("physical_state")),
                netdev=values.get("netdev"),
            )
        )
    if not links:
        first = next((line for line in text.splitlines() if line.strip()), "")
        raise ParseError(f"no 'link DEVICE/PORT' line in rdma link output: {one_line(first)!r}")
    return RdmaLinksResult(links=tuple(links))


def _parse_json(text: str) -> RdmaLinksResult:
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except ParseError:
        raise
    except json.JSONDecodeError as error:
        raise ParseError(f"rdma -j link JSON is truncated or invalid: {error.msg}") from None
    except ValueError:  # an integer of more than 4300 digits
        raise ParseError("rdma -j link JSON holds a number too long to be rdma output") from None
    except RecursionError:
        raise ParseError("rdma -j link JSON is nested too deeply to be rdma output") from None
    entries = document if isinstance(document, list) else [document]
    links = [_json_link(entry) for entry in entries]
    if not links:
        raise ParseError("rdma -j link output lists no link")
    return RdmaLinksResult(links=tuple(links))


def _json_link(entry: Any) -> RdmaLink:
    if not isinstance(entry, dict):
        raise ParseError("rdma -j link entry is not an object")
    device = entry.get("ifname")
    port = entry.get("port")
    if not isinstance(device, str) or not isinstance(port, int) or isinstance(port, bool):
        raise ParseError("rdma -j link entry lacks ifname or port")
    netdev = entry.get("netdev")
    return RdmaLink(
        device=name(device, "rdma -j link ifname"),
        port=_port(port),
        state=_state(_word(entry.get("state"), "state")),
        physical_state=_physical_state(_word(entry.get("physical_state"), "physical_state")),
        netdev=name(netdev, "rdma -j link netdev") if isinstance(netdev, str) else None,
    )


def _reject_constant(constant: str) -> Any:
    raise ParseError(f"rdma -j link JSON contains {constant}, not a value rdma prints")


def _port(port: int) -> int:
    return int(storable(port, "rdma link port"))


def _word(value: Any, what: str) -> str | None:
    """A state as rdma prints it (DOWN, LINK_UP, ...), or None when absent."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z_ ]{1,40}", value):
        raise ParseError(f"rdma -j link {what} {str(value)[:40]!r} is not a port state")
    return value


def _state(value: str | None) -> str | None:
    return value.upper() if value else None


def _physical_state(value: str | None) -> str | None:
    return re.sub(r"[\s_]+", "", value).upper() if value else None
