"""Scale-out: two real Celery workers on their own queues, one running only probes and one
running only billing, against the real lab, the test database and the real Redis. Ten
ingests at a time race each other while the probes finish; nothing is processed twice."""

import re
import time
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db.models import F, Sum
from django.utils import timezone

from benchmarks import services
from benchmarks.choices import RunState, Trigger
from benchmarks.models import ProbeRun
from billing.ingest import FINAL, pending_since
from billing.models import HourlyRollup, IngestCursor
from billing.tasks import ingest
from config.celery import app
from tests.benchmarks.test_probes_celery import celery_lab, wait_for  # noqa: F401

pytestmark = [pytest.mark.lab, pytest.mark.django_db(transaction=True)]

NODES = 4  # the lab's hosts
KINDS = ("link", "counters")  # one sweep of the 4 nodes (one run, one batch) each
# acceptance, the schedule, fourteen run-nows: 16 x 2 kinds = 32 runs, 128 node checks
ROUNDS = 16
VOLLEY = 10  # billing.ingest tasks sent at once

# Celery's INFO lines: "[... INFO/ForkPoolWorker-2] Task billing.ingest[<id>] succeeded
# in 0.05s: 3" (the task's return value: runs ingested, runs a batch recorded).
TASK_LINE = re.compile(r"/(\S+)\] Task ([\w.]+)\[[0-9a-f-]+\] (received|succeeded in \S+: (.*))")


def task_lines(path):
    """(process, task name, event, return value) of each task line of a worker's log."""
    return [
        (m[1], m[2], "succeeded" if m[4] is not None else "received", m[4])
        for m in TASK_LINE.finditer(path.read_text())
    ]


def test_probe_and_billing_workers_on_their_own_queues_process_each_run_once(
    celery_lab,  # noqa: F811 (the fixture imported above)
    settings,
    tmp_path,
):
    lease, probe_queue, start = celery_lab
    billing_queue = f"billing-test-{uuid.uuid4().hex[:8]}"
    settings.BILLING_QUEUE = billing_queue  # config.celery.route_task reads it when sending
    terms = lease.terms.get()
    # An hour's slot: its deadline is never near while the test runs (see below).
    terms.probe_cadence_s = {"link": 3600, "counters": 3600}
    terms.save()

    queues = {"billing": billing_queue, "probes": probe_queue}
    env = {"BILLING_QUEUE": billing_queue, "LOG_FORMAT": "plain"}
    common = ["--without-gossip", "--without-mingle", "--loglevel=INFO"]
    # celery-0.log, celery-1.log in tmp_path (the fixture's order).
    start("worker", "-n", "billing@%h", "-Q", billing_queue, "--concurrency=2", *common, **env)
    start("worker", "-n", "probes@%h", "-Q", probe_queue, "--concurrency=2", *common, **env)
    logs = {"billing": tmp_path / "celery-0.log", "probes": tmp_path / "celery-1.log"}

    def both_answer():
        answered = {name for reply in app.control.ping(timeout=1) for name in reply}
        return answered if len(answered) == 2 else None

    names = wait_for(both_answer, seconds=60, what="both workers to answer a ping")
    by_role = {name.split("@")[0]: name for name in names}
    active = app.control.inspect(destination=list(names), timeout=5).active_queues()
    for role, queue in queues.items():
        assert [q["name"] for q in active[by_role[role]]] == [queue]

    # The scheduled slot must not pass while its runs wait for the worker.
    now = timezone.now()
    slot_end = services.slot_start(now, 3600) + timedelta(hours=1)
    if slot_end - now < timedelta(minutes=2):
        time.sleep((slot_end - now).total_seconds() + 1)

    # Acceptance (link and counters only: the heavy probes are not this test's subject),
    # then the dispatcher's scheduled slot, then two run-nows; every batch goes to the probe
    # queue by the site's queue name, every billing.ingest to the billing queue by route.
    services.request_runs(lease=lease, kinds=KINDS, trigger=Trigger.ACCEPTANCE)
    dispatched = services.dispatch_due()
    assert (dispatched.batches, dispatched.runs) == (len(KINDS), len(KINDS))
    for _ in range(ROUNDS - 2):
        services.request_runs(lease=lease, kinds=KINDS)
    runs = ProbeRun.objects.filter(lease=lease)
    total = ROUNDS * len(KINDS)
    assert runs.count() == total == 32
    assert runs.values("batch").distinct().count() == total  # one run per batch

    began, sent = time.monotonic(), 0
    while runs.filter(state__in=FINAL).count() < total:
        assert time.monotonic() - began < 120, "the probe worker did not finish the runs"
        for _ in range(VOLLEY):
            ingest.delay()
        sent += VOLLEY
        time.sleep(1)
    for _ in range(VOLLEY):  # and once more, after the last run finished
        ingest.delay()
    sent += VOLLEY

    def billing_done():
        done = [
            line
            for line in task_lines(logs["billing"])
            if line[1] == "billing.ingest" and line[2] == "succeeded"
        ]
        return done if len(done) == sent else None

    ingests = wait_for(billing_done, seconds=60, what=f"the billing worker to run {sent} ingests")

    # No run executed twice: each run was recorded by exactly one batch, once, with its
    # single claim, and linked once into the lease's chain.
    assert runs.filter(state=RunState.OK).count() == total
    assert set(runs.values_list("attempts", flat=True)) == {1}
    assert runs.filter(started_at__isnull=True).count() == 0
    chained = runs.exclude(chain_index=None).values_list("chain_index", flat=True)
    assert len(set(chained)) == len(chained) == total
    probe_lines = task_lines(logs["probes"])
    executed = [
        int(value)
        for _proc, name, event, value in probe_lines
        if name == "benchmarks.execute_batch" and event == "succeeded"
    ]
    assert len(executed) == total and sum(executed) == total  # 32 batches of one run

    # No run ingested twice: the runs the ingests report add up to the runs there are.
    counts = [int(value) for _proc, _name, _event, value in ingests]
    assert sum(counts) == total == 32
    assert len([c for c in counts if c]) >= 2, f"ingest never ran while runs finished: {counts}"
    # Two ingests at a time: both pool processes of the billing worker ran ingests.
    assert len({proc for proc, *_ in ingests}) == 2

    # The cursor is at the last run, and nothing waits.
    last = runs.order_by("-finished_at", "-pk").first()
    cursor = IngestCursor.objects.get(name="runs")
    assert (cursor.finished_at, cursor.run_id) == (last.finished_at, last.pk)
    assert pending_since() is None

    # Each scheduled sweep counted once in the hourly rollups: one per kind, one hour,
    # every node of the link sweep up.
    for kind in KINDS:
        rollups = HourlyRollup.objects.filter(lease=lease, kind=kind)
        counted = rollups.aggregate(
            n=Sum(F("passed") + F("failed") + F("unknown") + F("excluded") + F("informational"))
        )["n"]
        samples = runs.filter(kind=kind, trigger=Trigger.SCHEDULE, state__in=FINAL).count()
        assert (rollups.count(), counted, samples) == (1, 1, 1), kind
    assert HourlyRollup.objects.get(lease=lease, kind="link").passed == 1
    [swept] = runs.filter(kind="link", trigger=Trigger.SCHEDULE)
    assert len(swept.results()) == NODES and {r.verdict for r in swept.results()} == {"pass"}

    # Each worker ran only its own queue's tasks, by its log and by its own counters.
    assert {name for _p, name, *_ in probe_lines} == {"benchmarks.execute_batch"}
    assert {name for _p, name, *_ in task_lines(logs["billing"])} == {"billing.ingest"}
    stats = app.control.inspect(destination=list(names), timeout=5).stats()
    assert Counter(stats[by_role["probes"]]["total"]) == {"benchmarks.execute_batch": total}
    assert Counter(stats[by_role["billing"]]["total"]) == {"billing.ingest": sent}
