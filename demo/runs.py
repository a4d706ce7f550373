"""The demo's runs one at a time (``demo.history`` schedules them): what each
tool prints (``benchmarks.demo_outputs``) or each node prints for a sweep, with the
command the probe runs, read and judged by the probes' own interpreter against the terms
in force, as ``benchmarks.services.record_execution`` reads a real run; and, for a
throughput pair whose client's switch port is read, its switch-side witness block from
the node's timeline (``benchmarks.demo_traffic``)."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings

from benchmarks import demo_outputs
from benchmarks import witness as switch_witness
from benchmarks.choices import Pattern, RunState, Tool, Trigger
from benchmarks.demo_traffic import PortTimeline
from benchmarks.models import ProbeRun
from benchmarks.probes import commands, runner
from benchmarks.probes.plan import PlannedRun, PlanNode
from benchmarks.recording import terms_view, witnessed_pair
from benchmarks.switch_snmp import SwitchPortReading
from gpulease_verify import probe_tax, sweep, verdicts
from gpulease_verify.interpret import Interpretation, interpret
from gpulease_verify.probe_tax import ProbeSend
from leases.choices import LinkLayer, ProbeKind
from leases.models import Lease, LeaseTerms, Node
from leases.selectors import TermsTimeline
from telemetry import demo as telemetry_demo

CADENCE = timedelta(hours=2)

GIGA = 10**9

SWEEP_TAKES = timedelta(seconds=12)

# How long each tool's run takes, start to finish: iperf3 -t 10 -O 1 sends 11 s,
# ib_write_bw -D 10 writes 10 s, ib_write_lat -n 10000 is over in well under a second,
# all_reduce_perf 128 MiB to 1 GiB on 32 ranks about 15 s; plus connecting.
TAKES: dict[str, timedelta] = {
    Tool.IPERF3: timedelta(seconds=12),
    Tool.IB_WRITE_BW: timedelta(seconds=12),
    Tool.IB_WRITE_LAT: timedelta(seconds=3),
    Tool.ALL_REDUCE_PERF: timedelta(seconds=20),
}

PERFTEST_LAT_ITERATIONS = 10000  # ib_write_lat -n, as commands.perftest_pair runs it

# nccl-tests runs -b 128M -e 1G here, not the probe's -b 8 -e 1G: its "Avg bus bandwidth"
# is the mean over every size, and from 8 bytes up most sizes are latency-bound, so the
# probe's own range averages well under half of a healthy fabric's bus bandwidth, below
# any floor near the link rate. The demo keeps its output honest (its average is the mean
# of its rows) and its floors met.
NCCL_SIZES = ("128M", "1G")

NCCL_BYTES = (128 * 2**20, 2**30)

# The link-down counters a node's ports show after boot: the carrier went down once.
CARRIER_DOWNS_AT_BOOT = 1


@dataclass
class Heavy:
    """A heavy run made, with what its output parsed to (the witness is added later)."""

    run: ProbeRun
    result: Interpretation
    nodes: list[str]


@dataclass(frozen=True)
class SweepSpec:
    """A link or counters sweep to print once the nodes' timelines are known."""

    kind: str
    terms: LeaseTerms
    slot: datetime
    started: datetime
    took: timedelta
    trigger: str
    cadence: timedelta


@dataclass
class LeaseDemo:
    """One lease's generated history, stored bit by bit (``store``)."""

    lease: Lease
    nodes: list[Node]
    plan: dict[str, PlanNode]
    timeline: TermsTimeline
    site_id: int
    rng: random.Random  # the outputs' details
    heavy: list[Heavy] = field(default_factory=list)
    sweeps: list[SweepSpec] = field(default_factory=list)
    ports: dict[str, list[PortTimeline]] = field(default_factory=dict)
    witness: dict[str, switch_witness.WitnessPort] = field(default_factory=dict)
    reboots: dict[str, datetime] = field(default_factory=dict)
    # The leaf switches' port counters were cleared a day before the history begins.
    switch_cleared: datetime | None = None
    pending: list[tuple[ProbeRun, list[Node]]] = field(default_factory=list)
    stored: int = 0

    @property
    def by_name(self) -> dict[str, Node]:
        return {node.hostname: node for node in self.nodes}


def probe_run(
    *,
    demo: LeaseDemo,
    terms: LeaseTerms,
    kind: str,
    tool: str,
    target: str,
    pattern: str,
    slot: datetime,
    raw: str,
    command: str,
    judgement: verdicts.Judgement,
    started: datetime,
    took: timedelta,
    trigger: str = Trigger.SCHEDULE,
    cadence: timedelta = CADENCE,
    **figures: Any,
) -> ProbeRun:
    return ProbeRun(
        lease=demo.lease,
        kind=kind,
        tool=tool,
        target=target,
        pattern=pattern,
        trigger=trigger,
        slot_at=slot,
        deadline_at=slot + cadence,
        site_id=demo.site_id,
        state=RunState.OK,
        attempts=1,
        started_at=started,
        finished_at=started + took,
        command=command,
        raw_output=raw,
        raw_sha256=hashlib.sha256(raw.encode()).hexdigest(),
        exit_code=0,
        terms=terms,
        verdict=judgement.verdict,
        rule=judgement.rule,
        verdict_reason=judgement.reason,
        **figures,
    )


# --- heavy runs: what the tools print -------------------------------------------------------


def pair(
    demo: LeaseDemo,
    *,
    kind: str,
    tool: str,
    pattern: str,
    client: str,
    server: str,
    terms: LeaseTerms,
    slot: datetime,
    started: datetime,
    figure: float,
    trigger: str = Trigger.SCHEDULE,
    cadence: timedelta = CADENCE,
    index: int = 0,
) -> Heavy:
    """A pair run of ``tool`` from ``client`` to ``server`` whose tool printed ``figure``
    (bit/s, or µs for a latency tool), with the command the probe runs (``index``: its
    place in a batch of concurrent pairs, which picks its TCP port)."""
    options = runner.Options(
        throughput_seconds=settings.PROBE_THROUGHPUT_SECONDS,
        contracted_gbps=float(terms.contracted_bandwidth_gbps),
    )
    planned = PlannedRun(kind, tool, pattern, (client, server))
    command = runner.pair_command(
        client, server, runner.planned_commands(planned, index, demo.plan, options)
    )
    source, target = demo.plan[client], demo.plan[server]
    if tool == Tool.IPERF3:
        assert source.data_address and target.data_address
        run = demo_outputs.Iperf3Run(
            client=client,
            client_address=source.data_address,
            server_address=target.data_address,
            port=commands.IPERF3_BASE_PORT + index,
            seconds=options.throughput_seconds,
            omit=commands.IPERF3_OMIT_SECONDS,
            streams=commands.iperf3_streams(options.contracted_gbps),
            started=started,
        )
        raw = demo_outputs.iperf3_client(demo.rng, run, figure)
    elif tool == Tool.IB_WRITE_BW:
        assert source.rdma_port is not None
        raw = demo_outputs.ib_write_bw(
            demo.rng,
            device=source.rdma_port.device,
            seconds=options.throughput_seconds,
            rate_bps=figure,
        )
    elif tool == Tool.IB_WRITE_LAT:
        assert source.rdma_port is not None
        raw = demo_outputs.ib_write_lat(
            demo.rng,
            device=source.rdma_port.device,
            iterations=PERFTEST_LAT_ITERATIONS,
            typical_us=figure,
        )
    else:
        raise ValueError(f"the demo prints no {tool} output")
    result = interpret(tool=tool, raw_output=raw, terms=terms_view(terms))
    return Heavy(
        probe_run(
            demo=demo,
            terms=terms,
            kind=kind,
            tool=tool,
            target=planned.target,
            pattern=pattern,
            slot=slot,
            raw=raw,
            command=command,
            judgement=result.judgement,
            started=started,
            took=TAKES[tool],
            trigger=trigger,
            cadence=cadence,
            parsed=result.parsed,
            measured_bps=result.measured_bps,
            latency_us=result.latency_us,
        ),
        result,
        [client, server],
    )


def collective(
    demo: LeaseDemo,
    *,
    terms: LeaseTerms,
    slot: datetime,
    started: datetime,
    busbw: float,
    trigger: str = Trigger.SCHEDULE,
    cadence: timedelta = CADENCE,
) -> Heavy:
    """An all_reduce_perf run over every node whose large messages ran at ``busbw``."""
    nodes = [demo.plan[name] for name in sorted(demo.plan)]
    raw = demo_outputs.all_reduce_perf(
        demo.rng,
        hosts=[node.hostname for node in nodes],
        gpus=nodes[0].gpus,
        gpu_model=demo.nodes[0].gpu_model,
        sizes=demo_outputs.nccl_sizes(*NCCL_BYTES),
        busbw_bps=busbw,
    )
    result = interpret(tool=Tool.ALL_REDUCE_PERF, raw_output=raw, terms=terms_view(terms))
    return Heavy(
        probe_run(
            demo=demo,
            terms=terms,
            kind=ProbeKind.COLLECTIVE,
            tool=Tool.ALL_REDUCE_PERF,
            target="all",
            pattern=Pattern.ALL_NODES,
            slot=slot,
            raw=raw,
            command=commands.all_reduce(nodes, sizes=NCCL_SIZES),
            judgement=result.judgement,
            started=started,
            took=TAKES[Tool.ALL_REDUCE_PERF],
            trigger=trigger,
            cadence=cadence,
            parsed=result.parsed,
            measured_bps=result.measured_bps,
        ),
        result,
        [node.hostname for node in nodes],
    )


def busbw(rng: random.Random, terms: LeaseTerms) -> float:
    """Near the per-node contract, as a healthy ring all-reduce runs (and the
    training-impact estimate expects), never below the contracted floor."""
    contracted = float(terms.contracted_bandwidth_gbps) * GIGA
    floor = float(terms.collective_busbw_floor_gbps or 0) * GIGA
    return max(contracted * rng.uniform(0.90, 0.96), floor * rng.uniform(1.02, 1.08))


def sends_of(heavy: Heavy) -> list[ProbeSend]:
    """What the run sent, node by node, read from its output as the probe tax reads it."""
    run = heavy.run
    assert run.started_at is not None and run.finished_at is not None
    sent = probe_tax.bytes_sent(
        tool=run.tool,
        state=run.state,
        parsed=heavy.result.parsed,
        raw_output=run.raw_output,
        command=run.command,
        target=run.target,
        nodes=heavy.nodes,
    )
    return [ProbeSend(node, count, run.started_at, run.finished_at) for node, count in sent.items()]


# --- sweeps: what the nodes print --------------------------------------------------------------


def _link_downs(demo: LeaseDemo, name: str, at: datetime) -> dict[str, int]:
    """Port label -> the link-down counter the link check prints at ``at``: InfiniBand's
    ``link_downed`` (0 after boot), a netdev's ``carrier_down_count``."""
    counts = {}
    for port, timeline in zip(demo.plan[name].ports, demo.ports[name], strict=True):
        if port.link_layer == LinkLayer.INFINIBAND:
            counts[f"{port.device}:{port.port}"] = timeline.downs(at)
        elif port.netdev:
            counts[port.netdev] = CARRIER_DOWNS_AT_BOOT + timeline.downs(at)
    return counts


def _link_output(node: PlanNode, downs: dict[str, int]) -> str:
    """What the link check prints on a node whose every port is up at its rate, in the
    tools' own formats after a first line saying it is synthetic (so that it parses, as a
    real one would)."""
    parts = []
    for port in node.ports:
        if port.link_layer == LinkLayer.INFINIBAND:
            label = f"{port.device}:{port.port}"
            parts.append(
                f"### ibstatus {label}\nInfiniband device '{port.device}' port {port.port} "
                f"status:\n\tstate:\t\t 4: ACTIVE\n\tphys state:\t 5: LinkUp\n"
                f"\trate:\t\t {port.rate_gbps} Gb/sec (4X)\n\tlink_layer:\t InfiniBand\n"
                f"### link_downed {label}\n{downs[label]}\n"
            )
        elif port.netdev:
            parts.append(
                f"### ethtool {port.netdev}\nSettings for {port.netdev}:\n"
                f"\tSpeed: {port.rate_gbps * 1000}Mb/s\n\tDuplex: Full\n\tLink detected: yes\n"
                f"### carrier_down_count {port.netdev}\n{downs[port.netdev]}\n"
            )
    return demo_outputs.synthetic("link check", "".join(parts).rstrip("\n"))


def sweep_run(
    demo: LeaseDemo,
    spec: SweepSpec,
    *,
    tool: str,
    outputs: dict[str, str],
    previous: dict[str, dict[str, int]] | None = None,
) -> ProbeRun:
    """A sweep of every node (``gpulease_verify.sweep``) whose nodes printed ``outputs``
    (hostname -> output) for the probe's own commands, judged by the probes' own rules."""
    view = terms_view(spec.terms)
    build = commands.counters if spec.kind == ProbeKind.COUNTERS else commands.link_check
    printed = [
        sweep.NodeOutput(
            node=name, state=RunState.OK, command=build(demo.plan[name]), exit_code=0, stdout=text
        )
        for name, text in sorted(outputs.items())
    ]
    results = [
        sweep.interpret_node(
            tool=tool,
            output=output,
            terms=view,
            node=demo.plan[output.node],
            previous_link_down=(previous or {}).get(output.node),
        )
        for output in printed
    ]
    judged = sweep.judge(tool=tool, results=results, terms=view)
    return probe_run(
        demo=demo,
        terms=spec.terms,
        kind=spec.kind,
        tool=tool,
        target=sweep.ALL,
        pattern=Pattern.SWEEP,
        slot=spec.slot,
        raw=sweep.transcript(printed),
        command="",
        judgement=verdicts.Judgement(judged.verdict, judged.rule, judged.reason),
        started=spec.started,
        took=spec.took,
        trigger=spec.trigger,
        cadence=spec.cadence,
        parsed=sweep.parsed_of(results),
    )


def link_sweep(demo: LeaseDemo, spec: SweepSpec, previous_at: datetime) -> ProbeRun:
    """A link check of every node, every port up at its rate; its link-down counters as
    the nodes' outages left them, against those of the check before (``previous_at``)."""
    infiniband = any(
        p.link_layer == LinkLayer.INFINIBAND for n in demo.plan.values() for p in n.ports
    )
    return sweep_run(
        demo,
        spec,
        tool=Tool.IBSTATUS if infiniband else Tool.ETHTOOL,
        outputs={
            name: _link_output(node, _link_downs(demo, name, spec.started))
            for name, node in demo.plan.items()
        },
        previous={name: _link_downs(demo, name, previous_at) for name in demo.plan},
    )


# --- the switch-side witness ---------------------------------------------------------------


def _switch_reading(demo: LeaseDemo, name: str, at: datetime) -> SwitchPortReading:
    """The witness port of node ``name`` as its switch counts it at ``at``."""
    return telemetry_demo.switch_reading(
        demo.witness[name], demo.ports[name][0], at, demo.switch_cleared or demo.lease.starts_at
    )


def witnessed(demo: LeaseDemo, heavy: Heavy) -> None:
    """A throughput pair whose client's switch port is read: its witness block, read just
    before the batch and once the switch's counters caught up after it, as
    ``benchmarks.execution.execute_batch`` reads it."""
    run = heavy.run
    client = run.target.split(">")[0]
    if run.kind != ProbeKind.THROUGHPUT or client not in demo.witness:
        return
    assert run.started_at is not None and run.finished_at is not None and run.terms
    witnessed = switch_witness.Witnessed(
        ports={client: demo.witness[client]},
        before={client: _switch_reading(demo, client, run.started_at - timedelta(seconds=1))},
        after={
            client: _switch_reading(
                demo, client, run.finished_at + timedelta(seconds=settings.WITNESS_SETTLE_S)
            )
        },
    )
    parsed, judgement = witnessed_pair(
        run=run, result=heavy.result, terms=run.terms, witnessed=witnessed
    )
    run.parsed = parsed
    run.verdict, run.rule, run.verdict_reason = judgement.verdict, judgement.rule, judgement.reason
