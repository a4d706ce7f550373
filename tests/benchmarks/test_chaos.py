"""Chaos during a running probe cycle on the real lab: the probe worker is killed mid-probe,
the main worker mid-ingest, the broker (a Redis of the test's own, keeping nothing on disk)
is killed and started again empty, and the beat that schedules is killed while a second
beat stands by and a third is started. Afterwards every run asked for has ended, none ran
twice or was missed, each was ingested once, and one beat at a time sent the schedule."""

import os
import re
import signal
import subprocess
import time
from collections import Counter
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import psycopg
import pytest
from django.db import connection
from django.db.models import F, Sum
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from benchmarks import services
from benchmarks.choices import RunState, Trigger
from benchmarks.models import NodeLock, ProbeRun
from billing.ingest import FINAL, pending_runs
from billing.models import HourlyRollup
from common.models import BeatLock
from leases.models import Node
from leases.services import release_node
from tests.benchmarks.test_probes_celery import celery_lab, wait_for  # noqa: F401
from tests.benchmarks.test_scale_out import task_lines
from tests.conftest import require_tool
from tests.deploy.processes import free_port

# waits: mostly waits on real time; make test runs it in the waiting lane (scripts/test_shards.py).
pytestmark = [pytest.mark.lab, pytest.mark.waits, pytest.mark.django_db(transaction=True)]

EVERY_S = 3  # the test's own dispatch and ingest entries
TTL_S = 10  # BEAT_LOCK_TTL_S
TICK_S = 5
# "[2026-12-04 17:46:05,499: INFO/MainProcess] Scheduler: Sending due task chaos: dispatch"
SENT = re.compile(r"^\[(\S+ \S+): INFO/MainProcess\] Scheduler: Sending due task chaos: dispatch")


class Broker:
    """A redis-server of the test's own on a free port, with no persistence: killed, it
    comes back empty, as a Redis that crashed before writing its data does."""

    def __init__(self, workdir: Path):
        self.binary = require_tool("redis-server")
        self.port = free_port()
        self.workdir = workdir
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                self.binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        import redis

        client = redis.Redis.from_url(self.url)
        wait_for(lambda: _pings(client), seconds=10, what="the test's redis-server")

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(timeout=10)


def _pings(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture
def broker(tmp_path):
    broker = Broker(tmp_path)
    broker.start()
    try:
        yield broker
    finally:
        if broker.process and broker.process.poll() is None:
            broker.kill()


def _dsn() -> str:
    db = connection.settings_dict
    return f"host={db['HOST']} port={db['PORT']} user={db['USER']} dbname={db['NAME']}" + (
        f" password={db['PASSWORD']}" if db["PASSWORD"] else ""
    )


def _blocked_ingests(session: psycopg.Connection) -> list[int]:
    """Backends waiting for the traffic samples table: ingests that have written their
    hourly rollups and wait to rebuild the samples (billing.ingest.recompute_traffic)."""
    session.execute("SELECT pg_stat_clear_snapshot()")
    rows = session.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query ILIKE %s",
        ['DELETE FROM "billing_trafficsample"%'],
    ).fetchall()
    return [pid for (pid,) in rows]


def _sends(logs: list[Path]) -> list[datetime]:
    return sorted(
        datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f")
        for log in logs
        for line in log.read_text().splitlines()
        if (match := SENT.match(line))
    )


def test_killed_workers_broker_and_beat_lose_no_run_and_double_nothing(
    broker,  # first, so that it is stopped after the workers and beats
    celery_lab,  # noqa: F811 (the fixture imported above)
    tmp_path,
):
    lease, queue, start = celery_lab
    # The lab lease on two of its hosts, checked hourly: the cycle is the acceptance run
    # (link, counters, throughput, latency; no GPUs for a collective) and the hour's link
    # and counter sweeps, each slot's deadline far enough ahead that nothing here may be
    # missed honestly.
    now = timezone.now()
    slot_end = services.slot_start(now, 3600) + timedelta(hours=1)
    if slot_end - now < timedelta(minutes=3):
        time.sleep((slot_end - now).total_seconds() + 1)
    for assignment in lease.assignments.filter(node__hostname__in=["lab-h3", "lab-h4"]):
        release_node(assignment=assignment, at=timezone.now())
    terms = lease.terms.get()
    terms.probe_cadence_s = {"link": 3600, "counters": 3600}
    terms.save()
    every, _ = IntervalSchedule.objects.get_or_create(every=EVERY_S, period="seconds")
    for name, task in (
        ("chaos: dispatch", "benchmarks.dispatch"),
        ("chaos: ingest", "billing.ingest"),
    ):
        PeriodicTask.objects.create(name=name, task=task, interval=every)

    env = {
        "CELERY_BROKER_URL": broker.url,
        "LOG_FORMAT": "plain",
        "PROBE_THROUGHPUT_SECONDS": "4",
        # A dead worker's claim goes stale after 30 s; Redis hands out unacknowledged tasks
        # after 5 s; a batch put back to wait tries again within 5 s.
        "PROBE_TASK_TIME_LIMIT_S": "20",
        "CELERY_VISIBILITY_TIMEOUT_S": "5",
        "PROBE_RETRY_MAX_S": "5",
        "BEAT_LOCK_TTL_S": str(TTL_S),
    }
    worker = ["--without-gossip", "--without-mingle", "--loglevel=INFO"]
    logs = tmp_path  # celery_lab writes celery-<n>.log, n in start order

    def main():
        return start("worker", "-n", "main@%h", "-Q", "celery", "--concurrency=2", *worker, **env)

    def probes():
        return start("worker", "-n", "probes@%h", "-Q", queue, "--concurrency=2", *worker, **env)

    def beat():
        return start("beat", "--loglevel=INFO", **env)

    # Another heavy probe holds both nodes until the ingest is caught: the acceptance
    # throughput and latency batches are put back to wait (and retried every 5 s) while
    # the sweeps run.
    nodes = list(Node.objects.filter(hostname__in=["lab-h1", "lab-h2"]))
    NodeLock.objects.bulk_create(
        NodeLock(
            node=node, acquired_at=timezone.now(), expires_at=timezone.now() + timedelta(hours=1)
        )
        for node in nodes
    )
    # Ingest will wait, mid-transaction, for the traffic samples table: the test holds it.
    held = psycopg.connect(_dsn())
    held.execute("LOCK TABLE billing_trafficsample IN EXCLUSIVE MODE")
    watcher = psycopg.connect(_dsn(), autocommit=True)
    try:
        first_main, first_probes = main(), probes()  # celery-0.log, celery-1.log
        # Two beats started by mistake: celery-2.log, celery-3.log.
        beats = {}
        for n in (2, 3):
            beats[beat().pid] = n

        # 1. The main worker, killed mid-ingest: its hourly rollups written, its traffic
        # samples not yet, the cursor and its runs locked.
        blocked = wait_for(
            lambda: _blocked_ingests(watcher), seconds=90, what="an ingest to reach the samples"
        )
        os.killpg(first_main.pid, signal.SIGKILL)
        first_main.wait(timeout=30)
        assert _blocked_ingests(watcher) == blocked  # it died waiting
        held.rollback()  # and its transaction goes with its connection

        # 2. The probe worker, killed mid-probe.
        NodeLock.objects.filter(node__in=nodes).delete()
        throughput = wait_for(
            lambda: ProbeRun.objects.filter(
                lease=lease, kind="throughput", state=RunState.RUNNING, started_at__isnull=False
            ).first(),
            seconds=60,
            what="the acceptance throughput probe to start",
        )
        time.sleep(1.5)  # iperf3 is mid-run
        os.killpg(first_probes.pid, signal.SIGKILL)
        probe_killed_at = timezone.now()
        first_probes.wait(timeout=30)

        # 3. The broker, killed: it comes back empty, every task queued, handed out or
        # waiting for its countdown gone. 4. The beat that schedules, killed.
        broker.kill()
        holder_pid = int(BeatLock.objects.get().holder.split(":")[1])
        os.killpg(holder_pid, signal.SIGKILL)
        killed_beat_at = datetime.now()
        broker.start()
        main(), probes(), beat()  # celery-4.log, celery-5.log, celery-6.log
        assert ProbeRun.objects.get(pk=throughput.pk).state == RunState.RUNNING

        def taken_over():
            run = ProbeRun.objects.get(pk=throughput.pk)
            return run if run.state in FINAL else None

        run = wait_for(taken_over, seconds=120, what="the killed probe to be taken over")
        lease.probes_enabled = False  # no further slots: what was asked for must end
        lease.save(update_fields=["probes_enabled"])

        def settled():
            runs = ProbeRun.objects.filter(lease=lease)
            return (
                runs.exists()
                and not runs.exclude(state__in=FINAL).exists()
                and not pending_runs().exists()
            )

        wait_for(settled, seconds=120, what="every run to end and be ingested")
    finally:
        held.close()
        watcher.close()

    runs = ProbeRun.objects.filter(lease=lease)
    # 0 lost: every run asked for ended, and none had to be given up as missed.
    assert set(runs.values_list("state", flat=True)) <= {
        RunState.OK,
        RunState.FAILED,
        RunState.SKIPPED,
    }
    # The acceptance run of every kind, and the hour's link and counter sweeps.
    made = Counter(runs.exclude(trigger=Trigger.CONFIRMATION).values_list("kind", "trigger"))
    assert made == {
        ("link", "acceptance"): 1,
        ("counters", "acceptance"): 1,
        ("throughput", "acceptance"): 1,
        ("latency", "acceptance"): 1,
        ("collective", "acceptance"): 1,  # skipped: no GPUs
        ("link", "schedule"): 1,
        ("counters", "schedule"): 1,
    }, made
    # Taken over: claimed and measured again after its worker died.
    assert run.state == RunState.OK
    assert run.claimed_at > probe_killed_at and run.started_at > probe_killed_at
    assert run.measured_bps >= 0.5e9, run.verdict_reason

    # 0 duplicated: one run per slot, and no batch measured twice: the runs the probe
    # workers' batches returned add up to the runs measured (a second copy of a batch
    # returns none).
    slots = Counter(runs.values_list("kind", "tool", "pattern", "target", "slot_at", "trigger"))
    assert max(slots.values()) == 1
    probe_logs = [logs / "celery-1.log", logs / "celery-5.log"]
    executed = [
        int(value)
        for path in probe_logs
        for _proc, name, event, value in task_lines(path)
        if name == "benchmarks.execute_batch" and event == "succeeded"
    ]
    measured = runs.exclude(trigger=Trigger.CONFIRMATION).exclude(state=RunState.SKIPPED)
    assert sum(executed) == measured.count() == 6, executed

    # 0 doubled in billing: each run ingested once (the killed ingest counted none), and
    # the hourly rollups count each scheduled sweep once.
    main_logs = [logs / "celery-0.log", logs / "celery-4.log"]
    ingested = [
        int(value)
        for path in main_logs
        for _proc, name, event, value in task_lines(path)
        if name == "billing.ingest" and event == "succeeded"
    ]
    assert sum(ingested) == runs.count(), ingested
    for kind in ("link", "counters"):
        counted = HourlyRollup.objects.filter(lease=lease, kind=kind).aggregate(
            n=Sum(F("passed") + F("failed") + F("unknown") + F("excluded") + F("informational"))
        )["n"]
        assert counted == 1, kind

    # One beat at a time: the test's dispatch entry, sent by all beats together, was never
    # sent twice for one due time, and the killed holder's successor took over in time.
    beat_logs = [logs / f"celery-{n}.log" for n in (2, 3, 6)]
    sends = _sends(beat_logs)
    gaps = [(later - earlier).total_seconds() for earlier, later in pairwise(sends)]
    assert min(gaps) >= EVERY_S - 1, gaps
    after_kill = [at for at in sends if at > killed_beat_at]
    assert (after_kill[0] - killed_beat_at).total_seconds() <= TTL_S + TICK_S + EVERY_S + 2
    senders = [
        n
        for n, path in zip((2, 3, 6), beat_logs, strict=True)
        if "Sending due task chaos" in path.read_text()
    ]
    assert beats[holder_pid] in senders and len(senders) == 2, senders
    # Whichever of the two others took over when the lock expired (under load the late
    # beat may be first), the beat that never sent said it stood by.
    for n, path in zip((2, 3, 6), beat_logs, strict=True):
        if n not in senders:
            assert "is standing by" in path.read_text(), n
