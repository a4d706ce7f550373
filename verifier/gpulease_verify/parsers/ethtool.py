"""`ethtool IFACE` link settings.

ethtool prints the speed in Mb/s (10^6 bits/s, the kernel's SPEED_* values: 100000Mb/s is
100G, 400000Mb/s is 400G), "Unknown!" when the link is down or the driver does not say
(older ethtool: "Unknown! (65535)"); duplex "Full", "Half" or "Unknown! (255)". Warnings
such as "Cannot get wake-on-lan settings: Operation not permitted" may come before or after
the "Settings for IFACE:" line, and vendor wrappers prefix it (Ascend's hccn_tool prints
"Netdev status:Settings for eth3:"). Newer ethtool adds a reason to "Link detected: no".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import MEGA, Number, ParseError, decimal, exact, one_line, storable
from .checks import name, readable


@dataclass(frozen=True)
class EthtoolResult:
    interface: str
    speed_bps: Number | None
    duplex: str | None
    link_detected: bool | None


_SETTINGS = re.compile(r"^(?:[\w ]+:)?Settings for (\S+?):\s*$")
_SPEED = re.compile(r"^\s+Speed:\s*(.*?)\s*$")
_DUPLEX = re.compile(r"^\s+Duplex:\s*(.*?)\s*$")
_LINK = re.compile(r"^\s+Link detected:\s*(.*?)\s*$")
_ERROR = re.compile(r"(no such device|no device matches|cannot get|netlink error)", re.IGNORECASE)


def parse_ethtool(text: str) -> EthtoolResult:
    lines = readable(text, "ethtool").splitlines()
    interface = next((m.group(1) for line in lines if (m := _SETTINGS.match(line))), None)
    if interface is None:
        hint = next((line for line in lines if _ERROR.search(line)), None)
        if hint is None:
            hint = next((line for line in lines if line.strip()), "empty input")
        raise ParseError(
            f"not ethtool link settings ('Settings for IFACE:' missing): {one_line(hint)}"
        )
    return EthtoolResult(
        interface=name(interface, "ethtool interface"),
        speed_bps=_speed(_field(_SPEED, lines)),
        duplex=_duplex(_field(_DUPLEX, lines)),
        link_detected=_link_detected(_field(_LINK, lines)),
    )


def _field(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    return next((m.group(1) for line in lines if (m := pattern.match(line))), None)


def _speed(value: str | None) -> Number | None:
    if value is None or value.lower().startswith("unknown"):
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([MG])b/s", value)
    if not match:
        raise ParseError(f"ethtool speed {value!r} is not N Mb/s")
    factor = MEGA if match.group(2) == "M" else 1000 * MEGA
    return storable(exact(decimal(match.group(1), "ethtool speed") * factor), "ethtool speed")


def _duplex(value: str | None) -> str | None:
    if value is None:
        return None
    lowered = value.lower()
    return lowered if lowered in ("full", "half") else None


def _link_detected(value: str | None) -> bool | None:
    if value is None:
        return None
    word = value.split(" ", 1)[0].lower()
    return {"yes": True, "no": False}.get(word)
