"""`ibstatus` and `ibstat` output (linux-rdma/rdma-core infiniband-diags).

ibstatus is a shell script that prints the sysfs port files verbatim:
``state: 4: ACTIVE``, ``phys state: 5: LinkUp``, ``rate: 100 Gb/sec (4X EDR)``.
ibstat prints libibumad's view: ``State: Active``, ``Physical state: LinkUp``,
``Rate: 100`` (Gb/s; "2.5" for 1X SDR, "40 (FDR10)" for FDR10).

Both become the same ports result, with states in one vocabulary: state ACTIVE, DOWN, INIT,
ARMED, ACTIVE_DEFER; phys_state upper case without spaces (LINKUP, POLLING, DISABLED, ...).
A port whose physical link is not up reports the slowest rate it could train to, which is
not a rate the link runs at: rate_bps is None for such a port.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import GIGA, Number, ParseError, decimal, exact, integer, one_line, storable
from .checks import readable


@dataclass(frozen=True)
class IbPort:
    device: str
    port: int
    state: str | None
    phys_state: str | None
    rate_bps: Number | None
    link_layer: str | None


@dataclass(frozen=True)
class IbPortsResult:
    ports: tuple[IbPort, ...]


_IBSTATUS_PORT = re.compile(r"^\s*Infiniband device '([^']+)' port (\d{1,20}) status:\s*$")
_IBSTATUS_FIELD = re.compile(
    r"^\s+(default gid|base lid|sm lid|state|phys state|rate|link_layer):\s*(.*)$"
)
_IBSTAT_CA = re.compile(r"^\s*CA '([^']+)'\s*$")
_IBSTAT_PORT = re.compile(r"^\s*Port (\d{1,20}):\s*$")
_IBSTAT_FIELD = re.compile(r"^\s+(State|Physical state|Rate|Link layer):\s*(.*)$")
_IBSTAT_STATES = {
    "down": "DOWN",
    "initializing": "INIT",
    "init": "INIT",
    "armed": "ARMED",
    "active": "ACTIVE",
    "active defer": "ACTIVE_DEFER",
}
_LINK_LAYERS = {"infiniband": "InfiniBand", "ib": "InfiniBand", "ethernet": "Ethernet"}


def parse_ibstatus(text: str) -> IbPortsResult:
    readable(text, "ibstatus")
    ports: list[IbPort] = []
    current: dict[str, str] | None = None
    for line in text.splitlines():
        header = _IBSTATUS_PORT.match(line)
        if header:
            if current is not None:
                ports.append(_ibstatus_port(current))
            current = {"device": header.group(1), "port": header.group(2)}
            continue
        field = _IBSTATUS_FIELD.match(line)
        if field and current is not None:
            current[field.group(1)] = field.group(2).strip()
    if current is not None:
        ports.append(_ibstatus_port(current))
    if not ports:
        raise ParseError(f"no ibstatus port found{_first_line_hint(text)}")
    return IbPortsResult(ports=tuple(ports))


def parse_ibstat(text: str) -> IbPortsResult:
    readable(text, "ibstat")
    ports: list[IbPort] = []
    device: str | None = None
    current: dict[str, str] | None = None
    for line in text.splitlines():
        ca = _IBSTAT_CA.match(line)
        if ca:
            if current is not None:
                ports.append(_ibstat_port(current))
                current = None
            device = ca.group(1)
            continue
        port = _IBSTAT_PORT.match(line)
        if port and device is not None:
            if current is not None:
                ports.append(_ibstat_port(current))
            current = {"device": device, "port": port.group(1)}
            continue
        field = _IBSTAT_FIELD.match(line)
        if field and current is not None:
            current[field.group(1)] = field.group(2).strip()
    if current is not None:
        ports.append(_ibstat_port(current))
    if not ports:
        raise ParseError(f"no ibstat port found{_first_line_hint(text)}")
    return IbPortsResult(ports=tuple(ports))


_FAILURE = re.compile(r"(panic|error|fail|cannot|can't|no such|not found)", re.IGNORECASE)


def _first_line_hint(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    hint = next((line for line in lines if _FAILURE.search(line)), lines[0] if lines else "")
    return f": {one_line(hint)}" if hint else " (empty input)"


def _ibstatus_port(fields: dict[str, str]) -> IbPort:
    phys_state = _sysfs_state(fields.get("phys state"), "phys state")
    state = _sysfs_state(fields.get("state"), "state")
    rate = _ibstatus_rate(fields.get("rate"))
    return IbPort(
        device=fields["device"],
        port=_port(fields["port"], "ibstatus port"),
        state=state,
        phys_state=_word(phys_state),
        rate_bps=rate if phys_state is not None and _word(phys_state) == "LINKUP" else None,
        link_layer=_link_layer(fields.get("link_layer")),
    )


def _ibstat_port(fields: dict[str, str]) -> IbPort:
    state_text = fields.get("State")
    state = None
    if state_text and state_text != "???":
        state = _IBSTAT_STATES.get(state_text.lower(), _word(state_text))
    phys_state = fields.get("Physical state")
    phys_word = _word(phys_state) if phys_state and phys_state != "???" else None
    rate = _ibstat_rate(fields.get("Rate"))
    return IbPort(
        device=fields["device"],
        port=_port(fields["port"], "ibstat port"),
        state=state,
        phys_state=phys_word,
        rate_bps=rate if phys_word == "LINKUP" else None,
        link_layer=_link_layer(fields.get("Link layer")),
    )


def _port(text: str, what: str) -> int:
    port = integer(text, what)
    if not 0 <= port <= 255:  # an 8-bit field in IBA; port 0 is a switch's own port
        raise ParseError(f"{what} {port} is not an InfiniBand port number (0 to 255)")
    return port


def _sysfs_state(value: str | None, what: str) -> str | None:
    """ "4: ACTIVE" -> "ACTIVE"; "unknown" (file unreadable) -> None."""
    if value is None or value.lower() == "unknown":
        return None
    match = re.fullmatch(r"\d+:\s*(.+)", value)
    if not match:
        raise ParseError(f"ibstatus {what} {value!r} is not 'N: NAME'")
    return match.group(1).strip().upper().replace(" ", "_")


def _word(value: str | None) -> str | None:
    if value is None:
        return None
    return re.sub(r"[\s_]+", "", value).upper()


def _ibstatus_rate(value: str | None) -> Number | None:
    if value is None or value.lower() == "unknown":
        return None
    match = re.match(r"([\d.]+)\s*Gb/sec\b", value)
    if not match:
        raise ParseError(f"ibstatus rate {value!r} is not 'N Gb/sec (...)'")
    return storable(exact(decimal(match.group(1), "ibstatus rate") * GIGA), "ibstatus rate")


def _ibstat_rate(value: str | None) -> Number | None:
    if value is None:
        return None
    match = re.match(r"([\d.]+)(\s*\(FDR10\))?\s*$", value)
    if not match:
        raise ParseError(f"ibstat rate {value!r} is not a number of Gb/s")
    return storable(exact(decimal(match.group(1), "ibstat rate") * GIGA), "ibstat rate")


def _link_layer(value: str | None) -> str | None:
    if not value:
        return None
    return _LINK_LAYERS.get(value.strip().lower(), value.strip())
