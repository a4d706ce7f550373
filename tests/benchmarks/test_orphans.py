"""The dispatcher sends again the probe batches whose task was lost (benchmarks.orphans),
through the real Redis: a run nobody ever took, and a run whose worker died, are sent to
their site's queue; nothing that a task may still be coming for is doubled."""

import base64
import json
import uuid
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from benchmarks import orphans
from benchmarks.choices import RunState
from benchmarks.models import PendingWitness, ProbeRun
from tests.conftest import celery_broker
from tests.factories import make_lease, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def broker(redis_url, settings):
    queue = f"orphans-test-{uuid.uuid4().hex[:8]}"
    settings.PROBE_QUEUE_TEMPLATE = queue
    client = redis.Redis.from_url(redis_url)
    try:
        with celery_broker(redis_url):
            yield queue, client
    finally:
        client.delete(queue)


def queued(client, queue) -> list[str]:
    """The batch of each execute_batch task waiting in ``queue``, oldest first."""
    batches = []
    for raw in reversed(client.lrange(queue, 0, -1)):  # kombu pushes at the head
        message = json.loads(raw)
        assert message["headers"]["task"] == "benchmarks.execute_batch"
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        batches.append(args[0])
    return batches


def waiting_run(lease, *, slot, state, attempts=0, claimed=None, released=None, target="x"):
    run = make_run(lease, slot=slot, target=target, cadence_s=3600)
    ProbeRun.objects.filter(pk=run.pk).update(
        state=state,
        attempts=attempts,
        claimed_at=claimed,
        released_at=released,
        started_at=claimed,
        finished_at=None,
        verdict="none",
    )
    return run


def test_lost_batches_are_sent_again_and_nothing_a_task_may_still_come_for(broker, settings):
    queue, client = broker
    settings.PROBE_TASK_TIME_LIMIT_S = 900  # a claim is stale after 910 s
    settings.PROBE_RETRY_MAX_S = 300  # a retry comes back within 300 s
    now = timezone.now()
    lease = make_lease()
    ago = lambda seconds: now - timedelta(seconds=seconds)  # noqa: E731
    # Sent again: never taken two minutes into its slot; put back to wait 400 s ago, its
    # retry not back after 300 s; taken 20 minutes ago by a worker that has died (no live
    # worker's task outlasts the hard limit).
    never_taken = waiting_run(lease, slot=ago(120), state=RunState.SCHEDULED, target="a")
    retry_lost = waiting_run(
        lease, slot=ago(500), state=RunState.SCHEDULED, attempts=1, released=ago(400), target="h"
    )
    abandoned = waiting_run(
        lease, slot=ago(1500), state=RunState.RUNNING, attempts=1, claimed=ago(1200), target="b"
    )
    # Not sent: just asked for (its task may be on its way), put back a minute ago (its
    # retry may come yet), held by a live worker, past its deadline (the missed-run
    # marking's), and waiting for its switch reading (witness_settle's).
    waiting_run(lease, slot=ago(10), state=RunState.SCHEDULED, target="c")
    waiting_run(
        lease, slot=ago(120), state=RunState.SCHEDULED, attempts=1, released=ago(60), target="d"
    )
    waiting_run(
        lease, slot=ago(120), state=RunState.RUNNING, attempts=1, claimed=ago(60), target="e"
    )
    waiting_run(lease, slot=ago(4000), state=RunState.SCHEDULED, target="f")
    settling = waiting_run(
        lease, slot=ago(1500), state=RunState.RUNNING, attempts=1, claimed=ago(1200), target="g"
    )
    PendingWitness.objects.create(
        batch=settling.batch,
        lease=lease,
        due_at=ago(1190),
        ports={},
        readings=[],
        measurements=[],
    )

    assert orphans.resend(now=now) == 3
    assert sorted(queued(client, queue)) == sorted(
        str(run.batch) for run in (never_taken, retry_lost, abandoned)
    )

    # Still orphans moments later, but their tasks wait in the queue: nothing is doubled.
    assert orphans.resend(now=now + timedelta(seconds=15)) == 0
    assert len(queued(client, queue)) == 3

    # Once the queue is drained and they are still not taken, they go again.
    client.delete(queue)
    assert orphans.resend(now=now + timedelta(seconds=15)) == 3


@pytest.mark.usefixtures("broker")
def test_a_broker_that_does_not_answer_defers_the_resend_to_the_next_cycle(caplog):
    lease = make_lease()
    waiting_run(lease, slot=timezone.now() - timedelta(minutes=2), state=RunState.SCHEDULED)
    with celery_broker("redis://127.0.0.1:1/0"):  # nothing listens on port 1
        assert orphans.resend(now=timezone.now()) == 0
    assert "could not send orphaned probe batches again" in caplog.text
