"""Recording what a probe batch did: the tool's output (always), what it parsed to, the
verdict against the terms in force, the switch-side witness where one was read, and the
run's link in the lease's hash chain. ``benchmarks.execution.execute_batch`` records a batch
as soon as it ran; a throughput batch with a witness is recorded once the switch's settled
reading is in (``benchmarks.witness_settle``)."""

import dataclasses
import hashlib
from typing import Any

from django.conf import settings
from django.utils import timezone

from benchmarks import selectors
from benchmarks import witness as switch_witness
from benchmarks.choices import Pattern, RunState, Tool, Verdict
from benchmarks.links import link_pending
from benchmarks.models import ProbeRun
from benchmarks.probes import runner
from benchmarks.probes.commands import IPERF3_OMIT_SECONDS
from benchmarks.probes.interpret import interpret
from benchmarks.probes.plan import PlanNode
from gpulease_verify import probe_tax, sweep, witness
from gpulease_verify.interpret import Interpretation
from gpulease_verify.parsers import ParseError, RunFailed
from gpulease_verify.verdicts import Judgement, TermsView
from leases.choices import ProbeKind
from leases.models import LeaseTerms


def terms_view(terms: LeaseTerms) -> TermsView:
    return TermsView(
        version=terms.version,
        contracted_gbps=terms.contracted_bandwidth_gbps,
        threshold_percent=terms.sla_threshold_percent,
        busbw_floor_gbps=terms.collective_busbw_floor_gbps,
        latency_ceiling_us=terms.latency_ceiling_us,
    )


def _sending_seconds(tool: str) -> float:
    """How long a bandwidth tool sends: its duration, plus the first second iperf3 sends
    but leaves out of its figure."""
    omit = IPERF3_OMIT_SECONDS if tool == Tool.IPERF3 else 0
    return settings.PROBE_THROUGHPUT_SECONDS + omit


def witnessed_pair(
    *,
    run: ProbeRun,
    result: Interpretation,
    terms: LeaseTerms,
    witnessed: switch_witness.Witnessed | None,
) -> tuple[dict[str, Any] | None, Judgement]:
    """A pair run's parsed result and judgement with its client's switch-side witness
    block (``gpulease_verify.witness``), where its switch port was read around it: a
    disagreement leaves the run without a verdict (disputed)."""
    parsed, judgement, measured = result.parsed, result.judgement, result.measured_bps
    if witnessed is None or ">" not in run.target or not measured:
        return parsed, judgement
    client = run.target.split(">")[0]
    block = witnessed.block(
        client=client,
        seconds=_sending_seconds(run.tool),
        measured_bps=measured,
        tolerance_percent=terms.witness_tolerance_percent,
        host_bytes=_client_bytes(run, parsed, client),
    )
    if block is None:
        return parsed, judgement
    parsed = {**(parsed or {}), witness.KEY: block}
    return parsed, witness.judge(judgement, parsed, measured)


def _client_bytes(run: ProbeRun, parsed: dict[str, Any] | None, client: str) -> int | None:
    """What the run's tool says its client sent, the omitted first second included (the
    bytes the probe tax counts): what the switch witness holds the switch's octets
    against. None when the output does not say (the rate is compared then)."""
    try:
        sent = probe_tax.bytes_sent(
            tool=run.tool,
            state=RunState.OK,
            parsed=parsed,
            raw_output=run.raw_output,
            command=run.command,
            target=run.target,
            nodes=run.target.split(">"),
        )
    except ParseError:
        return None
    return sent.get(client)


def record_execution(
    *,
    run: ProbeRun,
    execution: runner.Execution,
    terms: LeaseTerms | None,
    plan: dict[str, PlanNode],
    hostnames: list[str],
    witnessed: switch_witness.Witnessed | None = None,
) -> ProbeRun:
    """Store what the tool printed (always), then what it parsed to and the verdict; for
    a throughput pair whose client's switch port was read around it, the switch-side
    witness too (``gpulease_verify.witness``): a disagreement disputes the run."""
    run.command = execution.command
    run.raw_output = execution.raw_output
    run.stderr = execution.stderr
    run.raw_sha256 = hashlib.sha256(execution.raw_output.encode()).hexdigest()
    run.output_truncated = execution.truncated
    run.exit_code = execution.exit_code
    run.finished_at = execution.finished_at or timezone.now()
    run.terms = terms
    run.state = execution.state
    run.error = execution.error
    if run.pattern == Pattern.SWEEP and execution.state == RunState.OK:
        _judge_sweep(run, execution, terms, plan, witnessed)
    elif execution.state == RunState.OK and terms is not None:
        try:
            result = interpret(
                tool=run.tool,
                raw_output=execution.raw_output,
                terms=terms_view(terms),
                node=plan.get(run.target),
                previous_link_down=selectors.previous_link_down(run, [run.target]).get(run.target)
                if run.kind == ProbeKind.LINK
                else None,
            )
        except RunFailed as error:
            run.state, run.error = RunState.FAILED, str(error)
        except ParseError as error:
            run.state, run.error = RunState.UNPARSABLE, str(error)
        else:
            parsed, judgement = witnessed_pair(
                run=run, result=result, terms=terms, witnessed=witnessed
            )
            if witnessed is not None and run.kind == ProbeKind.COUNTERS:
                switch = witnessed.after.get(run.target)
                if switch is not None:
                    parsed = {
                        **(parsed or {}),
                        witness.KEY: switch_witness.counters_block(
                            witnessed.ports[run.target], switch
                        ),
                    }
            run.parsed = parsed
            run.measured_bps = result.measured_bps
            run.latency_us = result.latency_us
            run.verdict = judgement.verdict
            run.rule = judgement.rule
            run.verdict_reason = judgement.reason
    if run.state != RunState.OK:
        run.verdict = Verdict.NONE
    run.save()
    if run.rule.startswith(witness.RULE) and run.terms_id is not None:
        switch_witness.open_dispute(
            lease_id=run.lease_id,
            node=run.target.split(">")[0],
            terms_id=run.terms_id,
            at=run.slot_at,
            rule=run.rule,
            detail=run.verdict_reason,
            run=run,
        )
    # The run is over: append it (and any other finished run of the lease not yet linked)
    # to the lease's hash chain. A run that will be retried is left out until it is over.
    for linked in link_pending(lease_id=run.lease_id):
        if linked.pk == run.pk:
            run.chain_index, run.prev_hash, run.run_hash = (
                linked.chain_index,
                linked.prev_hash,
                linked.run_hash,
            )
    return run


def _judge_sweep(
    run: ProbeRun,
    execution: runner.Execution,
    terms: LeaseTerms | None,
    plan: dict[str, PlanNode],
    witnessed: switch_witness.Witnessed | None,
) -> None:
    """A sweep's nodes read one by one (``gpulease_verify.sweep``), each with its own
    previous link-down counts and, for counters, its switch port's witness; the sweep's
    state and verdict are theirs combined."""
    view = terms_view(terms) if terms is not None else None
    previous = (
        selectors.previous_link_down(run, [out.node for out in execution.nodes])
        if run.kind == ProbeKind.LINK
        else {}
    )
    ports, read = (witnessed.ports, witnessed.after) if witnessed is not None else ({}, {})
    results = []
    for output in execution.nodes:
        result = sweep.interpret_node(
            tool=run.tool,
            output=output,
            terms=view,
            node=plan.get(output.node),
            previous_link_down=previous.get(output.node),
        )
        switch = read.get(output.node)
        if result.ok and switch is not None and run.kind == ProbeKind.COUNTERS:
            block = switch_witness.counters_block(ports[output.node], switch)
            result = dataclasses.replace(result, parsed={**result.parsed, witness.KEY: block})
        results.append(result)
    judged = sweep.judge(tool=run.tool, results=results, terms=view)
    run.parsed = sweep.parsed_of(results)
    run.state, run.verdict, run.rule = judged.state, judged.verdict, judged.rule
    run.verdict_reason, run.error = judged.reason, judged.error
