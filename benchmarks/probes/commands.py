"""The exact commands a probe runs. What is built here is what is stored in ProbeRun.command,
so an auditor can run the same thing by hand.

A node-level check that reads several things prints each under a "### label" header line,
so one raw output holds them all and `split_sections` takes them apart again.
"""

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.probes.plan import PlanNode, PlanPort
from leases.choices import LinkLayer

SECTION = re.compile(r"^### (.+)$", re.MULTILINE)
IPERF3_BASE_PORT = 5201
# TCP slow start is not the network's capacity: iperf3 leaves the first second out.
IPERF3_OMIT_SECONDS = 1


def _q(value: object) -> str:
    return shlex.quote(str(value))


def sections(parts: Sequence[tuple[str, str]]) -> str:
    """One shell command that prints each part under a '### label' header."""
    return "; ".join(f"echo {_q('### ' + label)}; {command} 2>&1" for label, command in parts)


def split_sections(text: str) -> dict[str, str]:
    found = list(SECTION.finditer(text))
    return {
        match.group(1).strip(): text[
            match.end() + 1 : found[i + 1].start() if i + 1 < len(found) else len(text)
        ]
        for i, match in enumerate(found)
    }


def link_check(node: PlanNode) -> str:
    """Port state and speed, plus the link-down counter whose movement is a flap."""
    parts = []
    for port in node.ports:
        if port.link_layer == LinkLayer.INFINIBAND:
            parts.append(
                (f"ibstatus {port.device}:{port.port}", f"ibstatus {_q(port.device)}:{port.port}")
            )
            parts.append(
                (
                    f"link_downed {port.device}:{port.port}",
                    f"cat /sys/class/infiniband/{_q(port.device)}/ports/{port.port}"
                    "/counters/link_downed",
                )
            )
        elif port.netdev:
            parts.append((f"ethtool {port.netdev}", f"ethtool {_q(port.netdev)}"))
            parts.append(
                (
                    f"carrier_down_count {port.netdev}",
                    f"cat /sys/class/net/{_q(port.netdev)}/carrier_down_count",
                )
            )
    return sections(parts)


def _port_counters(port: PlanPort) -> tuple[str, str] | None:
    if port.link_layer == LinkLayer.INFINIBAND:
        path = f"/sys/class/infiniband/{_q(port.device)}/ports/{port.port}/counters/*"
        return (f"counters {port.device}:{port.port}", f"grep -H . {path}")
    if not port.netdev:
        return None
    if port.device.startswith("mlx"):
        # mlx5's *_phy counters include RoCE traffic that the kernel's netdev stats miss.
        return (
            f"counters {port.netdev}",
            f"echo '# ethtool -S {port.netdev}'; ethtool -S {_q(port.netdev)}",
        )
    base = f"/sys/class/net/{_q(port.netdev)}"
    return (f"counters {port.netdev}", f"grep -H . {base}/statistics/* {base}/carrier_down_count")


def counters(node: PlanNode) -> str:
    return sections([part for port in node.ports if (part := _port_counters(port))])


def iperf3_streams(contracted_gbps: float) -> int:
    """One TCP stream carries roughly 20 Gbit/s on current servers; use enough of them to
    fill the contracted rate, at most 16."""
    return max(1, min(16, math.ceil(contracted_gbps / 20)))


@dataclass(frozen=True)
class PairCommands:
    server: str
    client: str


def iperf3_pair(
    *, client: PlanNode, server: PlanNode, seconds: int, streams: int, port: int
) -> PairCommands:
    server_address, client_address = server.data_address, client.data_address
    return PairCommands(
        server=f"iperf3 -s -1 -p {port} -B {_q(server_address)}",
        client=(
            f"iperf3 -c {_q(server_address)} -p {port} -B {_q(client_address)} -J "
            f"-t {seconds} -O {IPERF3_OMIT_SECONDS} -P {streams}"
        ),
    )


def perftest_pair(
    *, tool: str, client: PlanNode, server: PlanNode, seconds: int, port: int
) -> PairCommands:
    client_port, server_port = client.rdma_port, server.rdma_port
    assert client_port is not None and server_port is not None
    bw = tool.endswith("_bw")
    extra = f"--report_gbits -D {seconds}" if bw else "-n 10000"
    common = f"-p {port} {extra}"
    return PairCommands(
        server=f"{tool} -d {_q(server_port.device)} -i {server_port.port} {common}",
        client=(
            f"{tool} -d {_q(client_port.device)} -i {client_port.port} {common} "
            f"{_q(server.data_address)}"
        ),
    )


def ping_pair(*, client: PlanNode, server: PlanNode, count: int = 20) -> str:
    return f"ping -n -q -c {count} -i 0.2 -I {_q(client.data_address)} {_q(server.data_address)}"


def all_reduce(nodes: Sequence[PlanNode]) -> str:
    hosts = ",".join(f"{node.data_address or node.hostname}:{node.gpus}" for node in nodes)
    ranks = sum(node.gpus for node in nodes)
    return (
        f"mpirun --allow-run-as-root -np {ranks} -H {hosts} -x NCCL_DEBUG=WARN "
        "all_reduce_perf -b 8 -e 1G -f 2 -g 1"
    )
