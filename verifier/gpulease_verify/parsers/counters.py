"""NIC counters: `ethtool -S IFACE` output, or a dump of the InfiniBand sysfs port counters.

Input formats:

- ethtool -S: "NIC statistics:" then "     name: value" lines. ethtool does not print the
  interface name, so a block may be preceded by a line "# ethtool -S IFACE" naming it;
  several blocks may be concatenated.
- sysfs: the output of ``grep -H . /sys/class/infiniband/*/ports/*/counters/*`` (hw_counters
  too), one "path:value" line per counter.
- netdev: the output of ``grep -H . /sys/class/net/IFACE/statistics/* \
  /sys/class/net/IFACE/carrier_down_count``: the kernel's own counters of any interface
  (veth, virtio, ...), in bytes; carrier_down_count counts link-down events.

Normalised fields, None when the source has no such counter:

- InfiniBand port_rcv_data / port_xmit_data count units of 4 octets (IBA PortCounters,
  "divided by 4"; Linux sysfs-class-infiniband ABI), so bytes are the value times 4.
  Ports without extended counters expose 32-bit (bytes), 16-bit (errors) and 8-bit
  (link_downed) counters that stop at their maximum: a saturated counter no longer counts,
  so its normalised field is None (the raw value stays in `raw`).
- mlx5 (ConnectX) Ethernet: the *_phy counters describe the physical port and include RDMA
  (RoCE) traffic, which the software rx_bytes/tx_bytes do not see; they are preferred.
  rx_errors is the driver's rx_errors, else the sum of the mlx5 physical receive error
  counters present. Pause frames: rx/tx_pause_ctrl_phy (global 802.3x pause) and the sum
  of rx/tx_prioN_pause (PFC, per priority) are reported separately.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .base import MAX_FIGURE, ParseError, one_line, storable
from .checks import readable


@dataclass(frozen=True)
class PortCounters:
    name: str | None
    device: str | None
    port: int | None
    interface: str | None
    rx_bytes: int | None
    tx_bytes: int | None
    rx_errors: int | None
    tx_errors: int | None
    link_downed: int | None
    rx_pause_frames: int | None
    tx_pause_frames: int | None
    rx_pfc_pause_frames: int | None
    tx_pfc_pause_frames: int | None
    raw: dict[str, int] = field(hash=False)


@dataclass(frozen=True)
class CountersResult:
    source: str
    ports: tuple[PortCounters, ...]


_SYSFS_LINE = re.compile(
    r"^/sys/class/infiniband/([^/\s]+)/ports/(\d{1,20})/(?:hw_)?counters/([^:/\s]+):\s*(.*)$"
)
_NETDEV_LINE = re.compile(r"^/sys/class/net/([^/\s]+)/(?:statistics/)?([a-z_]+):\s*(.*)$")
_ETHTOOL_HEADER = re.compile(r"^\s*NIC statistics:\s*$")
_ETHTOOL_NAME = re.compile(r"^\s*(?:#\s*)?(?:\$\s*)?(?:sudo\s+)?ethtool\s+-S\s+(\S+)\s*$")
_ETHTOOL_COUNTER = re.compile(r"^\s+(\S[^:\[\]]*?):\s*(\d+)\s*$")
_INTEGER = re.compile(r"\d+")

_FIGURES = (
    "rx_bytes",
    "tx_bytes",
    "rx_errors",
    "tx_errors",
    "link_downed",
    "rx_pause_frames",
    "tx_pause_frames",
    "rx_pfc_pause_frames",
    "tx_pfc_pause_frames",
)
_IB_WIDTH_BITS = {
    "port_rcv_data": 32,
    "port_xmit_data": 32,
    "port_rcv_errors": 16,
    "port_xmit_discards": 16,
    "link_downed": 8,
}
_MLX5_RX_ERRORS = (
    "rx_crc_errors_phy",
    "rx_symbol_err_phy",
    "rx_in_range_len_errors_phy",
    "rx_out_of_range_len_phy",
    "rx_oversize_pkts_phy",
    "rx_undersize_pkts_phy",
    "rx_fragments_phy",
    "rx_jabbers_phy",
)


def parse_counters(text: str) -> CountersResult:
    lines = readable(text, "counters").splitlines()
    if any(_SYSFS_LINE.match(line.strip()) for line in lines):
        return CountersResult(source="sysfs", ports=_sysfs_ports(lines))
    if any(_NETDEV_LINE.match(line.strip()) for line in lines):
        return CountersResult(source="netdev", ports=_netdev_ports(lines))
    if any(_ETHTOOL_HEADER.match(line) for line in lines):
        return CountersResult(source="ethtool", ports=_ethtool_ports(lines))
    first = next((line for line in lines if line.strip()), "empty input")
    raise ParseError(
        "neither 'ethtool -S' output nor a /sys/class/infiniband or /sys/class/net counters "
        f"dump: {one_line(first)}"
    )


def _sysfs_ports(lines: list[str]) -> tuple[PortCounters, ...]:
    counters: dict[tuple[str, int], dict[str, int]] = {}
    for line in lines:
        match = _SYSFS_LINE.match(line.strip())
        if not match:
            continue
        device, port, name, value = match.groups()
        table = counters.setdefault((device, int(storable(int(port), "IB port"))), {})
        _keep(table, name, value)
    return tuple(_checked(_ib_port(device, port, raw)) for (device, port), raw in counters.items())


def _netdev_ports(lines: list[str]) -> tuple[PortCounters, ...]:
    counters: dict[str, dict[str, int]] = {}
    for line in lines:
        match = _NETDEV_LINE.match(line.strip())
        if match:
            _keep(counters.setdefault(match.group(1), {}), match.group(2), match.group(3))
    if not any(counters.values()):
        raise ParseError("the /sys/class/net dump holds no counter value")
    return tuple(
        _checked(
            PortCounters(
                name=interface,
                device=None,
                port=None,
                interface=interface,
                rx_bytes=raw.get("rx_bytes"),
                tx_bytes=raw.get("tx_bytes"),
                rx_errors=raw.get("rx_errors"),
                tx_errors=raw.get("tx_errors"),
                link_downed=raw.get("carrier_down_count"),
                rx_pause_frames=None,
                tx_pause_frames=None,
                rx_pfc_pause_frames=None,
                tx_pfc_pause_frames=None,
                raw=raw,
            )
        )
        for interface, raw in counters.items()
    )


def _keep(table: dict[str, int], name: str, text: str) -> None:
    """Record a counter whose value is a whole number (other values are not counts)."""
    value = text.strip()
    if not _INTEGER.fullmatch(value):
        return
    if len(value) > 20:
        raise ParseError(f"counter {name[:60]!r} has {len(value)} digits: not a 64-bit counter")
    table[name] = int(value)


def _checked(port: PortCounters) -> PortCounters:
    """The port if its figures can be stored; `raw` keeps only the values a row can hold."""
    for column in _FIGURES:
        value = getattr(port, column)
        if value is not None:
            storable(value, f"counter {column} of {port.name or 'the port'}")
    kept = {name: value for name, value in port.raw.items() if value <= MAX_FIGURE}
    return replace(port, raw=kept)


def _ib_port(device: str, port: int, raw: dict[str, int]) -> PortCounters:
    return PortCounters(
        name=f"{device}/{port}",
        device=device,
        port=port,
        interface=None,
        rx_bytes=_times_four(_unsaturated(raw, "port_rcv_data")),
        tx_bytes=_times_four(_unsaturated(raw, "port_xmit_data")),
        rx_errors=_unsaturated(raw, "port_rcv_errors"),
        tx_errors=_unsaturated(raw, "port_xmit_discards"),
        link_downed=_unsaturated(raw, "link_downed"),
        rx_pause_frames=None,
        tx_pause_frames=None,
        rx_pfc_pause_frames=None,
        tx_pfc_pause_frames=None,
        raw=raw,
    )


def _unsaturated(raw: dict[str, int], name: str) -> int | None:
    value = raw.get(name)
    if value is None or value < 0:
        return None
    if value == 2 ** _IB_WIDTH_BITS[name] - 1:
        return None
    return value


def _times_four(value: int | None) -> int | None:
    return None if value is None else value * 4


def _ethtool_ports(lines: list[str]) -> tuple[PortCounters, ...]:
    blocks: list[tuple[str | None, dict[str, int]]] = []
    pending_name: str | None = None
    current: dict[str, int] | None = None
    for line in lines:
        name = _ETHTOOL_NAME.match(line)
        if name:
            pending_name = name.group(1)
            current = None
            continue
        if _ETHTOOL_HEADER.match(line):
            current = {}
            blocks.append((pending_name, current))
            pending_name = None
            continue
        counter = _ETHTOOL_COUNTER.match(line)
        if counter and current is not None:
            _keep(current, counter.group(1), counter.group(2))
    if not any(raw for _, raw in blocks):
        raise ParseError(
            "'ethtool -S' output lists no port-wide counter ('[N]: name' lines are per queue)"
        )
    return tuple(_checked(_ethernet_port(interface, raw)) for interface, raw in blocks)


def _ethernet_port(interface: str | None, raw: dict[str, int]) -> PortCounters:
    return PortCounters(
        name=interface,
        device=None,
        port=None,
        interface=interface,
        rx_bytes=_first(raw, "rx_bytes_phy", "rx_bytes"),
        tx_bytes=_first(raw, "tx_bytes_phy", "tx_bytes"),
        rx_errors=_first(raw, "rx_errors") if "rx_errors" in raw else _sum(raw, _MLX5_RX_ERRORS),
        tx_errors=_first(raw, "tx_errors_phy", "tx_errors"),
        link_downed=_first(raw, "link_down_events_phy", "link_down_events"),
        rx_pause_frames=_first(raw, "rx_pause_ctrl_phy", "rx_pause", "rx_pause_frames"),
        tx_pause_frames=_first(raw, "tx_pause_ctrl_phy", "tx_pause", "tx_pause_frames"),
        rx_pfc_pause_frames=_sum(raw, [f"rx_prio{p}_pause" for p in range(8)]),
        tx_pfc_pause_frames=_sum(raw, [f"tx_prio{p}_pause" for p in range(8)]),
        raw=raw,
    )


def _first(raw: dict[str, int], *names: str) -> int | None:
    return next((raw[name] for name in names if name in raw), None)


def _sum(raw: dict[str, int], names: tuple[str, ...] | list[str]) -> int | None:
    present = [raw[name] for name in names if name in raw]
    return sum(present) if present else None
