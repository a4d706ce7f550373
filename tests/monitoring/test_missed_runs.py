"""gpulease_site_missed_runs_total only goes up: runs are counted when they are marked missed
(by the dispatcher's sweep, or by a worker that came too late), and archiving the month
that holds them, or restoring it, does not move the figure. Prometheus reads a drop in a
counter as a reset, and ``increase()`` then as a burst of new misses (the promtool case in
monitoring/prometheus/rules.test.yml)."""

import uuid
from datetime import timedelta

import pytest
from django.db import connection

from benchmarks.execution import _claim
from benchmarks.missed_slots import mark_missed
from benchmarks.models import ProbeRun
from common import archives, partitions
from gpulease_verify.periods import Period
from monitoring import metrics
from tests.conftest import require
from tests.factories import NodeFactory, at, make_lease, make_run
from tests.monitoring.test_metrics import families, value
from tests.portal.support import active

pytestmark = pytest.mark.django_db

LATER = at("2027-03-05 10:00")  # November 2026 is over and past any retention


def scheduled(lease, nodes, slot, batch=None):  # type: ignore[no-untyped-def]
    """A throughput run due at ``slot`` (a 10-minute slot) that no worker started."""
    run = make_run(lease, slot=slot, cadence_s=600, nodes=nodes, target=f"x{slot:%d%H%M}")
    ProbeRun.objects.filter(pk=run.pk).update(
        state="scheduled", started_at=None, finished_at=None, batch=batch or uuid.uuid4()
    )
    return run


def exported_missed(site) -> float:  # type: ignore[no-untyped-def]
    return value(families(metrics.exposition())["gpulease_site_missed_runs_total"], site=site.code)


def test_missed_runs_are_counted_when_marked_and_an_archive_does_not_lower_them(
    tmp_path, monkeypatch
):
    require(connection.vendor == "postgresql", "archives need PostgreSQL's partitions")
    nodes = NodeFactory.create_batch(2)
    site = nodes[0].leaf_switch.fabric.site
    lease = active(make_lease(nodes=nodes))
    for minute in (0, 10, 20):  # deadlines 10:10, 10:20, 10:30
        scheduled(lease, nodes, at("2026-11-02 10:00") + timedelta(minutes=minute))
    elsewhere = NodeFactory.create_batch(2)  # a lease at another site
    other = active(make_lease(nodes=elsewhere))
    scheduled(other, elsewhere, at("2026-11-02 10:00"))
    batch = uuid.uuid4()
    scheduled(lease, nodes, at("2026-11-02 11:00"), batch)  # deadline 11:10
    scheduled(lease, nodes, at("2026-11-02 12:00"))  # deadline 12:10: not yet
    partitions.ensure(now=at("2026-10-15 00:00"), ahead=3)  # as beat makes the months

    assert mark_missed(now=at("2026-11-02 10:25")) == 3  # the sweep, by its deadline
    assert mark_missed(now=at("2026-11-02 10:26")) == 0  # nothing twice
    assert _claim(batch, at("2026-11-02 11:30")) == []  # a worker that came too late
    assert exported_missed(site) == 3
    assert exported_missed(elsewhere[0].leaf_switch.fabric.site) == 1
    assert ProbeRun.objects.filter(state="missed").count() == 4

    monkeypatch.setattr("portal.selectors.now", lambda: LATER)
    with connection.cursor() as cursor:
        # The runs were written and updated in this test's own transaction: their deferred
        # foreign-key checks run now, as a commit would have run them long before any
        # month is archived (PostgreSQL drops no table with checks pending).
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    record = archives.archive_month(Period.parse("2026-11"), directory=tmp_path, now=LATER)
    assert record.rows["benchmarks_proberun"] == 6  # 4 missed, 2 still scheduled
    assert ProbeRun.objects.count() == 0
    assert exported_missed(site) == 3  # the runs left, the count stays

    archives.restore(tmp_path / "gpulease-archive-2026-11.tar", now=LATER)
    assert ProbeRun.objects.filter(state="missed").count() == 4
    assert exported_missed(site) == 3  # and a restore does not count them again

    scheduled(lease, nodes, at("2027-03-05 09:00"))
    # March's, and November's 10:20 and 12:00 runs, restored as they were archived
    assert mark_missed(now=LATER) == 3
    assert exported_missed(site) == 6
