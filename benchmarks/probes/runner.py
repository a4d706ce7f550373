"""Execute one batch of runs over the transports, all of its runs at the same time.

Pairs start their servers first, wait until every server listens, then release all
clients together (a barrier), so concurrent pairs really overlap. Every server is stopped
whatever happens. The runner returns what happened; parsing and verdicts happen later,
from the stored raw output, so they can be redone."""

import asyncio
import concurrent.futures
import contextlib
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from benchmarks.choices import Pattern, RunState, Tool
from benchmarks.probes import commands
from benchmarks.probes.arguments import UnsafeValue
from benchmarks.probes.plan import PlannedRun, PlanNode
from benchmarks.transports import (
    AsyncTransport,
    BackgroundProcess,
    CommandResult,
    CommandTimeout,
    HostKeyRejected,
    NotReady,
    TransportError,
)
from gpulease_verify import sweep

NODE_CHECK_TIMEOUT_S = 60.0
SERVER_READY_TIMEOUT_S = 10.0
PERFTEST_BASE_PORT = 18515


@dataclass(frozen=True)
class Options:
    throughput_seconds: int = 10
    contracted_gbps: float = 100.0
    max_output_bytes: int = 4 * 1024 * 1024
    # A pair's client may run this long past its nominal duration before it is killed.
    grace_seconds: int = 60


@dataclass
class Execution:
    """What one run did. ``state`` is only a transport-level outcome (ok, timeout,
    unreachable, failed); parsing may still turn an ok into unparsable."""

    command: str = ""
    raw_output: str = ""
    stderr: str = ""
    exit_code: int | None = None
    truncated: bool = False
    state: str = RunState.OK
    error: str = ""
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    seconds: float = 0.0
    # A sweep's nodes, each as its transcript records it (``raw_output`` is the transcript).
    nodes: list[sweep.NodeOutput] = field(default_factory=list)


class _Connections:
    """One transport per node for the whole batch, opened on first use."""

    def __init__(self, connect: Callable[[str], AsyncTransport]):
        self._connect = connect
        self._open: dict[str, AsyncTransport] = {}

    def __call__(self, hostname: str) -> AsyncTransport:
        if hostname not in self._open:
            self._open[hostname] = self._connect(hostname)
        return self._open[hostname]

    async def close(self) -> None:
        for transport in self._open.values():
            with contextlib.suppress(TransportError):
                await transport.close()


def _outcome(execution: Execution, result: CommandResult) -> Execution:
    execution.raw_output = result.stdout
    execution.stderr = result.stderr
    execution.exit_code = result.exit_code
    execution.truncated = result.truncated
    if result.exit_code != 0:
        execution.state = RunState.FAILED
        execution.error = f"exit status {result.exit_code}"
    return execution


def _failure(execution: Execution, error: TransportError) -> Execution:
    if isinstance(error, CommandTimeout):
        _outcome(execution, error.partial)
        execution.state = RunState.TIMEOUT
    elif isinstance(error, HostKeyRejected):
        execution.state = RunState.FAILED
    else:
        execution.state = RunState.UNREACHABLE
    execution.error = error.reason
    return execution


def _listening(port: int) -> str:
    """A shell check that passes once something listens on TCP ``port`` (up to 10 s)."""
    return (
        f"i=0; while [ $i -lt 1000 ]; do ss -Hltn {shlex.quote(f'sport = :{int(port)}')} "
        "| grep -q . && break; sleep 0.01; i=$((i+1)); done; [ $i -lt 1000 ]"
    )


async def run_batch(
    *,
    runs: Sequence[PlannedRun],
    nodes: dict[str, PlanNode],
    connect: Callable[[str], AsyncTransport],
    options: Options,
    ready: concurrent.futures.Future | None = None,
    close: bool = True,
) -> list[Execution]:
    """Run the batch's runs together. ``ready``: work done elsewhere (the switch witness's
    reading before the batch) that every pair waits for at its start line, so that it
    overlaps the logins and server starts but is over before any client sends.
    ``close``: close the transports afterwards (not when they are kept open for the next
    batch: ``benchmarks.transports.kept_open``)."""
    connections = _Connections(connect)
    pairs = [run for run in runs if len(run.nodes) == 2 and run.tool != Tool.ALL_REDUCE_PERF]
    barrier = asyncio.Barrier(len(pairs)) if pairs else None
    waited = asyncio.wrap_future(ready) if ready is not None else None
    try:
        return list(
            await asyncio.gather(
                *(
                    _run_one(run, index, nodes, connections, options, barrier, waited)
                    for index, run in enumerate(runs)
                )
            )
        )
    finally:
        if close:
            await connections.close()


async def _run_one(
    run: PlannedRun,
    index: int,
    nodes: dict[str, PlanNode],
    connections: _Connections,
    options: Options,
    barrier: asyncio.Barrier | None,
    ready: asyncio.Future | None = None,
) -> Execution:
    execution = Execution()
    started = time.monotonic()
    try:
        if run.pattern == Pattern.SWEEP:
            await _sweep(execution, run, nodes, connections, options)
        elif run.tool in (Tool.ETHTOOL, Tool.IBSTATUS, Tool.COUNTERS):
            await _node_check(execution, run, index, nodes, connections, options)
        elif run.tool == Tool.ALL_REDUCE_PERF:
            execution.command = planned_commands(run, index, nodes, options).client
            result = await connections(run.nodes[0]).run(
                execution.command, timeout_s=1800, max_output_bytes=options.max_output_bytes
            )
            _outcome(execution, result)
        else:
            await _pair(execution, run, index, nodes, connections, options, barrier, ready)
    except TransportError as error:
        _failure(execution, error)
    except UnsafeValue as error:
        execution.state = RunState.FAILED
        execution.error = str(error)
    except asyncio.BrokenBarrierError:
        execution.state = RunState.FAILED
        execution.error = "another pair of this batch could not start, so none ran together"
    finally:
        execution.finished_at = datetime.now(UTC)
        execution.seconds = time.monotonic() - started
    return execution


def planned_commands(
    run: PlannedRun, index: int, nodes: dict[str, PlanNode], options: Options
) -> commands.PairCommands:
    """The commands of one run. Only a pair has a server side; the client side of a node
    check or of all_reduce_perf runs on the run's first node. Raises UnsafeValue rather
    than build a command from a value that breaks the inventory's rules."""
    if run.tool in (Tool.ETHTOOL, Tool.IBSTATUS, Tool.COUNTERS):
        build = commands.counters if run.tool == Tool.COUNTERS else commands.link_check
        return commands.PairCommands(server="", client=build(nodes[run.nodes[0]]))
    if run.tool == Tool.ALL_REDUCE_PERF:
        command = commands.all_reduce([nodes[name] for name in run.nodes])
        return commands.PairCommands(server="", client=command)
    client, server = nodes[run.nodes[0]], nodes[run.nodes[1]]
    if run.tool == Tool.PING:
        return commands.PairCommands(
            server="", client=commands.ping_pair(client=client, server=server)
        )
    if run.tool == Tool.IPERF3:
        return commands.iperf3_pair(
            client=client,
            server=server,
            seconds=options.throughput_seconds,
            streams=commands.iperf3_streams(options.contracted_gbps),
            port=commands.IPERF3_BASE_PORT + index,
        )
    return commands.perftest_pair(
        tool=run.tool,
        client=client,
        server=server,
        seconds=options.throughput_seconds,
        port=PERFTEST_BASE_PORT + index,
    )


async def _node_check(execution, run, index, nodes, connections, options) -> None:  # type: ignore[no-untyped-def]
    node = nodes[run.nodes[0]]
    execution.command = planned_commands(run, index, nodes, options).client
    result = await connections(node.hostname).run(
        execution.command,
        timeout_s=NODE_CHECK_TIMEOUT_S,
        max_output_bytes=options.max_output_bytes,
    )
    _outcome(execution, result)
    if execution.state == RunState.FAILED and execution.raw_output.strip():
        # A section may fail (a tool missing) while others printed: parsing decides.
        execution.state = RunState.OK
        execution.error = ""


def node_checks(run: PlannedRun) -> list[PlannedRun]:
    """A sweep's checks, one per node (each node's command reads all of its ports)."""
    return [PlannedRun(run.kind, run.tool, Pattern.NODE, (name,)) for name in run.nodes]


async def _sweep(execution, run, nodes, connections, options) -> None:  # type: ignore[no-untyped-def]
    """Every node's check at once, each on its own; the transcript is the raw output."""

    async def one(single: PlannedRun) -> tuple[sweep.NodeOutput, bool]:
        hostname = single.nodes[0]
        node = Execution()
        try:
            await _node_check(node, single, 0, nodes, connections, options)
        except TransportError as error:
            _failure(node, error)
        except UnsafeValue as error:
            node.state, node.error = RunState.FAILED, str(error)
        output = sweep.NodeOutput(
            node=hostname,
            state=node.state,
            command=node.command,
            exit_code=node.exit_code,
            error=node.error,
            stdout=node.raw_output,
            stderr=node.stderr,
        )
        return output, node.truncated

    done = await asyncio.gather(*(one(single) for single in node_checks(run)))
    execution.nodes = [output for output, _truncated in done]
    execution.raw_output = sweep.transcript(execution.nodes)
    execution.truncated = any(truncated for _output, truncated in done)
    codes = [output.exit_code for output in execution.nodes if output.exit_code is not None]
    execution.exit_code = next((code for code in codes if code != 0), codes[0] if codes else None)


def pair_command(client: str, server: str, pair_commands: commands.PairCommands) -> str:
    """What a pair run stores as its command: each side's command on its node."""
    return (
        f"on {server}: {pair_commands.server}\n" if pair_commands.server else ""
    ) + f"on {client}: {pair_commands.client}"


async def _pair(execution, run, index, nodes, connections, options, barrier, ready=None) -> None:  # type: ignore[no-untyped-def]
    client, server = nodes[run.nodes[0]], nodes[run.nodes[1]]
    port = commands.IPERF3_BASE_PORT + index
    pair_commands = planned_commands(run, index, nodes, options)
    execution.command = pair_command(client.hostname, server.hostname, pair_commands)
    server_process: BackgroundProcess | None = None
    released = False
    client_transport = connections(client.hostname)

    async def serve() -> None:
        nonlocal server_process
        try:
            server_process = await connections(server.hostname).start(
                pair_commands.server,
                max_lifetime_s=options.throughput_seconds + 120,
                # The nodes are locked for this batch, so a server of ours still on this
                # port is a leftover of a worker that died mid-probe: stop it, or the
                # client would talk to it (iperf3: "the server is busy running a test").
                before=f"pkill -f {shlex.quote('^' + pair_commands.server + '$')}",
                ready=_listening(port) if run.tool == Tool.IPERF3 else "",
            )
        except NotReady:
            raise TransportError(
                f"the server side did not start listening on port {port}"
            ) from None

    async def log_in_client() -> None:
        # Logged in before the start line, so that concurrent pairs really start together.
        await client_transport.connect()

    try:
        # The server side starts while the client logs in: one login's time, not two.
        await asyncio.gather(*([serve()] if pair_commands.server else []), log_in_client())
        if ready is not None:
            await asyncio.shield(ready)
        if barrier is not None:
            released = True
            await barrier.wait()
        result = await client_transport.run(
            pair_commands.client,
            timeout_s=options.throughput_seconds + options.grace_seconds,
            max_output_bytes=options.max_output_bytes,
        )
        _outcome(execution, result)
    finally:
        if barrier is not None and not released:
            # This pair failed before the start line: don't keep the others waiting.
            await barrier.abort()
        if server_process is not None:
            with contextlib.suppress(TransportError):
                await server_process.stop()
