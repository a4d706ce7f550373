"""Real Celery workers and beat, on the real Redis, probing the real lab."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import redis
from django.db import connection
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from benchmarks import services
from benchmarks.choices import RunState, Trigger
from benchmarks.lab_registry import register_lab
from benchmarks.models import ProbeRun
from benchmarks.tasks import execute_batch
from telemetry.models import NodeReading
from tests.conftest import celery_broker

# waits: mostly waits on real time; make test runs it in the waiting lane (scripts/test_shards.py).
pytestmark = [pytest.mark.lab, pytest.mark.waits, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def celery_lab(lab, settings, redis_url, tmp_path):
    """The lab registered in the test database, a private probe queue, and a way to start
    workers and beat that share the test database and the Redis broker."""
    redis.Redis.from_url(redis_url).flushdb()
    queue = f"probes-test-{uuid.uuid4().hex[:8]}"
    settings.PROBE_SSH_KEY = Path(lab.state.client_key_path)
    settings.PROBE_QUEUE_TEMPLATE = queue
    lease = register_lab(lab.state)
    db = connection.settings_dict
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": redis_url,
        "PROBE_SSH_KEY": lab.state.client_key_path,
        "PROBE_QUEUE_TEMPLATE": queue,
        "PROBE_THROUGHPUT_SECONDS": "2",
        "GPULEASE_VAR_DIR": str(tmp_path),
    }
    started: list[subprocess.Popen] = []
    logs = []

    def start(*args: str, **overrides: str) -> subprocess.Popen:
        logs.append((tmp_path / f"celery-{len(started)}.log").open("w"))
        # args[0] is the command (worker, beat); a --loglevel among the rest wins.
        command, *options = args
        argv = [sys.executable, "-m", "celery", "-A", "config", command, "--loglevel=WARNING"]
        process = subprocess.Popen(
            [*argv, *options],
            cwd=ROOT,
            env={**env, **overrides},
            start_new_session=True,
            stdout=logs[-1],
            stderr=subprocess.STDOUT,
        )
        started.append(process)
        return process

    try:
        with celery_broker(redis_url):
            yield lease, queue, start
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        for log in logs:
            log.close()


def wait_for(condition, *, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {seconds:.0f} s waiting for {what}")


def test_worker_and_beat_on_redis_run_probes_on_schedule(celery_lab):
    lease, queue, start = celery_lab
    every_5s, _ = IntervalSchedule.objects.get_or_create(every=5, period="seconds")
    PeriodicTask.objects.update_or_create(
        name="test dispatch", defaults={"task": "benchmarks.dispatch", "interval": every_5s}
    )
    terms = lease.terms.get()
    terms.probe_cadence_s = {"link": 60}
    terms.save()
    start("worker", "-Q", f"celery,{queue}", "--concurrency=4", "--without-gossip")
    start("beat", "-S", "django_celery_beat.schedulers:DatabaseScheduler")

    scheduled = wait_for(
        lambda: list(
            ProbeRun.objects.filter(
                lease=lease, kind="link", trigger=Trigger.SCHEDULE, state=RunState.OK
            )
        ),
        seconds=180,
        what="scheduled link checks run by the worker",
    )
    assert {run.verdict for run in scheduled} == {"pass"}
    assert len({run.slot_at for run in scheduled}) == 1
    # The first cycle also ran the acceptance probes, the lease's baseline.
    assert ProbeRun.objects.filter(lease=lease, trigger=Trigger.ACCEPTANCE).exists()
    # Beat's telemetry tick sent the lab site's poll to the site's queue, and the worker
    # read every node over SSH (its intervals wait, merged, until they are stored).
    polled = wait_for(
        lambda: list(
            NodeReading.objects.filter(
                node__hostname__startswith="lab-h", at__isnull=False, error=""
            ).exclude(snapshot=None)
        ),
        seconds=60,
        what="beat's telemetry polls run by the worker",
    )
    assert len(polled) == 4
    assert all(reading.snapshot["ports"]["data0"]["up"] for reading in polled)


def test_a_worker_killed_mid_probe_loses_no_run_and_duplicates_none(celery_lab):
    lease, queue, start = celery_lab
    batches = services.request_runs(lease=lease, kinds=["throughput"], enqueue=False)
    batch = next(
        b for b in batches if ProbeRun.objects.filter(batch=b, target="lab-h1>lab-h2").exists()
    )
    ProbeRun.objects.exclude(batch=batch).delete()
    execute_batch.apply_async(args=[str(batch)], queue=queue)

    # A short hard time limit, so the dead worker's claim goes stale quickly, and a short
    # Redis visibility timeout, so the unacknowledged task comes back quickly.
    fast = {
        "PROBE_THROUGHPUT_SECONDS": "6",
        "PROBE_TASK_TIME_LIMIT_S": "15",
        "CELERY_VISIBILITY_TIMEOUT_S": "5",
    }
    first = start("worker", "-Q", queue, "--concurrency=1", "--without-gossip", **fast)
    wait_for(
        lambda: ProbeRun.objects.filter(
            batch=batch, state=RunState.RUNNING, started_at__isnull=False
        ).exists(),
        seconds=60,
        what="the probe to start",
    )
    time.sleep(2)  # iperf3 is mid-run now
    os.killpg(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    assert ProbeRun.objects.get(batch=batch).state == RunState.RUNNING

    start("worker", "-Q", queue, "--concurrency=1", "--without-gossip", **fast)
    run = wait_for(
        lambda: ProbeRun.objects.filter(batch=batch, state=RunState.OK).first(),
        seconds=120,
        what="the killed worker's run to be taken over and finished",
    )
    assert ProbeRun.objects.filter(batch=batch).count() == 1
    assert ProbeRun.objects.filter(lease=lease, kind="throughput").count() == 1
    assert run.attempts == 2
    # The taken-over run measured the lab's 1 Gbit/s link for real. Its verdict is not
    # asserted: at 95% of the shaped rate it depends on this 2-core machine's load (CI judged
    # it fail once); what this test proves is that the run was neither lost nor duplicated.
    assert run.verdict in ("pass", "fail"), run.verdict_reason
    assert run.measured_bps >= 0.5e9, run.verdict_reason
    # Judged after the worker's settle task read the switch (benchmarks.witness_settle).
    assert run.parsed["witness"]["port"] == "h1-data"
