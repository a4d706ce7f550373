"""Run-now a tenant cannot abuse: one set of on-demand runs per lease at a time, even when
two requests arrive at once; and a scheduled slot that could not run because the tenant's
own run-now probes held its nodes is excluded from the SLA, not missed against the
provider."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection

from benchmarks import execution, services
from benchmarks.choices import RunState, Trigger, Verdict
from benchmarks.models import NodeLock, ProbeRun
from billing.ingest import ingest_all
from billing.reports import sla_report
from leases import services as lease_services
from leases.choices import LeaseStatus
from tests.factories import NicPortFactory, NodeFactory, SiteFactory, SwitchFactory, at, make_lease

pytestmark = pytest.mark.django_db

NOW = at("2026-11-29 10:02")  # Shanghai; the hourly throughput slot is 10:00-11:00


def throughput_lease():
    """Two nodes on one leaf, plain Ethernet: one throughput run (iperf3 n1>n2) per hour."""
    leaf = SwitchFactory(fabric__site=SiteFactory(code="sz"))
    nodes = NodeFactory.create_batch(2, leaf_switch=leaf)
    for index, node in enumerate(nodes):
        NicPortFactory(node=node, device="data0", netdev="data0", address=f"198.18.0.{index + 11}")
    lease = make_lease(
        nodes=nodes,
        starts_at=at("2026-11-01 00:00"),
        technology="ethernet",
        probe_cadence_s={"throughput": 3600},
    )
    lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=NOW)
    return lease


def scheduled(lease, slot):
    return ProbeRun.objects.get(lease=lease, trigger=Trigger.SCHEDULE, slot_at=slot)


def take(batch, now):
    """What a worker does first with a heavy batch: claim its runs, hold their nodes."""
    runs = execution._claim(batch, now)
    execution._lock_nodes(
        batch, sorted(n for r in runs for n in r.nodes.values_list("pk", flat=True)), now
    )


def finish(batch, now):
    """The worker is done: results recorded, nodes let go (execute_batch's finally)."""
    ProbeRun.objects.filter(batch=batch).update(state=RunState.OK, finished_at=now)
    NodeLock.objects.filter(batch=batch).delete()


def never_connect(node):
    raise AssertionError(f"no probe may reach {node} while its nodes are held")


def test_a_slot_the_tenants_run_now_crowded_out_is_excluded_and_not_counted_against_the_provider():
    lease = throughput_lease()
    services.dispatch_due(now=NOW, enqueue=False)
    first_slot = scheduled(lease, at("2026-11-29 10:00"))

    # The tenant asks for a throughput run now; a worker starts it and holds both nodes
    # (a long test: it is still running when the 10:00 slot ends at 11:00).
    asked = services.run_now(
        lease=lease, kinds=["throughput"], tenant_request=True, now=NOW, enqueue=False
    )
    take(asked.batches[0], NOW + timedelta(seconds=10))
    # The scheduled batch finds its nodes held and goes back to wait; it never gets them.
    with pytest.raises(execution.NodesBusy):
        execution.execute_batch(
            first_slot.batch, now=NOW + timedelta(minutes=1), connect=never_connect
        )
    services.dispatch_due(now=at("2026-11-29 11:01"), enqueue=False)
    first_slot.refresh_from_db()
    assert first_slot.state == RunState.SKIPPED
    assert first_slot.error.startswith("busy with tenant-requested runs")
    finish(asked.batches[0], at("2026-11-29 11:20"))

    # The 11:00 slot runs and passes.
    ProbeRun.objects.filter(pk=scheduled(lease, at("2026-11-29 11:00")).pk).update(
        state=RunState.OK,
        verdict=Verdict.PASS,
        measured_bps=97 * 10**9,
        started_at=at("2026-11-29 11:21"),
        finished_at=at("2026-11-29 11:22"),
    )
    # The 12:00 slot is missed with nothing of the tenant's on its nodes: the provider's miss.
    services.dispatch_due(now=at("2026-11-29 12:01"), enqueue=False)
    services.dispatch_due(now=at("2026-11-29 13:01"), enqueue=False)
    assert scheduled(lease, at("2026-11-29 12:00")).state == RunState.MISSED

    ingest_all(notify=False)
    throughput = sla_report(lease=lease, period="2026-11")["throughput"]
    # passed 1 (11:00), unknown 1 (12:00), excluded 1 (10:00): 1 / (1 + 0 + 1) = 50 %.
    # Were the 10:00 slot missed, it would be 1 / 3 = 33.333 %.
    assert (throughput["passed"], throughput["failed"], throughput["unknown"]) == (1, 0, 1)
    assert throughput["excluded"] == 1
    assert throughput["compliance_percent"] == "50.000"


@pytest.mark.parametrize(
    ("tenant_request", "state", "error"),
    [
        (True, RunState.SKIPPED, "busy with tenant-requested runs"),
        # The provider's own run-now is the provider's choice: its miss still counts.
        (False, RunState.MISSED, "its deadline passed before it could run"),
    ],
)
def test_a_slot_claimed_too_late_behind_run_now_probes_is_excused_only_for_the_tenants(
    tenant_request, state, error
):
    lease = throughput_lease()
    services.dispatch_due(now=NOW, enqueue=False)
    slot = scheduled(lease, at("2026-11-29 10:00"))
    asked = services.run_now(
        lease=lease, kinds=["throughput"], tenant_request=tenant_request, now=NOW, enqueue=False
    )
    take(asked.batches[0], NOW + timedelta(seconds=10))
    finish(asked.batches[0], at("2026-11-29 11:00:30"))
    # The worker reaches the scheduled batch only after its deadline.
    assert (
        execution.execute_batch(slot.batch, now=at("2026-11-29 11:01"), connect=never_connect) == []
    )
    slot.refresh_from_db()
    assert slot.state == state
    assert slot.error.startswith(error)


def test_tenant_runs_that_ended_before_the_slot_began_excuse_nothing():
    lease = throughput_lease()
    asked = services.run_now(
        lease=lease,
        kinds=["throughput"],
        tenant_request=True,
        now=at("2026-11-29 09:30"),
        enqueue=False,
    )
    take(asked.batches[0], at("2026-11-29 09:30:10"))
    finish(asked.batches[0], at("2026-11-29 09:59"))
    services.dispatch_due(now=NOW, enqueue=False)
    services.dispatch_due(now=at("2026-11-29 11:01"), enqueue=False)
    assert scheduled(lease, at("2026-11-29 10:00")).state == RunState.MISSED


def test_a_second_request_while_runs_are_pending_gets_the_same_runs_back():
    lease = throughput_lease()
    first = services.run_now(lease=lease, tenant_request=True, now=NOW, enqueue=False)
    again = services.run_now(
        lease=lease,
        kinds=["throughput"],
        tenant_request=True,
        now=NOW + timedelta(seconds=1),
        enqueue=False,
    )
    assert not first.already_pending and again.already_pending
    assert again.batches == first.batches and again.runs == first.runs
    # 2 nodes on Ethernet: a link sweep and a counters sweep of both, throughput 1
    # (iperf3), latency 1 (ping), collective 1.
    assert first.runs == 5
    assert ProbeRun.objects.filter(lease=lease).exclude(trigger=Trigger.SCHEDULE).count() == 5


@pytest.mark.django_db(transaction=True)
def test_two_requests_at_the_same_instant_queue_one_set_of_runs(monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("the race is proved on PostgreSQL; SQLite's test database is in memory")
    lease = throughput_lease()
    create = services.request_runs

    def slow_create(**kwargs):
        # Widen the window between "nothing pending" and "runs created": without the lock
        # on the lease row both requests would pass the check inside it.
        time.sleep(0.5)
        return create(**kwargs)

    monkeypatch.setattr(services, "request_runs", slow_create)
    start = threading.Barrier(2)
    answers, errors = [], []

    def ask():
        try:
            start.wait()
            answers.append(
                services.run_now(
                    lease=lease, kinds=["throughput"], tenant_request=True, enqueue=False
                )
            )
        except Exception as error:  # reported below, in the test thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert sorted(answer.already_pending for answer in answers) == [False, True]
    assert answers[0].batches == answers[1].batches
    assert ProbeRun.objects.filter(lease=lease, trigger=Trigger.TENANT).count() == 1


def test_the_admin_portals_run_now_gets_pending_runs_back_too(client):
    from tests.factories import StaffFactory

    lease = throughput_lease()
    client.force_login(StaffFactory())
    action = {"action": "run_probes_now", "_selected_action": [lease.pk]}
    client.post("/admin/leases/lease/", action, HTTP_ACCEPT_LANGUAGE="en")
    again = client.post("/admin/leases/lease/", action, follow=True, HTTP_ACCEPT_LANGUAGE="en")
    assert "its earlier run-now runs are still pending; nothing new queued" in (
        again.content.decode()
    )
    assert ProbeRun.objects.filter(lease=lease, trigger=Trigger.MANUAL).count() == 5
