"""The running lab as data, saved as JSON in the state directory (``lab.json``, mode 0600:
it holds the switches' SNMP community)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from benchmarks.netlab.spec import LabError

STATE_FILE = "lab.json"


@dataclass(frozen=True)
class LabHost:
    """One lab host as a probe sees it: log in at ``mgmt_address``, measure to ``data_address``."""

    name: str
    namespace: str
    leaf: str
    mgmt_address: str
    data_address: str
    ssh_port: int
    username: str
    host_public_key: str
    client_key_path: str
    rate_bps: int
    switch_port: str = ""  # the host's data port on its leaf switch (IF-MIB ifName)


@dataclass(frozen=True)
class LabState:
    prefix: str
    state_dir: str
    fabric_namespace: str
    root_interface: str
    root_mgmt_address: str
    data_subnet: str
    mgmt_subnet: str
    mtu: int
    host_rate_bps: int
    uplink_rate_bps: int
    leaves: tuple[str, ...]
    client_key_path: str
    client_public_key: str
    hosts: tuple[LabHost, ...]
    created_at: str
    # The switches' management agent (snmpd in the fabric namespace); empty when not run.
    snmp_address: str = ""
    snmp_port: int = 161
    snmp_community: str = ""

    def host(self, name: str) -> LabHost:
        for host in self.hosts:
            if host.name == name:
                return host
        raise LabError(f"no host {name!r} in the lab (hosts: {[h.name for h in self.hosts]})")

    def with_host(self, updated: LabHost) -> LabState:
        hosts = tuple(updated if h.name == updated.name else h for h in self.hosts)
        return replace(self, hosts=hosts)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LabState:
        hosts = tuple(LabHost(**h) for h in data["hosts"])
        return cls(**{**data, "hosts": hosts, "leaves": tuple(data["leaves"])})


def state_path(state_dir: Path | str) -> Path:
    return Path(state_dir) / STATE_FILE


def save_state(state: LabState) -> None:
    path = state_path(state.state_dir)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(state.to_json())
    os.replace(tmp, path)


def load_state(state_dir: Path | str) -> LabState | None:
    """The saved state, or ``None`` when no lab was brought up from this directory."""
    path = state_path(state_dir)
    try:
        return LabState.from_dict(json.loads(path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, TypeError, KeyError) as exc:
        raise LabError(f"unreadable lab state {path}: {exc}") from exc


def require_state(state_dir: Path | str) -> LabState:
    state = load_state(state_dir)
    if state is None:
        raise LabError(f"no lab is up from {Path(state_dir).absolute()} (no {STATE_FILE})")
    return state
