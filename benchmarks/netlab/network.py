"""Namespaces, bridges, veths and traffic shaping of the lab (see spec.py for the layout).

Shaping: every shaped link direction gets HTB (one class at the link rate) with a bfifo
under it (a byte FIFO), on the egress of the sending veth end:

- host link, host -> leaf: ``data0`` in the host namespace;
- host link, leaf -> host: ``hI-data`` in the fabric namespace;
- uplink, leaf -> spine: ``lJ-up``; spine -> leaf: ``lJ-down`` (both in the fabric).

The management network (root ``P-mgmt`` <-> bridge ``mgmt`` <-> each host's ``mgmt0``, and
the bridge ``mgmt`` itself: the switches' management address) is not shaped. The data
network uses jumbo frames (spec.mtu, default 9000) as GPU cluster fabrics do; with
1500-byte frames TCP goodput could not exceed ~95.5% of the shaped rate. With 9000, iperf3's
figure tops out at 8948/9014 = 99.27 % of it (TCP payload per frame that HTB counts).

Fidelity (issue 34): a shaped link is a timer, not a wire. HTB sends when its watchdog fires
and the softirq runs, both late on a busy machine; with a 1 ms bucket every late millisecond
was link time lost for good. The bucket holds SHAPER_BURST_MS, so a late shaper catches up.
The hosts run Reno, not the root namespace's congestion control (namespaces inherit it: BBR
on the development machine, which under-sends when the machine stalls). perf/README.md, "Lab
fidelity", has the measurements.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import time
from pathlib import Path

from benchmarks.netlab.shell import in_netns, ip, tc
from benchmarks.netlab.spec import (
    HostPlan,
    LabError,
    LabSpec,
    LabUnavailable,
    leaf_names,
    parse_rate,
)

_HTB_QUANTUM = 60000
QUEUE_MS = 10
SHAPER_BURST_MS = 10
"""HTB's bucket: how late the shaper may run and still send what its rate allows. A second
can carry at most SHAPER_BURST_MS / 1000 (1 %) more than the rate, right after a stall."""
HOST_CONGESTION_CONTROL = "reno"
"""The lab hosts' TCP: loss-based like Linux's default (CUBIC), the same on every machine.
A namespace may only pick an algorithm the root allows, and Reno is always allowed (CUBIC is
not where the root runs BBR, as on the development machine)."""


def list_namespaces() -> list[str]:
    """Names of all named network namespaces (``ip netns list``)."""
    return [line.split()[0] for line in ip("netns", "list").splitlines() if line.strip()]


def namespaces_with_prefix(prefix: str) -> list[str]:
    """The lab's namespaces: those named ``<prefix>-...``."""
    return [name for name in list_namespaces() if name.startswith(f"{prefix}-")]


def _add_namespace(name: str) -> None:
    try:
        ip("netns", "add", name)
    except LabError as exc:
        raise LabUnavailable(f"cannot create network namespace {name}: {exc}") from exc
    ip("link", "set", "lo", "up", netns=name)
    # No IPv6: keeps router solicitations and DAD chatter off the shaped links.
    in_netns(name, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1", check=False)
    in_netns(name, "sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1", check=False)


def _add_host_namespace(name: str) -> None:
    _add_namespace(name)
    cc = f"net.ipv4.tcp_congestion_control={HOST_CONGESTION_CONTROL}"
    in_netns(name, "sysctl", "-q", "-w", cc)


def _add_bridge(fabric: str, name: str, mtu: int) -> None:
    ip("link", "add", name, "type", "bridge", "stp_state", "0", netns=fabric)
    ip("link", "set", name, "mtu", str(mtu), "up", netns=fabric)


def _add_port(fabric: str, port: str, bridge: str, peer_ns: str, peer: str, mtu: int) -> None:
    """A veth from bridge ``bridge`` (port name ``port``) to ``peer`` in namespace ``peer_ns``."""
    ip("link", "add", port, "mtu", str(mtu), "type", "veth", "peer", "name", peer, "netns",
       peer_ns, "mtu", str(mtu), netns=fabric)  # fmt: skip
    ip("link", "set", port, "master", bridge, "up", netns=fabric)


def _check_root_subnet_free(spec: LabSpec) -> None:
    for line in ip("-4", "-o", "addr", "show").splitlines():
        fields = line.split()
        if len(fields) < 4 or fields[1] == spec.root_interface:
            continue
        address = ipaddress.IPv4Interface(fields[3])
        if address.network.overlaps(spec.mgmt_network):
            raise LabError(
                f"management subnet {spec.mgmt_subnet} is already in use on {fields[1]} "
                f"({fields[3]}); pick another mgmt_subnet inside 198.18.0.0/15"
            )


def build(spec: LabSpec, hosts: list[HostPlan]) -> None:
    """Create namespaces, bridges, links and addresses, and apply shaping."""
    _check_root_subnet_free(spec)
    fabric, mtu = spec.fabric_namespace, spec.mtu
    _add_namespace(fabric)
    for leaf in leaf_names(spec):
        _add_bridge(fabric, leaf, mtu)
    _add_bridge(fabric, "spine", mtu)
    _add_bridge(fabric, "mgmt", 1500)

    for j, leaf in enumerate(leaf_names(spec), start=1):
        ip("link", "add", f"l{j}-up", "mtu", str(mtu), "type", "veth", "peer", "name",
           f"l{j}-down", "mtu", str(mtu), netns=fabric)  # fmt: skip
        ip("link", "set", f"l{j}-up", "master", leaf, "up", netns=fabric)
        ip("link", "set", f"l{j}-down", "master", "spine", "up", netns=fabric)
        uplink = parse_rate(spec.uplink_rate)
        shape(fabric, f"l{j}-up", uplink)
        shape(fabric, f"l{j}-down", uplink)

    # Management path from the root namespace: one veth into the mgmt bridge.
    ip("link", "add", spec.root_interface, "type", "veth", "peer", "name", "root-mgmt",
       "netns", fabric)  # fmt: skip
    ip("link", "set", "root-mgmt", "master", "mgmt", "up", netns=fabric)
    prefixlen = spec.mgmt_network.prefixlen
    ip("addr", "add", f"{spec.root_mgmt_address}/{prefixlen}", "dev", spec.root_interface)
    ip("link", "set", spec.root_interface, "up")
    # The switches' management address (snmpd listens there), on the mgmt bridge itself.
    ip("addr", "add", f"{spec.switch_mgmt_address}/{prefixlen}", "dev", "mgmt", netns=fabric)

    for host in hosts:
        _add_host_namespace(host.namespace)
        _add_port(fabric, host.fabric_data_port, host.leaf, host.namespace, "data0", mtu)
        _add_port(fabric, host.fabric_mgmt_port, "mgmt", host.namespace, "mgmt0", 1500)
        data_len, mgmt_len = spec.data_network.prefixlen, prefixlen
        ip("addr", "add", f"{host.data_address}/{data_len}", "dev", "data0", netns=host.namespace)
        ip("addr", "add", f"{host.mgmt_address}/{mgmt_len}", "dev", "mgmt0", netns=host.namespace)
        ip("link", "set", "data0", "up", netns=host.namespace)
        ip("link", "set", "mgmt0", "up", netns=host.namespace)
        shape_host(spec.fabric_namespace, host.namespace, host.index, host.rate_bps)


def burst_bytes(rate_bps: int) -> int:
    """The HTB bucket of a link shaped to ``rate_bps``: SHAPER_BURST_MS at the rate, at least
    64 KiB (a full TSO segment)."""
    return max(64 * 1024, rate_bps // 8 * SHAPER_BURST_MS // 1000)


def _class_args(rate_bps: int) -> list[str]:
    rate = f"{rate_bps}bit"
    burst = f"{burst_bytes(rate_bps)}b"
    return ["htb", "rate", rate, "ceil", rate, "burst", burst, "cburst", burst,
            "quantum", str(_HTB_QUANTUM)]  # fmt: skip


def shape(netns: str, dev: str, rate_bps: int) -> None:
    """Shape egress of ``dev`` (no shaping yet) to ``rate_bps``: an HTB class, a byte FIFO.

    Only htb and pfifo/bfifo are assumed to exist (minimal kernels lack fq_codel, tbf).
    The FIFO holds ~QUEUE_MS of traffic at the rate, like a switch port buffer.
    """
    queue = str(max(256 * 1024, rate_bps // 8 // 1000 * QUEUE_MS))
    tc("qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1", netns=netns)
    tc("class", "add", "dev", dev, "parent", "1:", "classid", "1:1", *_class_args(rate_bps),
       netns=netns)  # fmt: skip
    tc("qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit", queue,
       netns=netns)  # fmt: skip


def reshape(netns: str, dev: str, rate_bps: int) -> None:
    """Change the rate of a device shaped by :func:`shape`: rebuild its HTB tree.

    Not ``tc class change``: HTB keeps a class's token debt across it, counted at the old
    rate, so a link sped up after a spell at 1 kbit stayed blocked for up to a minute.
    Rebuilt, the class starts with full tokens; packets queued at the old rate are dropped
    (TCP resends them), and for the few milliseconds in between the link is not shaped.
    """
    tc("qdisc", "del", "dev", dev, "root", netns=netns)
    shape(netns, dev, rate_bps)


def shape_host(fabric: str, namespace: str, index: int, rate_bps: int) -> None:
    """Shape both directions of one host's data link."""
    shape(namespace, "data0", rate_bps)
    shape(fabric, f"h{index}-data", rate_bps)


def reshape_host(fabric: str, namespace: str, index: int, rate_bps: int) -> None:
    """Change the rate of both directions of one host's data link."""
    reshape(namespace, "data0", rate_bps)
    reshape(fabric, f"h{index}-data", rate_bps)


def kill_namespace_processes(namespace: str, *, only_comm: str | None = None) -> int:
    """SIGTERM (then SIGKILL) the processes in ``namespace``; returns how many were found."""
    pids = _namespace_pids(namespace, only_comm)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.05)
        if not any(_alive(pid) for pid in pids):
            break
    return len(pids)


def _namespace_pids(namespace: str, only_comm: str | None) -> list[int]:
    out = ip("netns", "pids", namespace, check=False)
    pids = [int(p) for p in out.split() if p.isdigit()]
    if only_comm is not None:
        pids = [p for p in pids if _comm(p) == only_comm]
    return pids


def _comm(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def destroy(prefix: str, root_interface: str) -> list[str]:
    """Remove every namespace named ``prefix-*`` (killing its processes) and the root veth."""
    removed = []
    for namespace in namespaces_with_prefix(prefix):
        kill_namespace_processes(namespace)
        ip("netns", "del", namespace, check=False)
        removed.append(namespace)
    if ip("link", "show", root_interface, check=False):
        ip("link", "del", root_interface, check=False)
        removed.append(root_interface)
    return removed
