"""What a lab looks like: the spec, rate parsing, and the (pure) topology plan.

Topology (defaults): 4 hosts on 2 leaf bridges (2 hosts per leaf), both leaves connected to
one spine bridge. Host links at 1 Gbit, leaf uplinks at 1 Gbit, so two hosts of one leaf
talking to the other leaf at once share 1 Gbit: 2:1 oversubscription.

Naming (``P`` = spec.prefix, hosts numbered from 1, leaves from 1)::

    namespaces       P-h1 .. P-hN (hosts), P-fabric (all bridges)
    in P-fabric      bridges leaf1.., spine, mgmt; hI-data / hI-mgmt (host ports),
                     lJ-up (leaf side) <-> lJ-down (spine side), root-mgmt
    in P-hI          data0 (data address, shaped), mgmt0 (management address, not shaped)
    root namespace   P-mgmt (management address .1; the only thing outside namespaces)

The fabric namespace has an address of its own on the ``mgmt`` bridge (the subnet's last
usable address but one, e.g. .253 of a /24): the "switch management address", where snmpd
answers (read-only SNMPv2c, UDP ``snmp_port``) for the polling root namespace only.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

LAB_RANGE = ipaddress.IPv4Network("198.18.0.0/15")
"""Benchmarking range (RFC 2544). Every lab address must be inside it."""

_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(bit|kbit|mbit|gbit|tbit)?\s*$", re.IGNORECASE)
_RATE_FACTORS = {"bit": 1, "kbit": 10**3, "mbit": 10**6, "gbit": 10**9, "tbit": 10**12}
_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,7}$")


class LabError(RuntimeError):
    """Building or changing the lab failed."""


class LabUnavailable(LabError):
    """This machine cannot run the lab (not root, a tool missing, no namespaces)."""


def parse_rate(rate: str | int) -> int:
    """``"1gbit"``/``"400mbit"``/``"1.5gbit"``/``1000`` -> bits per second (SI units, like tc).

    Byte units (tc's ``mbps`` = megabytes/s) are refused to avoid an 8x mistake.
    """
    if isinstance(rate, int):
        bps = rate
    else:
        match = _RATE.match(rate)
        if not match:
            raise ValueError(f"bad rate {rate!r}: use e.g. '1gbit', '400mbit' or bits/s")
        unit = (match.group(2) or "bit").lower()
        bps = round(float(match.group(1)) * _RATE_FACTORS[unit])
    if bps <= 0:
        raise ValueError(f"rate must be positive: {rate!r}")
    return bps


def format_rate(bps: int) -> str:
    """Bits per second -> the largest exact tc unit: 400000000 -> ``"400mbit"``."""
    for unit, factor in (("gbit", 10**9), ("mbit", 10**6), ("kbit", 10**3)):
        if bps % factor == 0:
            return f"{bps // factor}{unit}"
    return f"{bps}bit"


def host_name(index: int) -> str:
    """Lab host names are lab-h1, lab-h2, ... (index from 1)."""
    return f"lab-h{index}"


@dataclass(frozen=True)
class LabSpec:
    """A lab to build. ``degrade`` maps host names to slower link rates."""

    state_dir: Path
    hosts: int = 4
    leaves: int = 2
    host_rate: str = "1gbit"
    uplink_rate: str = "1gbit"
    degrade: Mapping[str, str] = field(default_factory=dict)
    prefix: str = "gpl"
    data_subnet: str = "198.18.0.0/24"
    mgmt_subnet: str = "198.19.0.0/24"
    mtu: int = 9000
    ssh_port: int = 22
    snmp_port: int = 161

    def __post_init__(self) -> None:
        object.__setattr__(self, "state_dir", Path(self.state_dir).absolute())
        object.__setattr__(self, "degrade", MappingProxyType(dict(self.degrade)))
        if not _PREFIX.match(self.prefix):
            raise ValueError("prefix: 1-8 lowercase letters/digits, starting with a letter")
        if not 1 <= self.leaves <= self.hosts <= 200:
            raise ValueError("need 1 <= leaves <= hosts <= 200")
        if not 1 <= self.snmp_port <= 65535:
            raise ValueError("snmp_port must be between 1 and 65535")
        if not 1280 <= self.mtu <= 65535:
            raise ValueError("mtu must be between 1280 and 65535")
        parse_rate(self.host_rate)
        parse_rate(self.uplink_rate)
        names = {host_name(i) for i in range(1, self.hosts + 1)}
        for name, rate in self.degrade.items():
            if name not in names:
                raise ValueError(f"degrade: unknown host {name!r} (hosts: {sorted(names)})")
            parse_rate(rate)
        data, mgmt = self.data_network, self.mgmt_network
        for net in (data, mgmt):
            if not net.subnet_of(LAB_RANGE):
                raise ValueError(f"{net} is outside the lab range {LAB_RANGE}")
            if net.num_addresses < self.hosts + 16:
                raise ValueError(f"{net} is too small for {self.hosts} hosts")
        if data.overlaps(mgmt):
            raise ValueError("data and management subnets must not overlap")

    @property
    def data_network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.data_subnet)

    @property
    def mgmt_network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.mgmt_subnet)

    @property
    def fabric_namespace(self) -> str:
        return f"{self.prefix}-fabric"

    @property
    def root_interface(self) -> str:
        return f"{self.prefix}-mgmt"

    @property
    def root_mgmt_address(self) -> str:
        return str(self.mgmt_network.network_address + 1)

    @property
    def switch_mgmt_address(self) -> str:
        """The fabric's (the switches') management address, where snmpd listens."""
        return str(self.mgmt_network.broadcast_address - 2)

    def host_rate_bps(self, name: str) -> int:
        return parse_rate(self.degrade.get(name, self.host_rate))


@dataclass(frozen=True)
class HostPlan:
    """Where one host goes and what it is called (no side effects)."""

    index: int
    name: str
    namespace: str
    leaf: str
    data_address: str
    mgmt_address: str
    rate_bps: int

    @property
    def fabric_data_port(self) -> str:
        return f"h{self.index}-data"

    @property
    def fabric_mgmt_port(self) -> str:
        return f"h{self.index}-mgmt"


def leaf_names(spec: LabSpec) -> list[str]:
    return [f"leaf{j}" for j in range(1, spec.leaves + 1)]


def plan_hosts(spec: LabSpec) -> list[HostPlan]:
    """Hosts fill leaves in order: with 4 hosts on 2 leaves, h1+h2 on leaf1, h3+h4 on leaf2."""
    per_leaf = -(-spec.hosts // spec.leaves)
    plans = []
    for i in range(1, spec.hosts + 1):
        name = host_name(i)
        plans.append(
            HostPlan(
                index=i,
                name=name,
                namespace=f"{spec.prefix}-h{i}",
                leaf=f"leaf{(i - 1) // per_leaf + 1}",
                data_address=str(spec.data_network.network_address + 10 + i),
                mgmt_address=str(spec.mgmt_network.network_address + 10 + i),
                rate_bps=spec.host_rate_bps(name),
            )
        )
    return plans
