"""The switch-side witness off the probe's critical path.

Switches (and net-snmp) refresh their port counters every few seconds, so the reading
that closes a throughput measurement must wait ``WITNESS_SETTLE_S`` after the client
ended. A batch no longer holds its nodes, or its worker, for that wait: when its clients
end, ``defer`` stores each run's output and a ``PendingWitness``, releases the nodes and
asks for ``settle`` after the wait (a Celery task with a countdown). ``settle`` reads the
switch ports, then judges and records the runs with the readings around them, in one
transaction. The runs stay ``running`` in between, so nothing ingests, links or counts
them before they are judged.

The client ports the reading is about stay fenced (their ``NodeLock`` rows are kept) until
the reading is taken: a heavy probe that sent from such a node in the meantime would add
its bytes to the reading. A settle that never came (its worker or broker died) is taken by
the dispatcher's next cycle (``settle_overdue``); one later than the fence, when another
probe may have used the port, records the runs without the witness rather than with a
reading it cannot trust."""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from benchmarks import witness as switch_witness
from benchmarks.models import NodeLock, PendingWitness, ProbeRun
from benchmarks.probes import runner
from benchmarks.probes.plan import PlanNode
from benchmarks.recording import record_execution
from benchmarks.switch_snmp import SwitchPortReading
from benchmarks.task_names import SETTLE_WITNESS
from common.locks import locking
from common.tasks import send
from gpulease_verify.canonical import iso_utc, parse_instant
from leases.models import Lease, LeaseTerms
from leases.selectors import terms_in_force_for

log = logging.getLogger(__name__)

# A settle this late after its due time is taken by the dispatcher's cycle instead.
OVERDUE = timedelta(seconds=60)


@dataclass(frozen=True)
class Measured:
    """One measurement of a batch: its runs and what each execution did, in order (the
    first, then its confirmation when there is one)."""

    runs: list[ProbeRun]
    executions: list[runner.Execution]


def fence_until(due_at: datetime) -> datetime:
    """Until when a deferred reading's client ports stay fenced: as long as a probe
    task may live (``PROBE_TASK_TIME_LIMIT_S``), then they are free again."""
    return due_at + timedelta(seconds=settings.PROBE_TASK_TIME_LIMIT_S + 10)


def witnesses(
    ports: Mapping[str, switch_witness.WitnessPort],
    readings: Sequence[Mapping[str, SwitchPortReading]],
) -> list[switch_witness.Witnessed]:
    """The witness of each measurement: the readings on either side of it."""
    return [
        switch_witness.Witnessed(ports=ports, before=readings[k], after=readings[k + 1])
        for k in range(len(readings) - 1)
    ]


def record(
    *,
    measured: Sequence[Measured],
    terms: LeaseTerms | None,
    plan: dict[str, PlanNode],
    hostnames: Mapping[int, list[str]],
    witnesses: Sequence[switch_witness.Witnessed] | None,
) -> None:
    """Record every measurement of a batch in one transaction, so that a run and its
    confirmation are read (ingested, linked) together."""
    with transaction.atomic():
        for index, measurement in enumerate(measured):
            for run, execution in zip(measurement.runs, measurement.executions, strict=True):
                record_execution(
                    run=run,
                    execution=execution,
                    terms=terms,
                    plan=plan,
                    hostnames=hostnames.get(run.pk, []),
                    witnessed=witnesses[index] if witnesses else None,
                )


def defer(
    *,
    batch: uuid.UUID,
    lease: Lease,
    queue: str,
    ports: Mapping[str, switch_witness.WitnessPort],
    readings: Sequence[Mapping[str, SwitchPortReading]],
    measured: Sequence[Measured],
    clients: set[int],
) -> set[int]:
    """Store what the batch's tools printed and what is needed to judge it once the switch
    has settled, fence the client nodes ``clients`` (their locks stay, the caller frees the
    others) and ask for ``settle`` after ``WITNESS_SETTLE_S``. Returns the fenced nodes."""
    due = timezone.now() + timedelta(seconds=settings.WITNESS_SETTLE_S)
    with transaction.atomic():
        for measurement in measured:
            for run, execution in zip(measurement.runs, measurement.executions, strict=True):
                run.command, run.exit_code = execution.command, execution.exit_code
                run.raw_output, run.stderr = execution.raw_output, execution.stderr
                run.output_truncated = execution.truncated
                run.save(
                    update_fields=[
                        "command",
                        "exit_code",
                        "raw_sha256",
                        "stderr_sha256",
                        "output_truncated",
                    ]
                )
        PendingWitness.objects.create(
            batch=batch,
            lease=lease,
            due_at=due,
            ports={name: dataclasses.asdict(port) for name, port in ports.items()},
            readings=[
                {name: dataclasses.asdict(value) for name, value in reading.items()}
                for reading in readings
            ],
            measurements=[
                {
                    str(run.pk): {
                        "state": execution.state,
                        "error": execution.error,
                        "finished_at": iso_utc(execution.finished_at),
                    }
                    for run, execution in zip(m.runs, m.executions, strict=True)
                }
                for m in measured
            ],
        )
        NodeLock.objects.filter(batch=batch, node_id__in=clients).update(
            expires_at=fence_until(due)
        )
        transaction.on_commit(lambda: _ask_for_settle(batch, queue))
    return clients


def _ask_for_settle(batch: uuid.UUID, queue: str) -> None:
    send(SETTLE_WITNESS, str(batch), countdown=settings.WITNESS_SETTLE_S, queue=queue)


def settle(batch: uuid.UUID, *, now: datetime | None = None) -> list[ProbeRun]:
    """Read the switch ports of a deferred batch, judge and record its runs, free its
    fenced nodes. Returns the runs recorded; nothing when the batch was settled already
    (a second delivery) or is not deferred."""
    now = now or timezone.now()
    with transaction.atomic():
        pending = locking(PendingWitness.objects).filter(batch=batch).first()
        if pending is None:
            return []
        ports = {name: switch_witness.WitnessPort(**port) for name, port in pending.ports.items()}
        if now > fence_until(pending.due_at):
            log.warning(
                "batch %s: its switch reading came too late to be trusted; recorded without "
                "the witness",
                batch,
            )
            after: Mapping[str, SwitchPortReading] = {}
        else:
            after = switch_witness.read(ports)
        readings = [_readings(reading) for reading in pending.readings] + [after]
        ids = [int(pk) for measurement in pending.measurements for pk in measurement]
        by_pk = {
            run.pk: run
            for run in ProbeRun.objects.filter(pk__in=ids, lease_id=pending.lease_id)
            .select_related("lease", "terms")
            .prefetch_related("nodes")
        }
        measured = [
            Measured(
                [by_pk[int(pk)] for pk in measurement],
                [_execution(by_pk[int(pk)], done) for pk, done in measurement.items()],
            )
            for measurement in pending.measurements
        ]
        first = measured[0].runs[0]
        record(
            measured=measured,
            terms=first.terms or terms_in_force_for(lease_id=first.lease_id, at=first.slot_at),
            plan={},  # pairs are judged without a node's plan
            hostnames={pk: run.hostnames() for pk, run in by_pk.items()},
            witnesses=witnesses(ports, readings),
        )
        pending.delete()
        NodeLock.objects.filter(batch=batch).delete()
    return [run for measurement in measured for run in measurement.runs]


def settle_in_foreground(batch: uuid.UUID) -> list[ProbeRun]:
    """Wait until a deferred batch's reading is due and settle it here, without a worker
    (``run_probes``, tests, benchmarks). Nothing when it is not deferred."""
    due = PendingWitness.objects.filter(batch=batch).values_list("due_at", flat=True).first()
    if due is None:
        return []
    time.sleep(max(0.0, (due - timezone.now()).total_seconds()))
    return settle(batch)


def settle_overdue(*, now: datetime) -> int:
    """Settle the batches whose settle never came (the dispatcher, every cycle). Returns
    how many."""
    batches = list(
        PendingWitness.objects.filter(due_at__lt=now - OVERDUE).values_list("batch", flat=True)
    )
    for batch in batches:
        settle(batch, now=now)
    return len(batches)


def _readings(stored: Mapping[str, Any]) -> dict[str, SwitchPortReading]:
    return {name: SwitchPortReading(**fields) for name, fields in stored.items()}


def _execution(run: ProbeRun, done: Mapping[str, Any]) -> runner.Execution:
    """What the transport said of a deferred run, with the outputs stored on it."""
    return runner.Execution(
        command=run.command,
        raw_output=run.raw_output,
        stderr=run.stderr,
        exit_code=run.exit_code,
        truncated=run.output_truncated,
        state=done["state"],
        error=done["error"],
        finished_at=parse_instant(done["finished_at"]) if done["finished_at"] else None,
    )
