"""Passive fabric telemetry: a node's poll output, read into a snapshot, and two snapshots
turned into the compact per-port samples that the health rules read.

The poll is ``benchmarks.probes.commands.telemetry``: one shell command printing, under
``### label`` headers, the boot id, ``/proc/uptime``, and per port ``grep -H .`` over the
kernel's sysfs files (``/sys/class/infiniband/DEV/ports/N/...``, documented in the
kernel's Documentation/ABI/stable/sysfs-class-infiniband; ``/sys/class/net/IF/...``,
Documentation/ABI/testing/sysfs-class-net) plus ``ethtool -S`` on mlx5 NICs. The raw text
is a few kilobytes every 30 s and is not kept; a :class:`PortSample` per port and
interval is, so it is the form the database stores and the audit bundle carries.

Pure and Django-free, like the rest of ``gpulease_verify``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from gpulease_verify.interpret import split_sections
from gpulease_verify.parsers.base import ParseError, one_line

INFINIBAND = "infiniband"
ETHERNET = "ethernet"

# IBA PortCounters (the legacy attribute) are 32 bits wide for data, packets and wait.
# Ports with PortCountersExtended show 64-bit values under the same names. A 32-bit one is
# the only kind that can wrap within a poll interval in practice (port_xmit_data counts
# 4-octet words: 2**32 of them is 16 GiB, about 0.35 s at 400 Gb/s); a 64-bit counter
# takes years.
COUNTER_32_BITS = frozenset(
    {"port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets", "port_xmit_wait"}
)
_MODULUS_32 = 2**32

# The widths of the IBA PortCounters (IBTA Architecture Specification vol. 1, PortCounters
# attribute) as the kernel reads them into sysfs ``counters/`` (PORT_PMA_ATTR in
# drivers/infiniband/core/sysfs.c: symbol_error 16 bits, link_error_recovery 8, ...).
# These counters saturate: at all ones they stop, and can count nothing more until they
# are cleared. The 32-bit data and packet counters are shown instead of the 64-bit
# extended ones only where the port lacks PortCountersExtended.
IB_COUNTER_BITS: dict[str, int] = {
    "symbol_error": 16,
    "link_error_recovery": 8,
    "link_downed": 8,
    "port_rcv_errors": 16,
    "port_rcv_remote_physical_errors": 16,
    "port_rcv_switch_relay_errors": 16,
    "port_xmit_discards": 16,
    "port_xmit_constraint_errors": 8,
    "port_rcv_constraint_errors": 8,
    "local_link_integrity_errors": 4,
    "excessive_buffer_overrun_errors": 4,
    "VL15_dropped": 16,
    **{name: 32 for name in COUNTER_32_BITS},
}
_IB_PORT_KEY = re.compile(r"^[^:\s]+:\d{1,3}$")

# net operstate values (RFC 2863 ifOperStatus as sysfs-class-net spells them) that mean
# the link cannot carry traffic.
_NET_DOWN_STATES = frozenset({"down", "lowerlayerdown", "notpresent", "dormant", "testing"})

_BOOT_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_IB_LINE = re.compile(
    r"^/sys/class/infiniband/(?P<device>[^/\s]+)/ports/(?P<port>\d{1,3})/"
    r"(?P<dir>(?:hw_)?counters/)?(?P<name>[A-Za-z0-9_]+):(?P<value>.*)$"
)
_NET_LINE = re.compile(
    r"^/sys/class/net/(?P<netdev>[^/\s]+)/(?P<dir>statistics/)?(?P<name>[A-Za-z0-9_]+):"
    r"(?P<value>.*)$"
)
# grep's complaint about a file it could not read (merged into the output by 2>&1).
_GREP_ERROR = re.compile(r"^grep: (?P<path>\S+): (?P<reason>.+)$")
_ETHTOOL_COUNTER = re.compile(r"^\s+(?P<name>[A-Za-z0-9_.\-]+):\s*(?P<value>\d{1,20})\s*$")
_IB_STATE = re.compile(r"^\s*\d+:\s*(?P<name>\S+)\s*$")
_IB_RATE = re.compile(r"^\s*(?P<gbps>\d+(?:\.\d+)?)\s+Gb/sec\b")
_WHOLE = re.compile(r"^\s*(?P<value>\d{1,20})\s*$")


class TelemetryParseError(ParseError):
    """The poll's output is not the telemetry command's: empty, cut short or garbled."""


@dataclass(frozen=True)
class PortReading:
    """One port as one poll saw it.

    ``port`` is ``"mlx5_0:1"`` for an InfiniBand/RoCE sysfs port and the netdev name for a
    net port. ``up``: InfiniBand state ACTIVE; for a netdev operstate up (or unknown) with
    carrier 1. None when the poll could not tell. ``state`` is the kernel's words ("ACTIVE
    LinkUp", "down", "absent" when the port's files do not exist at all). ``counters`` are
    the whole-number counters by their kernel/driver names.
    """

    port: str
    link_layer: str
    up: bool | None
    state: str
    rate_gbps: float | None
    counters: dict[str, int] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "port": self.port,
            "link_layer": self.link_layer,
            "up": self.up,
            "state": self.state,
            "rate_gbps": self.rate_gbps,
            "counters": dict(self.counters),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PortReading:
        rate = data.get("rate_gbps")
        return cls(
            port=str(data["port"]),
            link_layer=str(data["link_layer"]),
            up=_optional_bool(data.get("up"), "up"),
            state=str(data.get("state", "")),
            rate_gbps=None if rate is None else float(rate),
            counters={str(k): _count(v, str(k)) for k, v in dict(data["counters"]).items()},
        )


@dataclass(frozen=True)
class Snapshot:
    """A node's whole poll: its boot id, its uptime clock and its ports by key."""

    boot_id: str
    uptime_s: float
    ports: dict[str, PortReading] = field(default_factory=dict, hash=False)

    def to_json(self) -> dict[str, Any]:
        """The snapshot as JSON (kept between polls as the base of the next deltas)."""
        return {
            "boot_id": self.boot_id,
            "uptime_s": self.uptime_s,
            "ports": {key: reading.to_json() for key, reading in self.ports.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Snapshot:
        return cls(
            boot_id=str(data["boot_id"]),
            uptime_s=float(data["uptime_s"]),
            ports={str(k): PortReading.from_json(v) for k, v in dict(data["ports"]).items()},
        )


def parse_snapshot(raw: str) -> Snapshot:
    """The telemetry command's output read into a :class:`Snapshot`.

    Unreadable files (grep's "Invalid argument" for ``speed``/``carrier`` of a down link)
    are skipped. A port whose files are all missing is reported down with state
    "absent": the lease names the port, so its disappearance is an outage, not a gap.
    Anything else that is not a "path:value" line of that port is refused: it means the
    output is not what the command prints.
    """
    if not raw or not raw.strip():
        raise TelemetryParseError("the telemetry poll printed nothing")
    sections = split_sections(raw)
    if not sections:
        raise TelemetryParseError(
            "the telemetry poll printed no '### label' sections: "
            f"{one_line(raw.strip().splitlines()[0], 120)}"
        )
    boot_id = _boot_id(sections.get("boot_id"))
    uptime = _uptime(sections.get("clock"))
    ports: dict[str, PortReading] = {}
    ethtool: dict[str, dict[str, int]] = {}
    for label, text in sections.items():
        kind, _, name = label.partition(" ")
        if kind == "ib" and name:
            reading = _ib_port(name, text)
            ports[reading.port] = reading
        elif kind == "net" and name:
            reading = _net_port(name, text)
            ports[reading.port] = reading
        elif kind == "ethtool" and name:
            ethtool[name] = _ethtool_counters(name, text)
    for netdev, counters in ethtool.items():
        base = ports.get(netdev) or PortReading(netdev, ETHERNET, None, "", None, {})
        # The kernel's own statistics win a name clash (rx_bytes is in both): each counter
        # keeps one source, so a delta never compares two different counters.
        merged = {**counters, **base.counters}
        ports[netdev] = PortReading(
            base.port, base.link_layer, base.up, base.state, base.rate_gbps, merged
        )
    return Snapshot(boot_id=boot_id, uptime_s=uptime, ports=ports)


def _boot_id(text: str | None) -> str:
    if text is None:
        raise TelemetryParseError("the telemetry poll has no '### boot_id' section")
    value = text.strip()
    if not _BOOT_ID.match(value):
        raise TelemetryParseError(f"the boot id is not a UUID: {one_line(value, 80)!r}")
    return value


def _uptime(text: str | None) -> float:
    if text is None:
        raise TelemetryParseError("the telemetry poll has no '### clock' section")
    fields = text.split()
    try:
        value = float(fields[0])
    except (IndexError, ValueError):
        raise TelemetryParseError(
            f"/proc/uptime did not print seconds since boot: {one_line(text, 80)!r}"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise TelemetryParseError(f"/proc/uptime printed an impossible uptime {value}")
    return value


def _lines(text: str) -> list[str]:
    return [line.rstrip("\r") for line in text.splitlines() if line.strip()]


def _grep_error(line: str, what: str) -> str:
    """The reason of a grep complaint, or TelemetryParseError for a line that is neither
    a value nor a complaint."""
    match = _GREP_ERROR.match(line)
    if not match:
        raise TelemetryParseError(f"unexpected line in the {what} section: {one_line(line, 120)}")
    return match.group("reason")


def _ib_port(name: str, text: str) -> PortReading:
    device, _, number = name.rpartition(":")
    key = f"{device}:{number}"
    values: dict[str, str] = {}
    counters: dict[str, int] = {}
    missing = 0
    for line in _lines(text):
        match = _IB_LINE.match(line)
        if not match or f"{match['device']}:{int(match['port'])}" != key:
            missing += "No such file" in _grep_error(line, f"'ib {name}'")
            continue
        if match["dir"]:
            counter = match["name"]
            if match["dir"].startswith("hw_") and counter in counters:
                counter = "hw_" + counter
            _keep(counters, counter, match["value"], key)
        else:
            values[match["name"]] = match["value"].strip()
    if not values and not counters:
        if missing:
            return PortReading(key, INFINIBAND, False, "absent", None, {})
        raise TelemetryParseError(f"the 'ib {name}' section holds no port file")
    logical = _ib_state(values.get("state"), "state", key)
    physical = _ib_state(values.get("phys_state"), "phys_state", key)
    link_layer = ETHERNET if values.get("link_layer", "").lower() == "ethernet" else INFINIBAND
    rate = None
    if "rate" in values:
        rate_match = _IB_RATE.match(values["rate"])
        if not rate_match:
            raise TelemetryParseError(f"{key}: rate {values['rate']!r} is not 'N Gb/sec ...'")
        rate = float(rate_match["gbps"])
    return PortReading(
        port=key,
        link_layer=link_layer,
        up=None if logical is None else logical == "ACTIVE",
        state=" ".join(part for part in (logical, physical) if part),
        rate_gbps=rate,
        counters=counters,
    )


def _ib_state(text: str | None, what: str, key: str) -> str | None:
    """'4: ACTIVE' -> 'ACTIVE'; None when the file was not read."""
    if text is None:
        return None
    match = _IB_STATE.match(text)
    if not match:
        raise TelemetryParseError(f"{key}: {what} {text!r} is not 'N: NAME'")
    return match["name"]


def _net_port(netdev: str, text: str) -> PortReading:
    values: dict[str, str] = {}
    counters: dict[str, int] = {}
    missing = 0
    for line in _lines(text):
        match = _NET_LINE.match(line)
        if not match or match["netdev"] != netdev:
            missing += "No such file" in _grep_error(line, f"'net {netdev}'")
            continue
        if match["dir"] or match["name"] == "carrier_changes":
            _keep(counters, match["name"], match["value"], netdev)
        else:
            values[match["name"]] = match["value"].strip()
    if not values and not counters:
        if missing:
            return PortReading(netdev, ETHERNET, False, "absent", None, {})
        raise TelemetryParseError(f"the 'net {netdev}' section holds no interface file")
    operstate = values.get("operstate")
    carrier = values.get("carrier")
    if carrier is not None and carrier not in ("0", "1"):
        raise TelemetryParseError(f"{netdev}: carrier {carrier!r} is neither 0 nor 1")
    up: bool | None
    if operstate in _NET_DOWN_STATES or carrier == "0":
        up = False
    elif operstate in ("up", "unknown") and carrier == "1":
        up = True
    else:
        up = None
    rate = None
    speed = values.get("speed", "")
    if re.fullmatch(r"-?\d{1,9}", speed) and int(speed) > 0:
        rate = int(speed) / 1000  # Mb/s
    state = operstate or ""
    if carrier == "0" and operstate not in _NET_DOWN_STATES:
        state = f"{state} no-carrier".strip()
    return PortReading(netdev, ETHERNET, up, state, rate, counters)


def _ethtool_counters(netdev: str, text: str) -> dict[str, int]:
    """Port-wide counters of ``ethtool -S`` ("     name: value"); per-queue "[N]: name"
    lines and ethtool's complaints (no statistics, no such device) give nothing."""
    counters: dict[str, int] = {}
    for line in text.splitlines():
        match = _ETHTOOL_COUNTER.match(line)
        if match:
            _keep(counters, match["name"], match["value"], netdev)
    return counters


def _keep(counters: dict[str, int], name: str, text: str, where: str) -> None:
    match = _WHOLE.match(text)
    if not match:
        return  # not a count (an "N/A", a rate string): nothing to difference
    value = int(match["value"])
    if value >= 2**64:
        raise TelemetryParseError(f"{where}: counter {name} = {value} does not fit in 64 bits")
    counters[name] = value


def _optional_bool(value: Any, what: str) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ValueError(f"{what} must be true, false or null, not {value!r}")


def _count(value: Any, what: str) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"{what} must be a whole number >= 0, not {value!r}")
    return value


# ---------------------------------------------------------------------------------------
# Samples: what one poll interval of one port amounts to.


@dataclass(frozen=True)
class PortSample:
    """One port over one poll interval ``[at - seconds, at]``: the stored form.

    - ``up``: the port's state at this poll (None: the poll could not tell).
    - ``down_cycles``: how many times the link went down within the interval. Each such
      down either came back up inside the interval (a down-then-up cycle) or, when ``up``
      is False, is the one still open at this poll. Read from the counters, not from two
      state readings, so a flap that recovered between polls is still seen:

      * InfiniBand/RoCE sysfs port: the increase of ``link_downed`` (the port's count of
        link-down events);
      * netdev: the down transitions implied by the increase of ``carrier_changes``
        (which counts downs and ups alike, alternating from the previous state: from up,
        ``ceil(n/2)`` of ``n`` changes are downs; from down, ``floor(n/2)``);
      * in both, at least 1 when the port was up at the previous poll and is down now
        (a link disabled without the counter moving).

      A ``reset`` interval has only that last rule: its counters are not trusted.
    - ``deltas``: the counters' increases, only those that moved.
    - ``reset``: the boot id changed (a reboot) or a counter went backwards (counters
      cleared: a driver reload, ``perfquery -R``, a NIC replaced). A cleared counter is
      taken to mean the port's counters were cleared together, so none of the interval's
      increases are trusted: ``deltas`` is empty. A known 32-bit counter going backwards
      from below its ceiling is a wrap, not a reset (see :data:`COUNTER_32_BITS`).

    The first poll of a port gives ``seconds`` 0, no cycles and no deltas: its state only.
    """

    port: str
    at: datetime
    seconds: float
    up: bool | None
    down_cycles: int = 0
    deltas: dict[str, int] = field(default_factory=dict, hash=False)
    reset: bool = False
    rate_gbps: float | None = None
    expected_gbps: float | None = None
    saturated: tuple[str, ...] = ()
    disputed: bool = False

    @property
    def start(self) -> datetime:
        """The beginning of the interval."""
        return self.at - timedelta(seconds=self.seconds)

    @property
    def slow(self) -> bool:
        """Up at a rate below the expected one (see ``rate_gbps``)."""
        return (
            self.up is True
            and self.rate_gbps is not None
            and self.expected_gbps is not None
            and self.rate_gbps < self.expected_gbps
        )

    @property
    def condition(self) -> tuple[float | None, float | None, tuple[str, ...]]:
        """What the poll found that lasts from poll to poll (a lower rate, saturated
        counters): intervals merge only with intervals in the same condition."""
        return (self.rate_gbps, self.expected_gbps, self.saturated)

    def to_json(self) -> dict[str, Any]:
        """Compact JSON: ``{"p": port, "t": end UTC "YYYY-MM-DDTHH:MM:SS[.ffffff]Z",
        "s": seconds, "u": up, "c": down cycles, "d": {counter: increase}, "r": reset,
        "g": rate, "e": expected rate, "x": [saturated counters], "w": disputed}``; all
        but "p", "t", "s" and "u" are left out when 0, empty, null or false."""
        data: dict[str, Any] = {
            "p": self.port,
            "t": _utc_text(self.at),
            "s": self.seconds,
            "u": self.up,
        }
        if self.down_cycles:
            data["c"] = self.down_cycles
        if self.deltas:
            data["d"] = dict(sorted(self.deltas.items()))
        if self.reset:
            data["r"] = True
        if self.rate_gbps is not None:
            data["g"] = self.rate_gbps
        if self.expected_gbps is not None:
            data["e"] = self.expected_gbps
        if self.saturated:
            data["x"] = list(self.saturated)
        if self.disputed:
            data["w"] = True
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PortSample:
        seconds = data["s"]
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError(f"sample seconds must be a number >= 0, not {seconds!r}")
        reset = data.get("r", False)
        if not isinstance(reset, bool):
            raise ValueError(f"sample reset must be true or false, not {reset!r}")
        return cls(
            port=str(data["p"]),
            at=_parse_utc(str(data["t"])),
            seconds=float(seconds),
            up=_optional_bool(data.get("u"), "sample up"),
            down_cycles=_count(data.get("c", 0), "sample down cycles"),
            deltas={str(k): _count(v, str(k)) for k, v in dict(data.get("d", {})).items()},
            reset=reset,
            rate_gbps=_optional_rate(data.get("g"), "sample rate"),
            expected_gbps=_optional_rate(data.get("e"), "sample expected rate"),
            saturated=_names(data.get("x", []), "sample saturated counters"),
            disputed=_flag(data.get("w", False), "sample disputed"),
        )


def _optional_rate(value: Any, what: str) -> float | None:
    if value is None:
        return None
    number = float(value) if isinstance(value, str) else value
    if isinstance(number, bool) or not isinstance(number, int | float):
        raise ValueError(f"{what} must be a number, not {value!r}")
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{what} must be a finite number >= 0, not {value!r}")
    return float(number)


def _names(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what} must be a list of counter names, not {value!r}")
    return tuple(sorted(value))


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{what} must be true or false, not {value!r}")
    return value


def _utc_text(when: datetime) -> str:
    if when.tzinfo is None:
        raise ValueError("sample times must be timezone-aware")
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _parse_utc(text: str) -> datetime:
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        raise ValueError(f"sample time {text!r} has no timezone")
    return when.astimezone(UTC)


def port_samples(
    previous: Snapshot | None,
    current: Snapshot,
    *,
    at: datetime,
    seconds: float,
    expected: Mapping[str, float] | None = None,
) -> list[PortSample]:
    """One :class:`PortSample` per port of ``current`` for the interval ending ``at``.

    ``previous`` is the node's last good snapshot (None for the first poll). A changed
    boot id resets every port; a port new since ``previous`` starts like a first poll.
    ``expected``: the rate (Gb/s) the inventory expects of each port, by port key; a port
    up below it is recorded with both rates.
    """
    if at.tzinfo is None:
        raise ValueError("at must be timezone-aware")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"seconds must be a number >= 0, not {seconds!r}")
    when = at.astimezone(UTC)
    rebooted = previous is not None and previous.boot_id != current.boot_id
    samples = []
    for key, reading in current.ports.items():
        before = None if previous is None else previous.ports.get(key)
        rates = _rates(reading, (expected or {}).get(key))
        found = partial(
            PortSample,
            key,
            when,
            up=reading.up,
            rate_gbps=rates.get("rate_gbps"),
            expected_gbps=rates.get("expected_gbps"),
            saturated=saturated_counters(reading, None if rebooted else before),
        )
        if before is None:
            samples.append(found(seconds=0.0))
            continue
        went_down = 1 if before.up is True and reading.up is False else 0
        deltas = None if rebooted else _deltas(before.counters, reading.counters)
        if deltas is None:
            samples.append(found(seconds=seconds, down_cycles=went_down, reset=True))
            continue
        cycles = max(_down_events(before, reading, deltas), went_down)
        samples.append(found(seconds=seconds, down_cycles=cycles, deltas=deltas))
    return samples


def changed_ports(
    previous: Snapshot | None, current: Snapshot, expected: Mapping[str, float] | None = None
) -> set[str]:
    """The ports of ``current`` whose state or lasting condition differs from the
    previous poll's: up or not, below the expected rate or not (or at another rate), a
    different set of saturated counters. Their interval is stored at once, not merged
    (the poll that found a port up again is what gpud's flaps count), and judged. A
    port the previous poll did not read has no change to show."""
    if previous is None or previous.boot_id != current.boot_id:
        return set()
    rates = expected or {}
    changed = set()
    for key, reading in current.ports.items():
        before = previous.ports.get(key)
        if before is None:
            continue
        if before.up != reading.up or _condition(before, rates.get(key)) != _condition(
            reading, rates.get(key)
        ):
            changed.add(key)
    return changed


def _condition(reading: PortReading, expected: float | None) -> tuple[Any, ...]:
    """A reading's lasting condition, by itself (a 32-bit counter at all ones counts)."""
    rates = _rates(reading, expected)
    return (rates.get("rate_gbps"), saturated_counters(reading, reading))


def _rates(reading: PortReading, expected: float | None) -> dict[str, float]:
    """Both rates when the port is up below the expected one, else nothing."""
    rate = reading.rate_gbps
    if reading.up is True and rate is not None and expected is not None and rate < expected:
        return {"rate_gbps": float(rate), "expected_gbps": float(expected)}
    return {}


def saturated_counters(reading: PortReading, before: PortReading | None) -> tuple[str, ...]:
    """The InfiniBand sysfs counters of ``reading`` at their maximum (:data:`IB_COUNTER_BITS`).
    A counter of 16 bits or fewer at all ones has saturated. A 32-bit one must have been
    at all ones at the previous poll too (``before``): the kernel shows a port with
    extended counters under the same names, 64 bits wide, where that value is only a
    value passing by."""
    if not _IB_PORT_KEY.match(reading.port):
        return ()
    found = []
    for name, bits in IB_COUNTER_BITS.items():
        ceiling = 2**bits - 1
        if reading.counters.get(name) != ceiling:
            continue
        if bits < 32 or (before is not None and before.counters.get(name) == ceiling):
            found.append(name)
    return tuple(sorted(found))


def _deltas(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int] | None:
    """Nonzero increases of the counters read both times; None when one went backwards
    (a reset) without being a 32-bit wrap."""
    deltas: dict[str, int] = {}
    for name, new in after.items():
        old = before.get(name)
        if old is None:
            continue  # a counter that appeared: nothing to compare with
        if new >= old:
            increase = new - old
        elif name in COUNTER_32_BITS and old < _MODULUS_32 - 1 and new < _MODULUS_32:
            # One pass through 2**32. A counter stuck at its ceiling (2**32 - 1: IBA's
            # saturating PortCounters) that reads lower was cleared, not wrapped.
            increase = _MODULUS_32 - old + new
        else:
            return None
        if increase:
            deltas[name] = increase
    return deltas


def _down_events(before: PortReading, after: PortReading, deltas: Mapping[str, int]) -> int:
    if "link_downed" in after.counters or "link_downed" in before.counters:
        return deltas.get("link_downed", 0)
    changes = deltas.get("carrier_changes", 0)
    if before.up is True:
        return (changes + 1) // 2
    if before.up is False:
        return changes // 2
    # Unknown starting state: the downs the end state allows, rounded up.
    return (changes + 1) // 2 if after.up is False else changes // 2


__all__ = [
    "COUNTER_32_BITS",
    "ETHERNET",
    "IB_COUNTER_BITS",
    "INFINIBAND",
    "PortReading",
    "PortSample",
    "Snapshot",
    "TelemetryParseError",
    "changed_ports",
    "parse_snapshot",
    "port_samples",
    "saturated_counters",
]


# ---------------------------------------------------------------------------------------
# The forms a sample and a switch reading take in a chain link and an audit bundle.


def sample_entry(node: str, sample: PortSample) -> dict[str, Any]:
    """A stored interval as a telemetry link holds it: strings, integers, booleans and
    nulls only (the seconds as the shortest text that reads back to the same double)."""
    return {
        "node": node,
        "port": sample.port,
        "at": _utc_text(sample.at),
        "seconds": repr(float(sample.seconds)),
        "up": sample.up,
        "down_cycles": sample.down_cycles,
        "deltas": dict(sorted(sample.deltas.items())),
        "reset": sample.reset,
        # Added later: in an entry only when set, so the entries (and hashes) of samples
        # stored before they existed stay as they were.
        **({"rate_gbps": repr(sample.rate_gbps)} if sample.rate_gbps is not None else {}),
        **(
            {"expected_gbps": repr(sample.expected_gbps)}
            if sample.expected_gbps is not None
            else {}
        ),
        **({"saturated": list(sample.saturated)} if sample.saturated else {}),
        **({"disputed": True} if sample.disputed else {}),
    }


def sample_from_entry(entry: Mapping[str, Any]) -> tuple[str, PortSample]:
    """(node, sample) from a link's sample entry."""
    return str(entry["node"]), PortSample(
        port=str(entry["port"]),
        at=_parse_utc(str(entry["at"])),
        seconds=float(entry["seconds"]),
        up=_optional_bool(entry.get("up"), "sample up"),
        down_cycles=_count(entry.get("down_cycles", 0), "sample down cycles"),
        deltas={str(k): _count(v, str(k)) for k, v in dict(entry.get("deltas", {})).items()},
        reset=bool(entry.get("reset", False)),
        rate_gbps=_optional_rate(entry.get("rate_gbps"), "sample rate"),
        expected_gbps=_optional_rate(entry.get("expected_gbps"), "sample expected rate"),
        saturated=_names(entry.get("saturated", []), "sample saturated counters"),
        disputed=_flag(entry.get("disputed", False), "sample disputed"),
    )


def switch_entry(
    *,
    switch: str,
    port: str,
    in_octets: int,
    out_octets: int,
    oper_up: bool,
    in_errors: int,
    out_discards: int,
    link: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A switch port's reading as a telemetry link holds it (64-bit octets as text).
    ``link``: the link-state witness of the node's port (``gpulease_verify.witness.
    link_block``), left out of readings stored before it existed."""
    entry: dict[str, Any] = {
        "switch": switch,
        "port": port,
        "in_octets": str(int(in_octets)),
        "out_octets": str(int(out_octets)),
        "oper_up": bool(oper_up),
        "in_errors": int(in_errors),
        "out_discards": int(out_discards),
    }
    if link is not None:
        entry["link"] = dict(link)
    return entry
