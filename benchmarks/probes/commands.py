"""The exact commands a probe runs. What is built here is what is stored in ProbeRun.command,
so an auditor can run the same thing by hand.

A node-level check that reads several things prints each under a "### label" header line,
so one raw output holds them all and `split_sections` takes them apart again.
"""

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.choices import Tool
from benchmarks.probes import arguments as arg
from benchmarks.probes.plan import PlanNode, PlanPort
from gpulease_verify.interpret import split_sections as split_sections
from leases.choices import LinkLayer

IPERF3_BASE_PORT = 5201
# TCP slow start is not the network's capacity: iperf3 leaves the first second out.
IPERF3_OMIT_SECONDS = 1


def sections(parts: Sequence[tuple[str, str]]) -> str:
    """One shell command that prints each part under a '### label' header."""
    return "; ".join(f"{_say('### ' + label)}; {command} 2>&1" for label, command in parts)


def _say(line: str) -> str:
    # printf, not echo: dash's echo would expand a backslash in an interface name.
    return f"printf '%s\\n' {shlex.quote(line)}"


def _ib_sysfs(port: PlanPort) -> str:
    return (
        f"/sys/class/infiniband/{arg.rdma_device(port.device)}/ports/{arg.port_number(port.port)}"
    )


def link_check(node: PlanNode) -> str:
    """Port state and speed, plus the link-down counter whose movement is a flap."""
    parts = []
    for port in node.ports:
        if port.link_layer == LinkLayer.INFINIBAND:
            label = f"{port.device}:{port.port}"
            device_port = f"{arg.rdma_device(port.device)}:{arg.port_number(port.port)}"
            parts.append((f"ibstatus {label}", f"ibstatus {device_port}"))
            parts.append((f"link_downed {label}", f"cat {_ib_sysfs(port)}/counters/link_downed"))
        elif port.netdev:
            netdev = arg.interface(port.netdev)
            parts.append((f"ethtool {port.netdev}", f"ethtool {netdev}"))
            parts.append(
                (
                    f"carrier_down_count {port.netdev}",
                    f"cat /sys/class/net/{netdev}/carrier_down_count",
                )
            )
    return sections(parts)


def _port_counters(port: PlanPort) -> tuple[str, str] | None:
    if port.link_layer == LinkLayer.INFINIBAND:
        label = f"counters {port.device}:{port.port}"
        return (label, f"grep -H . {_ib_sysfs(port)}/counters/*")
    if not port.netdev:
        return None
    netdev = arg.interface(port.netdev)
    if port.device.startswith("mlx"):
        # mlx5's *_phy counters include RoCE traffic that the kernel's netdev stats miss.
        return (
            f"counters {port.netdev}",
            f"{_say('# ethtool -S ' + port.netdev)}; ethtool -S {netdev}",
        )
    base = f"/sys/class/net/{netdev}"
    return (f"counters {port.netdev}", f"grep -H . {base}/statistics/* {base}/carrier_down_count")


def counters(node: PlanNode) -> str:
    return sections([part for port in node.ports if (part := _port_counters(port))])


def telemetry(node: PlanNode) -> str:
    """The fabric telemetry poll: one command a node runs every 30-60 s over a kept-open SSH
    connection, read by ``gpulease_verify.telemetry.parse_snapshot``.

    It prints the boot id (a reboot resets every counter, so deltas across it are not
    trusted) and the uptime clock, then for each InfiniBand or RoCE port (an IB link layer
    or an mlx* device) its sysfs state, rate and counters, and for each port with a netdev
    the kernel's link state and statistics, plus ``ethtool -S`` on mlx* devices for the PFC
    pause, discard and physical counters the kernel's statistics do not carry. Reads only:
    ``grep -H .`` prints "path:value" for every readable file in one process; a file that
    cannot be read (``speed`` and ``carrier`` of a down link give EINVAL) prints a "grep:"
    line that the parser skips.
    """
    parts = [
        ("boot_id", "cat /proc/sys/kernel/random/boot_id"),
        ("clock", "cat /proc/uptime"),
    ]
    for port in node.ports:
        if port.link_layer == LinkLayer.INFINIBAND or port.device.startswith("mlx"):
            base = _ib_sysfs(port)
            files = " ".join(
                f"{base}/{name}" for name in ("state", "phys_state", "rate", "link_layer")
            )
            parts.append(
                (
                    f"ib {port.device}:{port.port}",
                    f"grep -H . {files} {base}/counters/* {base}/hw_counters/*",
                )
            )
        if not port.netdev:
            continue
        netdev = arg.interface(port.netdev)
        net = f"/sys/class/net/{netdev}"
        files = " ".join(
            f"{net}/{name}" for name in ("operstate", "carrier", "carrier_changes", "speed")
        )
        parts.append((f"net {port.netdev}", f"grep -H . {files} {net}/statistics/*"))
        if port.device.startswith("mlx"):
            parts.append((f"ethtool {port.netdev}", f"ethtool -S {netdev}"))
    return sections(parts)


def telemetry_rates(node: PlanNode) -> dict[str, float]:
    """The rate (Gb/s) the inventory expects of each port the telemetry poll reads, by
    the key ``gpulease_verify.telemetry`` gives it: ``device:port`` for its sysfs port,
    the netdev for its net port."""
    rates: dict[str, float] = {}
    for port in node.ports:
        if port.link_layer == LinkLayer.INFINIBAND or port.device.startswith("mlx"):
            rates[f"{port.device}:{port.port}"] = float(port.rate_gbps)
        if port.netdev:
            rates[port.netdev] = float(port.rate_gbps)
    return rates


def iperf3_streams(contracted_gbps: float) -> int:
    """One TCP stream carries roughly 20 Gbit/s on current servers; use enough of them to
    fill the contracted rate, at most 16."""
    return max(1, min(16, math.ceil(contracted_gbps / 20)))


def _data_address(node: PlanNode) -> str:
    if node.data_address is None:
        raise arg.UnsafeValue(
            f"refusing to build the command: node {node.hostname!r} has no data address"
        )
    return arg.address(node.data_address)


@dataclass(frozen=True)
class PairCommands:
    server: str
    client: str


def iperf3_pair(
    *, client: PlanNode, server: PlanNode, seconds: int, streams: int, port: int
) -> PairCommands:
    server_address, client_address = _data_address(server), _data_address(client)
    tcp_port = arg.tcp_port(port)
    return PairCommands(
        server=f"iperf3 -s -1 -p {tcp_port} -B {server_address}",
        client=(
            f"iperf3 -c {server_address} -p {tcp_port} -B {client_address} -J "
            f"-t {arg.count(seconds, what='duration')} -O {IPERF3_OMIT_SECONDS} "
            f"-P {arg.count(streams, what='stream count', high=128)}"
        ),
    )


PERFTEST_TOOLS = frozenset({Tool.IB_WRITE_BW, Tool.IB_WRITE_LAT})


def perftest_pair(
    *, tool: str, client: PlanNode, server: PlanNode, seconds: int, port: int
) -> PairCommands:
    client_port, server_port = client.rdma_port, server.rdma_port
    assert client_port is not None and server_port is not None
    program = arg.one_of(tool, PERFTEST_TOOLS, what="perftest tool")
    bw = tool.endswith("_bw")
    extra = f"--report_gbits -D {arg.count(seconds, what='duration')}" if bw else "-n 10000"
    common = f"-p {arg.tcp_port(port)} {extra}"

    def side(rdma: PlanPort) -> str:
        return f"{program} -d {arg.rdma_device(rdma.device)} -i {arg.port_number(rdma.port)}"

    return PairCommands(
        server=f"{side(server_port)} {common}",
        client=f"{side(client_port)} {common} {_data_address(server)}",
    )


def ping_pair(*, client: PlanNode, server: PlanNode, count: int = 20) -> str:
    return (
        f"ping -n -q -c {arg.count(count, what='ping count')} -i 0.2 "
        f"-I {_data_address(client)} {_data_address(server)}"
    )


def _mpi_host(node: PlanNode) -> str:
    name = arg.address(node.data_address) if node.data_address else arg.hostname(node.hostname)
    return f"{name}:{arg.count(node.gpus, what='GPU count', low=0, high=1024)}"


# all_reduce_perf's message sizes (-b, -e; doubling each step).
ALL_REDUCE_SIZES = ("8", "1G")


def all_reduce(nodes: Sequence[PlanNode], sizes: tuple[str, str] = ALL_REDUCE_SIZES) -> str:
    # Each entry is quoted on its own; joined by ':' and ',' they stay one shell word.
    hosts = ",".join(_mpi_host(node) for node in nodes)
    ranks = sum(node.gpus for node in nodes)
    smallest, largest = sizes
    return (
        f"mpirun --allow-run-as-root -np {ranks} -H {hosts} -x NCCL_DEBUG=WARN "
        f"all_reduce_perf -b {smallest} -e {largest} -f 2 -g 1"
    )
