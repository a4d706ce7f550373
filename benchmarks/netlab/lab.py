"""Bring the lab up and down, inspect it, and poke it (stop sshd, rotate keys, reshape).

Besides the hosts' sshd, ``up`` runs the switches' SNMP agent (snmpd.py) in the fabric
namespace; ``down`` stops it (and removing the namespaces kills whatever is left in them).

``up`` is idempotent by rebuilding: whatever a previous lab left under the same prefix (and
in the same state directory) is torn down first, then everything is created fresh (new host
keys included). The state is saved as ``lab.json`` so that ``down``/``status`` and the
helpers work from any process given the state directory.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.netlab import network, snmpd, sshd
from benchmarks.netlab.shell import check_prerequisites
from benchmarks.netlab.spec import (
    LabSpec,
    leaf_names,
    parse_rate,
    plan_hosts,
)
from benchmarks.netlab.state import (
    STATE_FILE,
    LabHost,
    LabState,
    load_state,
    require_state,
    save_state,
)

_PREFIX_FILE = "lab.prefix"  # written first, so `down` can clean up after a failed `up`
_OWNED = (STATE_FILE, _PREFIX_FILE, sshd.CLIENT_KEY, sshd.CLIENT_KEY + ".pub",
          sshd.AUTHORIZED_KEYS, "hosts", sshd.FORGE_DIR, snmpd.AGENT_DIR,
          STATE_FILE.replace(".json", ".tmp"))  # fmt: skip


def up(spec: LabSpec) -> LabState:
    """Build the lab described by ``spec`` (rebuilding it if already up); return its state."""
    check_prerequisites()
    state_dir = spec.state_dir
    down(state_dir)
    network.destroy(spec.prefix, spec.root_interface)
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / _PREFIX_FILE).write_text(f"{spec.prefix} {spec.root_interface}\n")
    try:
        return _build(spec)
    except BaseException:
        down(state_dir)
        raise


def _build(spec: LabSpec) -> LabState:
    plans = plan_hosts(spec)
    network.build(spec, plans)
    client_key, client_public = sshd.ensure_client_key(spec.state_dir)
    hosts = []
    for plan in plans:
        public = sshd.write_host_files(spec.state_dir, plan.name, plan.mgmt_address, spec.ssh_port)
        sshd.start(spec.state_dir, plan.name, plan.namespace, plan.mgmt_address, spec.ssh_port)
        hosts.append(
            LabHost(
                name=plan.name,
                namespace=plan.namespace,
                leaf=plan.leaf,
                mgmt_address=plan.mgmt_address,
                data_address=plan.data_address,
                ssh_port=spec.ssh_port,
                username="root",
                host_public_key=public,
                client_key_path=str(client_key),
                rate_bps=plan.rate_bps,
                switch_port=plan.fabric_data_port,
            )
        )
    community = snmpd.new_community()
    snmpd.write_config(
        spec.state_dir,
        community=community,
        poller=spec.root_mgmt_address,
        name=f"{spec.prefix}-fabric",
    )
    snmpd.start(spec.state_dir, spec.fabric_namespace, spec.switch_mgmt_address, spec.snmp_port)
    state = LabState(
        prefix=spec.prefix,
        state_dir=str(spec.state_dir),
        fabric_namespace=spec.fabric_namespace,
        root_interface=spec.root_interface,
        root_mgmt_address=spec.root_mgmt_address,
        data_subnet=spec.data_subnet,
        mgmt_subnet=spec.mgmt_subnet,
        mtu=spec.mtu,
        host_rate_bps=parse_rate(spec.host_rate),
        uplink_rate_bps=parse_rate(spec.uplink_rate),
        leaves=tuple(leaf_names(spec)),
        client_key_path=str(client_key),
        client_public_key=client_public,
        hosts=tuple(hosts),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        snmp_address=spec.switch_mgmt_address,
        snmp_port=spec.snmp_port,
        snmp_community=community,
    )
    save_state(state)
    return state


def down(state_dir: Path | str) -> list[str]:
    """Remove the lab brought up from ``state_dir``: processes, namespaces, bridges, veths
    and the files the lab wrote there (the directory itself too, if then empty).

    Returns what was removed (namespace and interface names); nothing to do is not an error.
    """
    state_dir = Path(state_dir).absolute()
    prefix_file = state_dir / _PREFIX_FILE
    removed: list[str] = []
    if prefix_file.exists():
        prefix, root_interface = prefix_file.read_text().split()
        snmpd.stop(state_dir, f"{prefix}-fabric")
        removed = network.destroy(prefix, root_interface)
    else:
        snmpd.stop(state_dir)
    for name in _OWNED:
        path = state_dir / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    if state_dir.is_dir() and not any(state_dir.iterdir()):
        state_dir.rmdir()
    return removed


@dataclass(frozen=True)
class HostStatus:
    name: str
    namespace_present: bool
    sshd_pid: int | None
    ssh_port_open: bool


@dataclass(frozen=True)
class LabStatus:
    state: LabState | None
    hosts: tuple[HostStatus, ...]
    snmpd_pid: int | None = None  # the switches' SNMP agent (see state.snmp_*)

    @property
    def up(self) -> bool:
        return (
            self.state is not None
            and all(h.namespace_present and h.sshd_pid and h.ssh_port_open for h in self.hosts)
            and (self.snmpd_pid is not None or not self.state.snmp_address)
        )


def status(state_dir: Path | str) -> LabStatus:
    """What is running: per host, namespace present, sshd pid, SSH port answering; the
    switches' SNMP agent's pid."""
    state = load_state(state_dir)
    if state is None:
        return LabStatus(state=None, hosts=())
    present = set(network.namespaces_with_prefix(state.prefix))
    hosts = tuple(
        HostStatus(
            name=h.name,
            namespace_present=h.namespace in present,
            sshd_pid=sshd.running_pid(Path(state.state_dir), h.name),
            ssh_port_open=sshd.accepts_connections(h.mgmt_address, h.ssh_port),
        )
        for h in state.hosts
    )
    return LabStatus(state=state, hosts=hosts, snmpd_pid=snmpd.running_pid(Path(state.state_dir)))


def stop_sshd(state_dir: Path | str, host: str) -> None:
    """Stop one host's sshd (its SSH port then refuses connections)."""
    lab_host = require_state(state_dir).host(host)
    sshd.stop(lab_host.namespace)


def start_sshd(state_dir: Path | str, host: str) -> None:
    """(Re)start one host's sshd with its current host key."""
    state = require_state(state_dir)
    h = state.host(host)
    sshd.stop(h.namespace)
    sshd.start(Path(state.state_dir), h.name, h.namespace, h.mgmt_address, h.ssh_port)


def rotate_host_key(state_dir: Path | str, host: str) -> str:
    """Give a host a new host key (restarting its sshd); returns the new public key.

    The saved state is updated; anything that pinned the old key will now be refused.
    """
    state = require_state(state_dir)
    h = state.host(host)
    sshd.stop(h.namespace)
    public = sshd.rotate_key(Path(state.state_dir), h.name)
    sshd.start(Path(state.state_dir), h.name, h.namespace, h.mgmt_address, h.ssh_port)
    save_state(state.with_host(replace(h, host_public_key=public)))
    return public


def set_host_rate(state_dir: Path | str, host: str, rate: str | int) -> int:
    """Reshape one host's data link (both directions) to ``rate``; returns bits/s."""
    state = require_state(state_dir)
    h = state.host(host)
    bps = parse_rate(rate)
    index = state.hosts.index(h) + 1
    network.reshape_host(state.fabric_namespace, h.namespace, index, bps)
    save_state(state.with_host(replace(h, rate_bps=bps)))
    return bps
