"""The measuring guide a customer follows: the probes' own commands, built from the lease's
inventory (its nodes, their NIC ports, devices, interfaces and data addresses), so that what
the customer runs by hand is what gpulease runs on schedule, and passes or fails alike.

One block per port: the lease's first two nodes (by hostname) measured port to port, the
n-th port of one against the n-th port of the other (a bonded pair is one RDMA device,
``mlx5_bond_0``, so it is one block). Each block holds iperf3 between the two ports' data
addresses and, on an RDMA port, ``ib_write_bw`` on its device; a command that cannot be
built says why instead (``Missing``: a port without a data address, or a value the argument
checks refuse).
Every value is checked and quoted by ``benchmarks.probes.arguments``, as for the probes.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, replace

from benchmarks.choices import Tool
from benchmarks.probes import arguments as arg
from benchmarks.probes import commands
from benchmarks.probes.plan import PlanNode, PlanPort

# A human run: long enough to settle, short enough to repeat (the probes' ib_write_bw also
# writes for 10 s).
GUIDE_SECONDS = 10
# perftest's default TCP port for its out-of-band exchange.
PERFTEST_PORT = 18515


@dataclass(frozen=True)
class Missing:
    """A command the guide could not build: the node whose port has no data address, or
    (no node) a value of the inventory that the argument checks refuse."""

    tool: str
    no_address_on: str = ""


@dataclass(frozen=True)
class PortBlock:
    """The commands that measure one port of the client against the same port of the
    server. A command is empty where it cannot be built; ``missing`` says why."""

    label: str
    rate_gbps: int
    link_layer: str
    client: str
    server: str
    iperf3: commands.PairCommands | None
    rdma: commands.PairCommands | None
    missing: tuple[Missing, ...]


@dataclass(frozen=True)
class Guide:
    link_checks: tuple[tuple[str, str], ...]  # (hostname, command)
    ports: tuple[PortBlock, ...]
    mpirun: str
    rdma_devices: tuple[str, ...]


def _port_label(port: PlanPort) -> str:
    return f"{port.device}/{port.port}" + (f" ({port.netdev})" if port.netdev else "")


def _single(node: PlanNode, port: PlanPort) -> PlanNode:
    """The node as a probe of this one port sees it: its data address is the port's."""
    return replace(node, ports=(port,))


def _port_block(index: int, client: PlanNode, server: PlanNode) -> PortBlock:
    mine, theirs = client.ports[index], server.ports[index]
    missing: list[Missing] = []
    iperf3 = rdma = None
    one_client, one_server = _single(client, mine), _single(server, theirs)
    without = [
        node.hostname for node, port in ((client, mine), (server, theirs)) if not port.address
    ]
    if without:
        missing.append(Missing("iperf3", without[0]))
    else:
        try:
            iperf3 = commands.iperf3_pair(
                client=one_client,
                server=one_server,
                seconds=GUIDE_SECONDS,
                streams=commands.iperf3_streams(mine.rate_gbps),
                port=commands.IPERF3_BASE_PORT + index,
            )
        except arg.UnsafeValue:
            missing.append(Missing("iperf3"))
    if mine.device.startswith("mlx") and theirs.device.startswith("mlx"):
        if not theirs.address:
            missing.append(Missing("ib_write_bw", server.hostname))
        else:
            try:
                rdma = commands.perftest_pair(
                    tool=Tool.IB_WRITE_BW,
                    client=one_client,
                    server=one_server,
                    seconds=GUIDE_SECONDS,
                    port=PERFTEST_PORT + index,
                )
            except arg.UnsafeValue:
                missing.append(Missing("ib_write_bw"))
    return PortBlock(
        label=_port_label(mine),
        rate_gbps=mine.rate_gbps,
        link_layer=mine.link_layer,
        client=client.hostname,
        server=server.hostname,
        iperf3=iperf3,
        rdma=rdma,
        missing=tuple(missing),
    )


def rdma_devices(nodes: Sequence[PlanNode]) -> tuple[str, ...]:
    return tuple(sorted({p.device for n in nodes for p in n.ports if p.device.startswith("mlx")}))


def mpirun(nodes: Sequence[PlanNode]) -> str:
    """nccl-tests across ``nodes``, one process per GPU, NCCL told the lease's own RDMA
    devices and the first node's data interface; every value quoted for a POSIX shell.
    Unlike the probe (``commands.all_reduce``) it asks for NCCL_DEBUG=INFO, whose output
    says whether NCCL used the network (NET/IB) or fell back to TCP (NET/Socket)."""
    if not nodes:
        return ""
    hosts = ",".join(f"{node.hostname}:{node.gpus}" for node in nodes)
    ranks = sum(node.gpus for node in nodes)
    devices = rdma_devices(nodes)
    interface = next((p.netdev for p in nodes[0].ports if p.address and p.netdev), "")
    head = ["mpirun", "-np", str(ranks), "-H", hosts]
    env = []
    if devices:
        env += ["-x", "NCCL_IB_HCA=" + ",".join(devices)]
    if interface:
        env += ["-x", f"NCCL_SOCKET_IFNAME={interface}"]
    env += ["-x", "NCCL_DEBUG=INFO"]
    tail = ["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
    return " \\\n  ".join(shlex.join(part) for part in (head, env, tail))


def build(nodes: Sequence[PlanNode]) -> Guide:
    """The guide for ``nodes`` (the lease's nodes in force), sorted by hostname."""
    ordered = sorted(nodes, key=lambda node: node.hostname)
    checks = []
    for node in ordered:
        try:
            checks.append((node.hostname, commands.link_check(node)))
        except arg.UnsafeValue:
            continue
    blocks: list[PortBlock] = []
    if len(ordered) >= 2:
        client, server = ordered[0], ordered[1]
        blocks = [
            _port_block(index, client, server)
            for index in range(min(len(client.ports), len(server.ports)))
        ]
    return Guide(
        link_checks=tuple(checks),
        ports=tuple(blocks),
        mpirun=mpirun(ordered),
        rdma_devices=rdma_devices(ordered),
    )
