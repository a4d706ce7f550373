"""A sweep: one run of a node-level probe (link check, NIC counters) over every node of a
lease, each node checked on its own (issue 16).

Link checks and counter readings are nine in ten of all runs: every node, every five
minutes. As a run per node, each reading paid for a whole run row, its indexes, a node
link and a worker task; a sweep is one run per lease, kind and slot that holds every
node's result, so a lease of 8 nodes stores one row where it stored eight.

**Its raw output is a transcript.** For each node, in hostname order, one header line, then
exactly the bytes the node printed on standard output, then those it printed on standard
error::

    #### {"command":"ethtool ens1f0 ...","error":"","exit_code":0,"node":"gz-01",
    "state":"ok","stderr_bytes":0,"stdout_bytes":1234}
    <1234 bytes of standard output><0 bytes of standard error>

(the header is one line). The header is ``#### `` and canonical JSON (sorted keys, no
spaces, UTF-8): the node, the command it ran, how the transport ended (``ok``,
``failed``, ``timeout``, ``unreachable``), its exit code, the transport's error and the
UTF-8 byte lengths of what follows. The lengths frame the outputs, so nothing a node
prints (its tenant has root on it) can pass for another node's part. A healthy lease's
link checks print the same transcript every five minutes, which the content store keeps
once; the run's SHA-256 of it is hashed into the chain like any raw output.

**Its parsed result** is ``{"nodes": {hostname: entry}}``. An entry holds the node's
``state`` (``ok``, else what kept it from a result: ``unreachable``, ``timeout``,
``failed``, ``unparsable``), its ``error`` when it has one, and, when it is ``ok``, what
its output parsed to (``gpulease_verify.interpret``): a link check's ``ports`` and the
node's ``verdict``; a counters reading's ``ports`` with their normalised figures and the
InfiniBand health counters (the tool's full list of counters stays in the raw output:
``node_parsed``) and, where the node's switch port was read, the switch-side ``witness``.

**Its judgement** (``judge``) is what the lease's slot gives the SLA, the rule that a slot
of per-node link checks followed (``gpulease_verify.samples.link_slot_outcome``): it
fails when a node's check failed (even if another node could not be read), passes when
every node passed, and otherwise measured nothing: its state is then the first node state
in ``NOT_OK`` order, so that a node that could not be reached is tried again. A counters
sweep has no verdict.

Runs stored before sweeps (one per node, pattern ``node``) stay as they were linked;
``node_results`` reads either shape, so every reader of node-level results reads both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpulease_verify import verdicts, witness
from gpulease_verify.canonical import canonical_json
from gpulease_verify.interpret import COUNTERS, PlanNode, interpret, port_state
from gpulease_verify.parsers import ParseError

SWEEP = "sweep"  # the pattern of a sweep
NODE = "node"  # the pattern of a run stored before sweeps: one node
ALL = "all"  # a sweep's target
HEADER = "#### "
OK = "ok"
# A node without a result, in the order the sweep's state is taken from: an unreachable
# node makes the sweep unreachable, which the worker tries again while attempts remain.
NOT_OK = ("unreachable", "timeout", "failed", "unparsable")
COUNTERS_RULE = "counters are recorded for metering"
SKIPPED = "skipped"
NO_NODES = "the lease held no node when it ran"


@dataclass(frozen=True)
class NodeOutput:
    """What one node of a sweep did, as the transcript records it."""

    node: str
    state: str  # the transport's outcome: ok, failed, timeout, unreachable
    command: str = ""
    exit_code: int | None = None
    error: str = ""
    stdout: str = ""
    stderr: str = ""

    def header(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "state": self.state,
            "command": self.command,
            "exit_code": self.exit_code,
            "error": self.error,
            "stdout_bytes": len(self.stdout.encode()),
            "stderr_bytes": len(self.stderr.encode()),
        }


def transcript(outputs: Iterable[NodeOutput]) -> str:
    """A sweep's raw output (module docstring), nodes in hostname order."""
    return "".join(
        f"{HEADER}{canonical_json(out.header())}\n{out.stdout}{out.stderr}"
        for out in sorted(outputs, key=lambda out: out.node)
    )


def read_transcript(text: str) -> list[NodeOutput]:
    """A transcript back into its nodes' outputs; ParseError when it is not one."""
    data, at, found = text.encode(), 0, []
    while at < len(data):
        if not data.startswith(HEADER.encode(), at):
            raise ParseError(f"the sweep's transcript has no node header at byte {at}")
        end = data.find(b"\n", at)
        if end < 0:
            raise ParseError(f"the sweep's transcript ends inside a node header at byte {at}")
        try:
            head = _header(data[at + len(HEADER) : end].decode())
        except (ValueError, KeyError, TypeError) as error:
            raise ParseError(f"the node header at byte {at} is not one: {error}") from None
        out_end = end + 1 + head["stdout_bytes"]
        err_end = out_end + head["stderr_bytes"]
        if err_end > len(data):
            raise ParseError(f"node {head['node']}: its output is shorter than its header says")
        try:
            stdout, stderr = data[end + 1 : out_end].decode(), data[out_end:err_end].decode()
        except UnicodeDecodeError:
            raise ParseError(f"node {head['node']}: its byte counts cut a character") from None
        found.append(
            NodeOutput(
                node=head["node"],
                state=head["state"],
                command=head["command"],
                exit_code=head["exit_code"],
                error=head["error"],
                stdout=stdout,
                stderr=stderr,
            )
        )
        at = err_end
    return found


def _header(text: str) -> dict[str, Any]:
    head = json.loads(text)
    if not isinstance(head, dict) or set(head) != set(NodeOutput("", "").header()):
        raise ValueError("its fields are not a node header's")
    for name in ("stdout_bytes", "stderr_bytes"):
        if not isinstance(head[name], int) or isinstance(head[name], bool) or head[name] < 0:
            raise ValueError(f"{name} is not a byte count")
    if not all(isinstance(head[name], str) for name in ("node", "state", "command", "error")):
        raise ValueError("a text field is not text")
    if head["exit_code"] is not None and not isinstance(head["exit_code"], int):
        raise ValueError("exit_code is not a number")
    return head


# --- one node's result --------------------------------------------------------------------


# The InfiniBand port counters (sysfs names) that node_exporter exports and fabric health
# reads: of a port's whole list, a counters sweep keeps these (``monitoring.metrics``).
KEPT_COUNTERS = (
    "symbol_error",
    "link_error_recovery",
    "port_rcv_packets",
    "port_xmit_packets",
    "port_xmit_discards",
    "port_rcv_remote_physical_errors",
    "excessive_buffer_overrun_errors",
    "local_link_integrity_errors",
)


def node_parsed(tool: str, parsed: Mapping[str, Any]) -> dict[str, Any]:
    """What a sweep keeps of a node's interpretation: all of a link check's; of a counters
    reading, each port's normalised figures and, of the tool's full list of counters
    (``raw``, which the raw output holds), only ``KEPT_COUNTERS``."""
    if tool != COUNTERS:
        return dict(parsed)
    ports = []
    for port in parsed.get("ports", []):
        kept = {name: value for name, value in port.items() if name != "raw"}
        raw = {name: port["raw"][name] for name in KEPT_COUNTERS if name in port.get("raw", {})}
        ports.append({**kept, "raw": raw} if raw else kept)
    return {**parsed, "ports": ports}


@dataclass(frozen=True)
class NodeResult:
    """What one node showed in a node-level run: a sweep's node, or the one node of a run
    stored before sweeps. ``parsed`` is the node's own result (ports, witness)."""

    node: str
    state: str
    verdict: str = verdicts.Verdict.NONE
    parsed: Mapping[str, Any] = field(default_factory=dict)
    error: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.state == OK


def node_results(
    *,
    pattern: str,
    target: str,
    state: str,
    verdict: str,
    parsed: Mapping[str, Any] | None,
    error: str = "",
) -> list[NodeResult]:
    """Every node's result in a node-level run, in hostname order: a sweep's from its
    parsed ``nodes``; a per-node run's (stored before sweeps) is the run's own."""
    if pattern != SWEEP:
        return [NodeResult(target, state, verdict, parsed or {}, error)]
    nodes = (parsed or {}).get("nodes") or {}
    return [
        NodeResult(
            node=name,
            state=str(entry.get("state", "")),
            verdict=str(entry.get("verdict", verdicts.Verdict.NONE)),
            parsed={k: v for k, v in entry.items() if k not in ("state", "verdict", "error")},
            error=str(entry.get("error", "")),
        )
        for name, entry in sorted(nodes.items())
        if isinstance(entry, Mapping)
    ]


def hostnames(parsed: Mapping[str, Any] | None) -> list[str]:
    """The nodes a sweep read, from its parsed result (none before it ran)."""
    return sorted((parsed or {}).get("nodes") or {})


def results_of(run: Mapping[str, Any]) -> list[NodeResult]:
    """``node_results`` of a run given as its stored values or its hashed content (a
    bundle's, with ``parsed`` as canonical JSON text)."""
    parsed = run.get("parsed")
    if isinstance(parsed, str):
        parsed = json.loads(parsed)
    return node_results(
        pattern=run["pattern"],
        target=run["target"],
        state=run["state"],
        verdict=run["verdict"],
        parsed=parsed,
        error=run.get("error", ""),
    )


# --- interpreting and judging a sweep ----------------------------------------------------


NO_TERMS = verdicts.TermsView(0, Decimal(0), Decimal(0), None, None)


def interpret_node(
    *,
    tool: str,
    output: NodeOutput,
    terms: verdicts.TermsView | None,
    node: PlanNode | None,
    previous_link_down: Mapping[str, int] | None = None,
) -> NodeResult:
    """One node of a sweep, from its output (``terms``: those it is judged by; None: no
    verdict). A node that printed nothing readable is ``unparsable``, with the reason."""
    if output.state != OK:
        return NodeResult(output.node, output.state, error=output.error)
    if node is None:
        error = "the node's ports are not known, so its output cannot be read"
        return NodeResult(output.node, "unparsable", error=error)
    try:
        found = interpret(
            tool=tool,
            raw_output=output.stdout,
            terms=terms or NO_TERMS,
            node=node,
            previous_link_down=dict(previous_link_down or {}),
        )
    except ParseError as error:
        return NodeResult(output.node, "unparsable", error=str(error))
    judged = terms is not None and tool != COUNTERS
    return NodeResult(
        output.node,
        OK,
        verdict=found.judgement.verdict if judged else verdicts.Verdict.NONE,
        parsed=node_parsed(tool, found.parsed),
        reason=found.judgement.reason if judged else "",
    )


def judge_node(result: NodeResult, terms: verdicts.TermsView | None) -> NodeResult:
    """A link check node's result judged again by ``terms`` from its parsed ports (a
    re-rating): its verdict and reason as ``verdicts.link`` gives them."""
    if not result.ok or terms is None or not isinstance(result.parsed.get("ports"), list):
        return result
    given = verdicts.link(ports=[port_state(p) for p in result.parsed["ports"]], terms=terms)
    return NodeResult(
        result.node, OK, given.verdict, result.parsed, result.error, reason=given.reason
    )


def entry(result: NodeResult) -> dict[str, Any]:
    """A node's entry in a sweep's parsed result (module docstring)."""
    made: dict[str, Any] = {"state": result.state}
    if result.error:
        made["error"] = result.error
    if result.ok:
        if result.verdict != verdicts.Verdict.NONE:
            made["verdict"] = result.verdict
        made.update(result.parsed)
    return made


def parsed_of(results: Iterable[NodeResult]) -> dict[str, Any]:
    """A sweep's parsed result from its nodes' results."""
    return {"nodes": {result.node: entry(result) for result in sorted(results, key=_by_node)}}


def _by_node(result: NodeResult) -> str:
    return result.node


@dataclass(frozen=True)
class SweepJudgement:
    """A sweep's state, verdict, rule, reason and error (its nodes' combined)."""

    state: str
    verdict: str
    rule: str
    reason: str
    error: str


def judge(
    *, tool: str, results: Sequence[NodeResult], terms: verdicts.TermsView | None
) -> SweepJudgement:
    """The sweep's judgement from its nodes' (module docstring), under ``terms`` (None:
    no verdict). A node result's ``reason`` is its own verdict's."""
    counters = tool == COUNTERS
    rule = verdicts.link_rule(terms) if terms is not None else ""
    missing = [r for r in results if not r.ok]
    error = "; ".join(f"{r.node}: {r.state}" + (f": {r.error}" if r.error else "") for r in missing)
    failed = [r for r in results if r.ok and r.verdict == verdicts.Verdict.FAIL]
    read = [r for r in results if r.ok]
    if failed:
        reason = "; ".join(f"{r.node}: {r.reason}" for r in failed)
        return SweepJudgement(OK, verdicts.Verdict.FAIL, rule, reason, error)
    if not results:
        return SweepJudgement(SKIPPED, verdicts.Verdict.NONE, "", "", NO_NODES)
    if missing:
        state = next(s for s in NOT_OK if any(r.state == s for r in missing))
        return SweepJudgement(state, verdicts.Verdict.NONE, "", "", error)
    if counters:
        return SweepJudgement(
            OK, verdicts.Verdict.NONE, COUNTERS_RULE, f"{len(read)} node(s) read", ""
        )
    if not rule:
        return SweepJudgement(OK, verdicts.Verdict.NONE, "", "", "")
    ports = sum(len(r.parsed.get("ports", [])) for r in read)
    reason = f"{len(read)} node(s), {ports} port(s) up at their rate"
    return SweepJudgement(OK, verdicts.Verdict.PASS, rule, reason, "")


def without_witness(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """A sweep's parsed result as its nodes' outputs alone give it: without the switch-side
    witness blocks, which are gpulease's own readings (``gpulease_verify.witness``)."""
    return {
        **parsed,
        "nodes": {
            name: witness.without_witness(node) if isinstance(node, Mapping) else node
            for name, node in (parsed.get("nodes") or {}).items()
        },
    }


__all__ = [
    "ALL",
    "COUNTERS_RULE",
    "KEPT_COUNTERS",
    "NODE",
    "NOT_OK",
    "SWEEP",
    "NodeOutput",
    "NodeResult",
    "SweepJudgement",
    "entry",
    "hostnames",
    "interpret_node",
    "judge",
    "judge_node",
    "node_parsed",
    "node_results",
    "parsed_of",
    "read_transcript",
    "results_of",
    "transcript",
    "without_witness",
]
