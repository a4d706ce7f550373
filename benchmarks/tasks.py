"""Celery tasks: thin adapters that take ids and call a service."""

import logging
import uuid

from celery import shared_task
from django.conf import settings

from benchmarks import execution, missed_slots, services, witness_settle
from benchmarks.task_names import EXECUTE_BATCH, SETTLE_WITNESS

log = logging.getLogger(__name__)


@shared_task(name="benchmarks.dispatch", ignore_result=True)
def dispatch() -> dict[str, int]:
    result = services.dispatch_due()
    return {
        "batches": result.batches,
        "runs": result.runs,
        "missed": result.missed,
        "resent": result.resent,
    }


def soft_time_limit(hard_s: int) -> int:
    """When a probe batch is asked to stop (SoftTimeLimitExceeded), ahead of its hard
    limit: 30 s ahead, or a third of a limit under 90 s (a limit of 30 s or less once gave
    a soft limit at or below zero, which stopped every batch as it began)."""
    return hard_s - min(30, hard_s // 3)


@shared_task(
    name=EXECUTE_BATCH,
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    max_retries=None,
    time_limit=settings.PROBE_TASK_TIME_LIMIT_S,
    soft_time_limit=soft_time_limit(settings.PROBE_TASK_TIME_LIMIT_S),
)
def execute_batch(self, batch: str) -> int:  # type: ignore[no-untyped-def]
    try:
        runs = execution.execute_batch(uuid.UUID(batch))
    except execution.StillRunning as running:
        # Delivered twice: the other copy is running it; look again once it must be over.
        raise self.retry(countdown=running.seconds) from None
    except (execution.NodesBusy, execution.TransportRetry) as again:
        # A node is held by another heavy probe, or could not be reached: come back with
        # backoff; past the run's deadline the claim marks it missed.
        log.info("%s; retrying", again)
        backoff = 15 * 2 ** min(self.request.retries, 4)
        raise self.retry(countdown=min(settings.PROBE_RETRY_MAX_S, backoff)) from None
    return len(runs)


@shared_task(
    name=SETTLE_WITNESS,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
)
def settle_witness(batch: str) -> int:
    """Judge and record a throughput batch once its switch ports have settled."""
    return len(witness_settle.settle(uuid.UUID(batch)))


@shared_task(name="benchmarks.self_check", ignore_result=True)
def self_check() -> int:
    return len(missed_slots.check_results_arriving())
