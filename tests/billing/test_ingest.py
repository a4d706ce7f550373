"""From finished runs to rollups, traffic samples and incidents, with hand-checked counts."""

import threading
import time
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection, transaction

from benchmarks.links import link_pending
from benchmarks.models import ProbeRun
from billing import ingest, sla
from billing.models import HourlyRollup, TrafficSample
from incidents.models import Incident
from tests.conftest import require
from tests.factories import NodeFactory, at, make_lease, make_run

pytestmark = pytest.mark.django_db

HOUR = at("2026-11-02 10:00")


@pytest.fixture
def lease():
    return make_lease(
        starts_at=at("2026-11-01 00:00"),
        nodes=NodeFactory.create_batch(2),
        # Mondays 10:40-11:00 Shanghai are maintenance.
        maintenance_windows=[{"weekday": 0, "start": "10:40", "end": "11:00"}],
    )


def test_an_hour_counts_pass_fail_unknown_and_excluded(lease):
    # 2026-11-02 is a Monday. Six throughput samples in the 10:00 hour (Shanghai):
    make_run(lease, slot=HOUR, measured_bps=98 * 10**9)  # pass
    make_run(lease, slot=HOUR + timedelta(minutes=10), measured_bps=97 * 10**9)  # pass
    make_run(lease, slot=HOUR + timedelta(minutes=20), measured_bps=96 * 10**9)  # pass
    make_run(lease, slot=HOUR + timedelta(minutes=30), verdict="fail", measured_bps=40 * 10**9)
    make_run(lease, slot=HOUR + timedelta(minutes=35), state="unreachable")  # unknown
    make_run(
        lease,
        slot=HOUR + timedelta(minutes=45),
        verdict="fail",  # in maintenance
        measured_bps=10**9,
    )
    ingest.ingest_all(notify=False)
    rollup = HourlyRollup.objects.get(lease=lease, kind="throughput")
    assert (rollup.passed, rollup.failed, rollup.unknown, rollup.excluded) == (3, 1, 1, 1)
    # The figures keep every measured sample, maintenance ones too: 98+97+96+40+1 Gbit/s.
    assert rollup.measured == 5
    assert rollup.sum_bps == Decimal(332 * 10**9)
    assert (rollup.min_bps, rollup.max_bps) == (10**9, 98 * 10**9)
    summary = sla.evaluate(lease=lease, start=at("2026-11-01 00:00"), end=at("2026-12-01 00:00"))
    # Unknown counts against the provider: 3 / (3 + 1 + 1) = 60%; measured only: 3/4.
    assert summary.throughput.percent == Decimal("60.000")
    assert summary.throughput.measured_percent == Decimal("75.000")


def test_a_late_result_recomputes_only_its_own_hour(lease):
    make_run(lease, slot=HOUR, measured_bps=98 * 10**9)
    make_run(lease, slot=HOUR + timedelta(hours=1), measured_bps=98 * 10**9)
    ingest.ingest_all(notify=False)
    untouched = HourlyRollup.objects.get(lease=lease, hour=HOUR + timedelta(hours=1))
    # A run of 10:00 that finished an hour late (a worker came back) fails.
    make_run(
        lease,
        slot=HOUR + timedelta(minutes=5),
        verdict="fail",
        measured_bps=10**9,
        finished=HOUR + timedelta(hours=2),
    )
    result = ingest.ingest_all(notify=False)
    assert (result.runs, result.hours) == (1, 1)
    assert HourlyRollup.objects.get(lease=lease, hour=HOUR).failed == 1
    later = HourlyRollup.objects.get(pk=untouched.pk)
    assert later.computed_at == untouched.computed_at


def test_hours_read_together_write_only_the_hours_asked_for(lease):
    # Runs at 10:00, 11:00 and 13:00, and one three weeks later: 10:00 and 13:00 are one
    # block (one read), the late one another; 11:00 is read with them but not rebuilt.
    later = HOUR + timedelta(weeks=3)
    for slot, bps in ((HOUR, 98), (HOUR + timedelta(hours=1), 97), (HOUR + timedelta(hours=3), 40)):
        make_run(lease, slot=slot, measured_bps=bps * 10**9, verdict="pass" if bps > 90 else "fail")
    make_run(lease, slot=later, measured_bps=96 * 10**9)
    written = ingest.recompute_hours(
        lease=lease, kind="throughput", hours=[later, HOUR + timedelta(hours=3), HOUR]
    )
    assert written == 3
    rollups = {
        r.hour: (r.passed, r.failed, r.max_bps)
        for r in HourlyRollup.objects.filter(lease=lease, kind="throughput")
    }
    assert rollups == {
        HOUR: (1, 0, 98 * 10**9),
        HOUR + timedelta(hours=3): (0, 1, 40 * 10**9),
        later: (1, 0, 96 * 10**9),
    }


def test_availability_counts_minutes_when_every_node_is_up(lease):
    for slot, outcomes in (
        (HOUR, ("pass", "pass")),  # 5 minutes available
        (HOUR + timedelta(minutes=5), ("pass", "fail")),  # 5 unavailable
        (HOUR + timedelta(minutes=10), ("pass", None)),  # one node unreachable: unknown
        (HOUR + timedelta(minutes=15), ("pass", "pass")),  # 5 available
    ):
        for node, outcome in zip(("n1", "n2"), outcomes, strict=True):
            make_run(
                lease,
                kind="link",
                target=node,
                pattern="node",
                slot=slot,
                cadence_s=300,
                state="ok" if outcome else "unreachable",
                verdict=outcome or "none",
            )
    ingest.ingest_all(notify=False)
    availability = sla.evaluate(lease=lease, start=HOUR, end=HOUR + timedelta(hours=1)).availability
    assert (
        availability.available_minutes,
        availability.unavailable_minutes,
        availability.unknown_minutes,
    ) == (10, 5, 5)
    assert availability.percent == Decimal("50.000")  # 10 of 20 minutes


def counters(tx_by_node):
    return {
        node: {
            "ports": [{"section": "counters data0", "name": "data0", "tx_bytes": tx, "rx_bytes": 0}]
        }
        for node, tx in tx_by_node.items()
    }


def test_traffic_samples_add_nodes_across_a_reset_and_a_wrap(lease):
    top = 2**64
    readings = [
        {"n1": 1_000, "n2": top - 500},  # first reading: no sample yet
        {"n1": 301_000, "n2": 700},  # n1 +300,000; n2 wrapped: 500 + 700 = 1,200
        {"n1": 2_000, "n2": 10_700},  # n1 restarted from 0: +2,000; n2 +10,000
    ]
    for index, values in enumerate(readings):
        slot = HOUR + timedelta(minutes=5 * index)
        for node, parsed in counters(values).items():
            make_run(
                lease,
                kind="counters",
                target=node,
                pattern="node",
                slot=slot,
                cadence_s=300,
                verdict="none",
                parsed=parsed,
            )
    ingest.ingest_all(notify=False)
    samples = list(TrafficSample.objects.filter(lease=lease).order_by("slot_at"))
    assert [(s.tx_bytes, s.nodes, s.seconds, s.resets, s.wraps) for s in samples] == [
        (Decimal(301_200), 2, 300, 0, 1),
        (Decimal(12_000), 2, 300, 1, 0),
    ]


def test_three_violations_in_a_row_open_an_incident_and_a_pass_closes_it(
    lease, django_capture_on_commit_callbacks
):
    figures = [98, 40, 38, 41, 97]  # Gbit/s, one sample an hour
    runs = [
        make_run(
            lease,
            target="n1>n2",
            slot=HOUR + timedelta(hours=i),
            verdict="pass" if gbps >= 95 else "fail",
            measured_bps=gbps * 10**9,
        )
        for i, gbps in enumerate(figures)
    ]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = ingest.ingest_all()
    (incident,) = Incident.objects.all()
    assert result.opened == result.closed == [incident.pk]
    assert incident.opened_at == runs[1].slot_at
    assert incident.closed_at == runs[4].finished_at
    assert incident.violations == 3
    assert incident.worst_bps == 38 * 10**9
    assert sorted(incident.runs.values_list("pk", flat=True)) == [r.pk for r in runs[1:4]]
    assert len(callbacks) == 2  # opened, closed: sent after commit
    # Opened and closed by ingest (incidents.services), no person involved.
    assert (incident.source, incident.opened_by) == ("ingest", "ingest")
    assert (incident.closed_source, incident.closed_by) == ("ingest", "ingest")


def test_two_violations_are_not_an_incident(lease):
    for i, gbps in enumerate([40, 41, 97]):
        make_run(
            lease,
            slot=HOUR + timedelta(hours=i),
            verdict="pass" if gbps > 95 else "fail",
            measured_bps=gbps * 10**9,
        )
    ingest.ingest_all(notify=False)
    assert not Incident.objects.exists()


def test_daily_aggregates_follow_the_tenant_day(lease):
    # 07:00 and 09:00 Shanghai fall on two different UTC days but one local day.
    make_run(lease, slot=at("2026-11-03 07:00"), measured_bps=98 * 10**9)
    make_run(lease, slot=at("2026-11-03 09:00"), verdict="fail", measured_bps=10**9)
    make_run(lease, slot=at("2026-11-04 07:00"), measured_bps=97 * 10**9)
    ingest.ingest_all(notify=False)
    days = sla.daily(lease=lease, start=at("2026-11-01 00:00"), end=at("2026-12-01 00:00"))
    assert sorted(days) == [("2026-11-03", "throughput"), ("2026-11-04", "throughput")]
    assert (days["2026-11-03", "throughput"].passed, days["2026-11-03", "throughput"].failed) == (
        1,
        1,
    )
    assert days["2026-11-04", "throughput"].percent == Decimal("100.000")


def test_a_run_that_commits_after_a_later_one_was_read_is_still_ingested(lease):
    """Workers finish concurrently: run B (finished 10:20) commits and is ingested before
    run A (finished 10:19) commits. A cursor on finished_at would pass over A for good;
    ingest reads every finished run it has not marked, so A is read next time."""
    from benchmarks.models import ProbeRun

    b = make_run(
        lease, slot=at("2026-11-10 10:00"), target="sz-03>sz-04", finished=at("2026-11-10 10:20")
    )
    assert ingest.ingest(notify=False).runs == 1
    a = make_run(
        lease,
        slot=at("2026-11-10 10:00"),
        target="sz-01>sz-02",
        verdict="fail",
        measured_bps=40 * 10**9,
        finished=at("2026-11-10 10:19"),
    )
    assert ingest.pending_since() == at("2026-11-10 10:19")  # /readyz sees it waiting
    assert ingest.ingest(notify=False).runs == 1
    assert ingest.pending_since() is None
    rollup = HourlyRollup.objects.get(lease=lease, kind="throughput", hour=at("2026-11-10 10:00"))
    assert (rollup.passed, rollup.failed) == (1, 1)
    read = ProbeRun.objects.filter(pk__in=[a.pk, b.pk]).values_list("ingested_at", flat=True)
    assert None not in set(read)


def in_thread(work, errors: list[BaseException]) -> threading.Thread:
    """``work`` started on a thread of its own (its own connection, closed after); what it
    raises goes to ``errors``, for the test to report."""

    def run() -> None:
        try:
            work()
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def a_session_waits_for_a_lock() -> bool:
    """Whether some session of the test database waits for a lock, within 10 s."""
    with connection.cursor() as cursor:
        for _ in range(100):
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND datname = current_database()"
            )
            if cursor.fetchone()[0]:
                return True
            time.sleep(0.1)
    return False


@pytest.mark.django_db(transaction=True)
def test_an_ingest_and_a_chain_append_of_the_same_run_at_once_both_commit(lease):
    """Two workers at once: ingest has marked a run read (and written rows that name the
    lease) but not committed; the chain appender locks the lease and waits for that run.
    At its commit, ingest's foreign keys take a key-share lock on the lease row: the
    appender's lock must not block it, or the two wait for each other (PostgreSQL calls
    it a deadlock and aborts one: seen in CI between two Celery workers)."""
    require(connection.vendor == "postgresql", "row locks are PostgreSQL's")
    run = make_run(lease, slot=HOUR, measured_bps=98 * 10**9)
    ingest_holds_the_run, appender_waits = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def ingest_then_commit_late() -> None:
        with transaction.atomic():
            assert ingest.ingest(notify=False).runs == 1
            ingest_holds_the_run.set()
            assert appender_waits.wait(10), "the appender never waited for the run"

    def append() -> None:
        assert ingest_holds_the_run.wait(10)
        link_pending(lease_id=lease.pk)

    threads = [in_thread(ingest_then_commit_late, errors), in_thread(append, errors)]
    assert ingest_holds_the_run.wait(10)
    if a_session_waits_for_a_lock():  # the appender, for the run's row lock
        appender_waits.set()
    for thread in threads:
        thread.join(30)
    assert errors == []
    run.refresh_from_db()
    assert run.ingested_at is not None and run.chain_index is not None
    assert HourlyRollup.objects.filter(lease=lease).count() == 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("writer", ["ingest", "chain append"])
def test_a_writer_waiting_for_a_run_holds_no_run_of_a_higher_id(lease, writer):
    """Ingest marks runs read and the chain appender links them, both many at once: each
    locks them in id order, so neither ever holds a run the other needs while it waits
    for one the other holds. Here the second run finished first, the order both read
    them in (ingest recorded each throughput run's bytes in that order, locking the
    second before it waited for the first): while a writer waits for the first run, the
    second stays free."""
    require(connection.vendor == "postgresql", "row locks are PostgreSQL's")
    first = make_run(lease, slot=HOUR, finished=HOUR + timedelta(minutes=9))
    second = make_run(lease, slot=HOUR, target="n2>n1", finished=HOUR + timedelta(minutes=1))
    assert first.pk < second.pk
    table = connection.ops.quote_name(ProbeRun._meta.db_table)
    lock = f"SELECT id FROM {table} WHERE id = %s AND slot_at = %s FOR NO KEY UPDATE"
    holding, release = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def hold_the_first() -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(lock, [first.pk, first.slot_at])
            holding.set()
            assert release.wait(20)

    def write() -> None:
        if writer == "ingest":
            assert ingest.ingest(notify=False).runs == 2
        else:
            assert len(link_pending(lease_id=lease.pk)) == 2

    holder = in_thread(hold_the_first, errors)
    assert holding.wait(10)
    writing = in_thread(write, errors)
    try:
        assert a_session_waits_for_a_lock(), f"the {writer} never waited for the first run"
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(lock.replace("UPDATE", "UPDATE NOWAIT"), [second.pk, second.slot_at])
    finally:
        release.set()
        holder.join(30)
        writing.join(30)
    assert errors == []
    for run in (first, second):
        run.refresh_from_db()
    if writer == "ingest":
        assert first.ingested_at is not None and second.ingested_at is not None
    else:  # linked in the order they finished
        assert second.chain_index + 1 == first.chain_index
