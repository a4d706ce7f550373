"""Batches whose task is gone: sent again by the dispatcher, so every run ends.

A batch's runs are stored first and its task sent to the broker after commit. The task
can be lost while its runs wait: a broker that restarts without its data (Redis killed
before it wrote its queues to disk, or run without persistence) loses what it held,
queued or handed to a worker that has not acknowledged it yet, and a send that fails
after the commit (the broker down at that instant) never reaches it. Left alone, a run
whose task was lost before any worker took it would be marked missed at its deadline
although nothing kept it from running; and a run whose worker died mid-probe is taken
over only when Redis hands the dead worker's task to another (the visibility timeout), so
with that task lost too it would stay "running" for ever: never judged, never ingested.

The same goes for a run a worker put back to wait (its nodes busy, a node unreachable):
its retry is a countdown that the broker holds for the worker, and a worker that loses
its broker connection drops the countdowns it holds, counting on the broker to hand them
out again; a broker that lost its data has nothing to hand out.

So each dispatcher cycle sends again the batches that have, with their deadline ahead,

- a run nobody ever took (scheduled, no attempt), whose slot began over RESEND_GRACE
  ago;
- a run put back to wait longer ago than its retry can take (PROBE_RETRY_MAX_S, plus
  RESEND_GRACE); or, deadline or not,
- a run whose claim is stale: the worker that took it is dead, since Celery's hard time
  limit ends a live one's task first (``stale_claim_after``),

but only to a probe queue that holds no message: a backlog is never sent into itself, and
a task still waiting there is not doubled. A copy of a task that did survive somewhere is
harmless: the claim (``execution._claim``) gives each run to one task, and a copy that
comes second finds its runs running or over. The re-sent batch runs, or, past its
deadline, its runs are marked missed: either way they end. Batches whose switch reading
is pending are ``witness_settle.settle_overdue``'s."""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db.models import Q
from kombu.exceptions import KombuError

from benchmarks.choices import RunState
from benchmarks.models import PendingWitness, ProbeRun
from benchmarks.task_names import EXECUTE_BATCH
from leases.selectors import sites_among

log = logging.getLogger(__name__)

# A run asked for moments ago may still be on its way to the broker (its sender commits,
# then sends): not an orphan yet.
RESEND_GRACE = timedelta(seconds=30)
BROKER_TIMEOUT_S = 5


def stale_claim_after() -> timedelta:
    # A live worker's task is killed by Celery's hard time limit before this; so a run
    # still "running" after it belongs to a worker that died, and may be taken over.
    return timedelta(seconds=settings.PROBE_TASK_TIME_LIMIT_S + 10)


def orphaned(now: datetime) -> dict[uuid.UUID, int]:
    """Batch -> its site, for the batches with a run that no task may be left for."""
    never_taken = Q(state=RunState.SCHEDULED, attempts=0, slot_at__lt=now - RESEND_GRACE)
    retry_lost = Q(
        state=RunState.SCHEDULED,
        attempts__gt=0,
        released_at__lt=now - timedelta(seconds=settings.PROBE_RETRY_MAX_S) - RESEND_GRACE,
    )
    abandoned = Q(state=RunState.RUNNING, claimed_at__lt=now - stale_claim_after())
    return dict(
        ProbeRun.objects.filter(((never_taken | retry_lost) & Q(deadline_at__gt=now)) | abandoned)
        .exclude(batch__in=PendingWitness.objects.values("batch"))
        .values_list("batch", "site_id")
        .distinct()
    )


def resend(*, now: datetime) -> int:
    """Send the orphaned batches' tasks again, to their sites' queues when those are
    empty. Returns how many were sent."""
    app = current_app  # config.celery's
    found = orphaned(now)
    if not found:
        return 0
    sites = sites_among(pks=set(found.values())).in_bulk()
    by_queue: dict[str, list[uuid.UUID]] = defaultdict(list)
    for batch, site_id in found.items():
        by_queue[sites[site_id].probe_queue].append(batch)
    sent: list[uuid.UUID] = []
    connection = app.connection_for_write(connect_timeout=BROKER_TIMEOUT_S)
    errors = (KombuError, OSError, *connection.connection_errors, *connection.channel_errors)
    try:
        with connection:
            connection.ensure_connection(max_retries=1)
            channel = connection.default_channel
            for queue, batches in sorted(by_queue.items()):
                if channel.queue_declare(queue=queue).message_count:
                    continue  # a backlog: these may be in it
                for batch in sorted(batches):
                    app.send_task(
                        EXECUTE_BATCH, args=[str(batch)], queue=queue, connection=connection
                    )
                    sent.append(batch)
    except errors as error:
        log.warning("could not send orphaned probe batches again (%s); next cycle", error)
    if sent:
        log.warning(
            "sent %d probe batch(es) again whose task was lost (a broker restarted "
            "without its data, a send failed, or a dead worker's task is gone): %s",
            len(sent),
            ", ".join(str(batch) for batch in sent),
        )
    return len(sent)
