"""Which runs a probe kind makes for a lease's nodes, and which of them run together.

Pairs come from the topology:
- a ring through all nodes (n1>n2, n2>n3, ..., nN>n1), one pair at a time;
- cross-leaf pairs run at the same time, so an oversubscribed leaf uplink shows: with
  2:1 oversubscription, two nodes of one leaf sending to another leaf at once share one
  uplink and each gets about half;
- same-leaf pairs run at the same time, as the control that proves the hosts and their
  own links were not the bottleneck.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from benchmarks.choices import Pattern, Tool
from gpulease_verify.interpret import PlanNode as PlanNode
from gpulease_verify.interpret import PlanPort as PlanPort
from leases.choices import HEAVY_PROBE_KINDS, LinkLayer, ProbeKind, Technology


@dataclass(frozen=True)
class PlannedRun:
    kind: str
    tool: str
    pattern: str
    nodes: tuple[str, ...]  # for a pair: (client, server)

    @property
    def target(self) -> str:
        if self.pattern in (Pattern.ALL_NODES, Pattern.SWEEP):
            return "all"
        return ">".join(self.nodes)


@dataclass(frozen=True)
class PlannedBatch:
    kind: str
    pattern: str
    runs: tuple[PlannedRun, ...]

    @property
    def exclusive(self) -> bool:
        """Heavy batches hold their nodes: no two bandwidth probes share a node."""
        return self.kind in HEAVY_PROBE_KINDS

    @property
    def hostnames(self) -> tuple[str, ...]:
        return tuple(sorted({name for run in self.runs for name in run.nodes}))


def ring_pairs(nodes: Sequence[PlanNode]) -> list[tuple[PlanNode, PlanNode]]:
    if len(nodes) < 2:
        return []
    if len(nodes) == 2:
        return [(nodes[0], nodes[1])]
    return [(nodes[i], nodes[(i + 1) % len(nodes)]) for i in range(len(nodes))]


def cross_leaf_pairs(nodes: Sequence[PlanNode]) -> list[tuple[PlanNode, PlanNode]]:
    """Nodes ordered by leaf, first half paired with second half, keeping only pairs whose
    ends sit on different leaves: for 2 leaves of 2 nodes, h1>h3 and h2>h4."""
    ordered = sorted(nodes, key=lambda node: (node.leaf, node.hostname))
    half = len(ordered) // 2
    pairs = zip(ordered[:half], ordered[half : 2 * half], strict=True)
    return [(a, b) for a, b in pairs if a.leaf != b.leaf]


def same_leaf_pairs(nodes: Sequence[PlanNode]) -> list[tuple[PlanNode, PlanNode]]:
    pairs = []
    ordered = sorted(nodes, key=lambda node: (node.leaf, node.hostname))
    for _leaf, group in groupby(ordered, key=lambda node: node.leaf):
        members = list(group)
        pairs += [(members[i], members[i + 1]) for i in range(0, len(members) - 1, 2)]
    return pairs


def _pair_tools(kind: str, technology: str) -> list[str]:
    rdma = technology in (Technology.ROCE, Technology.INFINIBAND)
    if kind == ProbeKind.THROUGHPUT:
        # iperf3 always measures the TCP path; ib_write_bw the RDMA path where contracted.
        return [Tool.IPERF3, Tool.IB_WRITE_BW] if rdma else [Tool.IPERF3]
    return [Tool.IB_WRITE_LAT] if rdma else [Tool.PING]


# A node-level kind's tool: (for a lease with an InfiniBand port, for any other). A
# node-level kind is one sweep of every node (``gpulease_verify.sweep``); each node's check
# reads all of its ports whatever the tool's name says. The set-based dispatcher
# (benchmarks.node_runs) picks by the same table.
NODE_TOOLS: dict[str, tuple[str, str]] = {
    ProbeKind.LINK: (Tool.IBSTATUS, Tool.ETHTOOL),
    ProbeKind.COUNTERS: (Tool.COUNTERS, Tool.COUNTERS),
}


def plan_batches(*, kind: str, nodes: Sequence[PlanNode], technology: str) -> list[PlannedBatch]:
    nodes = sorted(nodes, key=lambda node: node.hostname)
    if kind in NODE_TOOLS:
        if not nodes:
            return []
        infiniband = any(p.link_layer == LinkLayer.INFINIBAND for n in nodes for p in n.ports)
        tool = NODE_TOOLS[kind][0 if infiniband else 1]
        run = PlannedRun(kind, tool, Pattern.SWEEP, tuple(node.hostname for node in nodes))
        return [PlannedBatch(kind, Pattern.SWEEP, (run,))]
    if kind == ProbeKind.COLLECTIVE:
        if len(nodes) < 2:
            return []
        run = PlannedRun(
            kind, Tool.ALL_REDUCE_PERF, Pattern.ALL_NODES, tuple(n.hostname for n in nodes)
        )
        return [PlannedBatch(kind, Pattern.ALL_NODES, (run,))]

    batches = []
    for tool in _pair_tools(kind, technology):

        def runs(pairs, pattern, tool=tool):  # type: ignore[no-untyped-def]
            return tuple(
                PlannedRun(kind, tool, pattern, (a.hostname, b.hostname)) for a, b in pairs
            )

        for pair in ring_pairs(nodes):
            batches.append(PlannedBatch(kind, Pattern.RING, runs([pair], Pattern.RING)))
        if kind == ProbeKind.THROUGHPUT:
            cross = cross_leaf_pairs(nodes)
            if len(cross) >= 2:
                batches.append(
                    PlannedBatch(kind, Pattern.CROSS_LEAF, runs(cross, Pattern.CROSS_LEAF))
                )
            same = same_leaf_pairs(nodes)
            if len(same) >= 2:
                batches.append(PlannedBatch(kind, Pattern.SAME_LEAF, runs(same, Pattern.SAME_LEAF)))
    return batches
