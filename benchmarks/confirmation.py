"""Confirm before you count: a scheduled throughput or collective batch whose tool figure
fails is measured again at once, the same runs together, while its nodes are still held
(the rule a sample is counted by is ``gpulease_verify.samples.confirmed_verdict``).

A stall of a loaded machine drags one short run's mean; a link that is really short is
short twice. Re-running the whole batch, not only the failed pair, loads a shared uplink
as the first measurement did, so an oversubscribed fabric fails its confirmation too."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import transaction

from benchmarks.choices import FINAL_STATES, RunState, Trigger, Verdict
from benchmarks.models import ProbeRun
from benchmarks.probes import runner
from benchmarks.probes.interpret import interpret
from benchmarks.probes.plan import PlanNode
from gpulease_verify.parsers import ParseError, RunFailed
from gpulease_verify.samples import CONFIRMED_KINDS
from gpulease_verify.verdicts import TermsView
from leases.models import LeaseTerms


def tool_verdict(
    run: ProbeRun, execution: runner.Execution, view: TermsView, plan: dict[str, PlanNode]
) -> str | None:
    """The verdict the tool's own figure gives (before any switch witness), None when the
    run measured nothing."""
    if execution.state != RunState.OK:
        return None
    try:
        result = interpret(
            tool=run.tool, raw_output=execution.raw_output, terms=view, node=plan.get(run.target)
        )
    except (ParseError, RunFailed):
        return None
    return str(result.judgement.verdict)


def due(
    runs: Sequence[ProbeRun],
    executions: Sequence[runner.Execution],
    *,
    terms: LeaseTerms | None,
    view: TermsView | None,
    plan: dict[str, PlanNode],
) -> bool:
    """Whether the batch is measured again: its runs are scheduled samples of a confirmed
    kind, its terms confirm failures, and the tool's figure of one of them failed."""
    if terms is None or view is None or not terms.confirm_failures:
        return False
    return any(
        run.trigger == Trigger.SCHEDULE
        and run.kind in CONFIRMED_KINDS
        and tool_verdict(run, execution, view, plan) == Verdict.FAIL
        for run, execution in zip(runs, executions, strict=True)
    )


def pause_s(terms: LeaseTerms, *, witnessed: bool) -> float:
    """The pause before the confirmation; with a switch witness, at least the time the
    switch's counters take to settle, since its reading then closes the first
    measurement and opens the second."""
    pause = float(terms.confirm_pause_s)
    return max(pause, settings.WITNESS_SETTLE_S) if witnessed else pause


def create(
    runs: Sequence[ProbeRun], node_ids: dict[int, list[int]], *, now: datetime
) -> list[ProbeRun]:
    """The batch's runs again, as claimed confirmations (trigger ``confirmation``, the
    same key and slot: ``gpulease_verify.samples``), in the order of ``runs``, with their
    node links. A confirmation that a worker which died left unfinished is claimed again.
    A run and its confirmation are recorded in one transaction, so a confirmation that is
    over belongs to a run that is over: then nothing is made (empty list)."""
    with transaction.atomic():
        existing = {
            run.target: run
            for run in ProbeRun.objects.filter(
                lease_id=runs[0].lease_id,
                kind=runs[0].kind,
                slot_at=runs[0].slot_at,
                trigger=Trigger.CONFIRMATION,
                target__in=[run.target for run in runs],
            )
        }
        if any(run.state in FINAL_STATES for run in existing.values()):
            return []
        made = [existing.get(run.target) or _confirmation_of(run, now) for run in runs]
        new = [again for again in made if again.pk is None]
        ProbeRun.objects.bulk_create(new)
        Through = ProbeRun.nodes.through
        Through.objects.bulk_create(
            [
                Through(proberun_id=again.pk, node_id=node_id)
                for run, again in zip(runs, made, strict=True)
                if again in new
                for node_id in node_ids.get(run.pk, [])
            ]
        )
        ProbeRun.objects.filter(pk__in=[again.pk for again in made]).update(
            state=RunState.RUNNING, claimed_at=now
        )
    return made


def _confirmation_of(run: ProbeRun, now: datetime) -> ProbeRun:
    return ProbeRun(
        lease_id=run.lease_id,
        kind=run.kind,
        tool=run.tool,
        target=run.target,
        pattern=run.pattern,
        # one batch id for the confirmations of one batch, derived from its id
        batch=uuid.uuid5(run.batch, Trigger.CONFIRMATION),
        trigger=Trigger.CONFIRMATION,
        slot_at=run.slot_at,
        deadline_at=run.deadline_at,
        site_id=run.site_id,
        terms_id=run.terms_id,
        state=RunState.RUNNING,
        claimed_at=now,
        attempts=1,
    )
