"""The dispatcher: which runs it creates, when, and at what cost."""

import dataclasses
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchmarks import execution, missed_slots, orphans, services
from benchmarks.choices import RunState, Trigger
from benchmarks.models import NodeLock, ProbeRun, SiteAlert
from leases import services as lease_services
from leases.choices import HeavyProbePolicy, LeaseStatus
from tests.factories import NicPortFactory, NodeFactory, SiteFactory, SwitchFactory, at, make_lease

pytestmark = pytest.mark.django_db

NOW = at("2026-11-29 10:02")  # a Sunday in Asia/Shanghai


def active_lease(nodes=2, site=None, **terms):
    leaf = SwitchFactory(fabric__site=site or SiteFactory(code="sz"))
    members = NodeFactory.create_batch(nodes, leaf_switch=leaf)
    for index, node in enumerate(members):
        NicPortFactory(node=node, device="data0", netdev="data0", address=f"198.18.0.{index + 11}")
    lease = make_lease(nodes=members, starts_at=at("2026-11-01 00:00"), **terms)
    lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=NOW)
    return lease


def test_first_cycle_runs_acceptance_and_every_due_slot_once():
    lease = active_lease(technology="ethernet")
    nodes = sorted(lease.assignments.values_list("node__hostname", flat=True))
    first = services.dispatch_due(now=NOW, enqueue=False)
    runs = ProbeRun.objects.filter(lease=lease)
    acceptance = runs.filter(trigger=Trigger.ACCEPTANCE)
    # 2 nodes: one sweep of both for link and for counters, throughput 1 ring pair,
    # latency 1, collective 1.
    assert sorted(acceptance.values_list("kind", "pattern", "target")) == [
        ("collective", "all_nodes", "all"),
        ("counters", "sweep", "all"),
        ("latency", "ring", f"{nodes[0]}>{nodes[1]}"),
        ("link", "sweep", "all"),
        ("throughput", "ring", f"{nodes[0]}>{nodes[1]}"),
    ]
    # A sweep has no node links: it reads the nodes its lease holds when it runs.
    assert not ProbeRun.nodes.through.objects.filter(proberun__pattern="sweep").exists()
    scheduled = runs.filter(trigger=Trigger.SCHEDULE)
    assert scheduled.count() == 5
    # Slots align on the cadence: the 5-minute checks at 10:00, the hourly ones at 10:00,
    # the daily collective at 08:00 Shanghai (00:00 UTC).
    slots = dict(scheduled.values_list("kind", "slot_at").distinct())
    assert slots["link"] == at("2026-11-29 10:00")
    assert slots["throughput"] == at("2026-11-29 10:00")
    assert slots["collective"] == at("2026-11-29 08:00")
    assert first.runs == 10

    again = services.dispatch_due(now=NOW + timedelta(seconds=50), enqueue=False)
    assert again.runs == 0
    later = services.dispatch_due(now=NOW + timedelta(minutes=4), enqueue=False)
    # 10:06 is in the 10:05 slot of the two 5-minute kinds only.
    assert sorted(
        set(ProbeRun.objects.filter(slot_at=at("2026-11-29 10:05")).values_list("kind", flat=True))
    ) == ["counters", "link"]
    assert later.runs == 2


def test_lab_hosts_without_gpus_skip_the_collective_with_a_reason():
    lease = active_lease()
    services.dispatch_due(now=NOW, enqueue=False)
    collective = ProbeRun.objects.filter(lease=lease, kind="collective")
    assert set(collective.values_list("state", flat=True)) == {RunState.SCHEDULED}
    lease.assignments.first().node.__class__.objects.filter(
        pk__in=lease.assignments.values("node")
    ).update(gpu_count=0)
    ProbeRun.objects.all().delete()
    services.dispatch_due(now=NOW, enqueue=False)
    run = ProbeRun.objects.filter(lease=lease, kind="collective").first()
    assert run.state == RunState.SKIPPED
    assert run.error == "no GPUs on these nodes, so no NCCL collective can run"


def test_heavy_probes_outside_the_agreed_windows_are_skipped_not_run():
    # Windows: Sunday 01:00-05:00 Shanghai. At 10:02 heavy probes are skipped; light run.
    lease = active_lease(
        heavy_probe_policy=HeavyProbePolicy.WINDOWS_ONLY,
        heavy_probe_windows=[{"weekday": 6, "start": "01:00", "end": "05:00"}],
    )
    services.dispatch_due(now=NOW, enqueue=False)
    states = dict(
        ProbeRun.objects.filter(lease=lease, trigger=Trigger.SCHEDULE).values_list("kind", "state")
    )
    assert states["throughput"] == RunState.SKIPPED
    assert states["link"] == RunState.SCHEDULED
    inside = services.dispatch_due(now=at("2026-11-29 03:30") + timedelta(days=7), enqueue=False)
    assert inside.skipped == 0


def test_a_slot_nobody_ran_becomes_missed():
    active_lease()
    services.dispatch_due(now=NOW, enqueue=False)
    result = services.dispatch_due(now=NOW + timedelta(minutes=10), enqueue=False)
    missed = ProbeRun.objects.filter(state=RunState.MISSED)
    assert result.missed == missed.count() > 0
    assert set(missed.values_list("kind", flat=True)) == {"link", "counters"}
    assert missed.first().error == "its slot passed before any worker started it"


def test_dispatcher_queries_do_not_grow_with_leases():
    def cycle_queries(now):
        with CaptureQueriesContext(connection) as captured:
            services.dispatch_due(now=now, enqueue=False)
        return len(captured)

    site = SiteFactory(code="q")
    for _ in range(2):
        active_lease(site=site)
    few = cycle_queries(NOW)
    for _ in range(8):
        active_lease(site=site)
    # The workers ran the first cycle's runs, so none is missed here: marking missed runs
    # adds an UPDATE per 5,000 of them and one upsert of the sites' counts.
    ProbeRun.objects.filter(state="scheduled").update(state="ok", finished_at=NOW)
    many = cycle_queries(NOW + timedelta(minutes=5))
    assert many == few


def test_redelivered_batch_runs_nothing_twice():
    lease = active_lease()
    services.dispatch_due(now=NOW, enqueue=False)
    run = ProbeRun.objects.filter(lease=lease, kind="link", trigger=Trigger.SCHEDULE).first()
    claimed = execution._claim(run.batch, NOW)
    assert [r.pk for r in claimed] == [run.pk]
    # The same message delivered again while the first worker still has it: nothing is run
    # twice; the second copy is told when to look again (once the first must be over).
    with pytest.raises(execution.StillRunning) as still:
        execution._claim(run.batch, NOW + timedelta(seconds=30))
    assert still.value.seconds == (orphans.stale_claim_after() - timedelta(seconds=30)).seconds + 1
    # Long after the task's hard time limit the first worker must be dead: take it over.
    later = NOW + orphans.stale_claim_after() + timedelta(seconds=1)
    ProbeRun.objects.filter(pk=run.pk).update(deadline_at=later + timedelta(minutes=5))
    retaken = execution._claim(run.batch, later)
    assert [r.attempts for r in retaken] == [2]


def test_two_heavy_batches_never_share_a_node():
    lease = active_lease()
    first, second = (
        services.request_runs(lease=lease, kinds=["throughput"], now=NOW, enqueue=False)[0],
        services.request_runs(
            lease=lease, kinds=["throughput"], now=NOW + timedelta(seconds=1), enqueue=False
        )[0],
    )
    nodes = list(lease.assignments.values_list("node_id", flat=True))
    execution._lock_nodes(first, nodes, NOW)
    with pytest.raises(execution.NodesBusy):
        execution._lock_nodes(second, nodes, NOW)
    assert set(NodeLock.objects.values_list("batch", flat=True)) == {first}
    # A lock left by a dead worker expires and is taken over.
    execution._lock_nodes(second, nodes, NOW + orphans.stale_claim_after() + timedelta(seconds=1))
    assert set(NodeLock.objects.values_list("batch", flat=True)) == {second}


def test_self_check_raises_when_a_site_goes_quiet_and_clears_when_results_return(
    mailoutbox, settings
):
    settings.PROBE_QUEUE_TEMPLATE = "probes.{site}"
    settings.ADMINS = [("ops", "ops@example.cn")]
    lease = active_lease()
    services.dispatch_due(now=NOW, enqueue=False)
    quiet = NOW + timedelta(minutes=20)
    (alert,) = missed_slots.check_results_arriving(now=quiet)
    assert alert.site.code == "sz"
    assert "is the worker for queue probes.sz running?" in alert.message
    assert [mail.subject for mail in mailoutbox] == [
        "[Django] gpulease: probe results stopped at sz"
    ]
    assert missed_slots.check_results_arriving(now=quiet + timedelta(minutes=1)) == []
    assert SiteAlert.objects.filter(cleared_at__isnull=True).count() == 1
    ProbeRun.objects.filter(lease=lease).update(
        started_at=quiet, finished_at=quiet, state=RunState.OK
    )
    missed_slots.check_results_arriving(now=quiet + timedelta(minutes=2))
    assert SiteAlert.objects.get().cleared_at == quiet + timedelta(minutes=2)


def test_operators_can_ask_for_a_run_now_from_the_admin(client, django_capture_on_commit_callbacks):
    from tests.factories import StaffFactory

    lease = active_lease()
    client.force_login(StaffFactory())
    url = "/admin/leases/lease/"
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(
            url,
            {"action": "run_probes_now", "_selected_action": [lease.pk]},
            follow=True,
            HTTP_ACCEPT_LANGUAGE="en",
        )
    assert "probe batches queued" in response.content.decode()
    manual = ProbeRun.objects.filter(lease=lease, trigger=Trigger.MANUAL)
    assert set(manual.values_list("kind", flat=True)) == {
        "link",
        "counters",
        "throughput",
        "latency",
        "collective",
    }
    # One Celery message per batch, sent only after the runs are committed.
    assert len(callbacks) == manual.values("batch").distinct().count()


def test_node_level_runs_made_in_sql_are_those_the_orm_would_make():
    """The set-based insert (PostgreSQL) and the ORM path (SQLite) make the same runs:
    one sweep of every node held per kind, ibstatus where a node has an InfiniBand port,
    ethtool otherwise, each in its own batch, on its first node's site, no node links;
    a lease holding no node gets none."""
    from benchmarks import node_runs

    lease = active_lease(nodes=3, technology="ethernet")
    infiniband = lease.assignments.order_by("node__hostname").first().node
    ethernet = active_lease(nodes=2, site=SiteFactory(code="gz"), technology="ethernet")
    empty = active_lease(nodes=1, site=SiteFactory(code="dg"))
    empty.assignments.update(assigned_until=NOW - timedelta(hours=1))
    infiniband.nic_ports.update(link_layer="infiniband")
    due = [
        node_runs.Due(
            item.pk, kind, NOW, NOW + timedelta(minutes=5), Trigger.SCHEDULE, item.terms.get().pk
        )
        for item in (lease, ethernet, empty)
        for kind in ("link", "counters")
    ]

    def made(create):  # type: ignore[no-untyped-def]
        batches = create(due, NOW)
        runs = ProbeRun.objects.filter(batch__in=[batch for batch, _ in batches])
        found = sorted(
            (
                run.lease_id,
                run.kind,
                run.tool,
                run.target,
                run.pattern,
                run.state,
                run.site_id,
                run.nodes.count(),
            )
            for run in runs
        )
        assert len({batch for batch, _ in batches}) == len(batches) == 4
        runs.delete()
        return found

    in_sql = made(node_runs._create_in_sql) if connection.vendor == "postgresql" else None
    with_orm = made(node_runs._create_with_orm)
    assert in_sql is None or in_sql == with_orm
    site = infiniband.leaf_switch.fabric.site_id
    other = ethernet.assignments.first().node.leaf_switch.fabric.site_id
    assert with_orm == sorted(
        [
            (lease.pk, "counters", "counters", "all", "sweep", "scheduled", site, 0),
            (lease.pk, "link", "ibstatus", "all", "sweep", "scheduled", site, 0),
            (ethernet.pk, "counters", "counters", "all", "sweep", "scheduled", other, 0),
            (ethernet.pk, "link", "ethtool", "all", "sweep", "scheduled", other, 0),
        ]
    )


def test_closing_readings_cost_no_query_per_lease():
    # Leases ending at 10:05 are read once more by the first cycle after it (their closing
    # reading), in the same queries as the live leases' sweeps, however many end.
    def cycle_queries(now):  # type: ignore[no-untyped-def]
        with CaptureQueriesContext(connection) as captured:
            result = services.dispatch_due(now=now, enqueue=False)
        return len(captured), result

    site = SiteFactory(code="q")
    live = [active_lease(site=site) for _ in range(2)]
    ending = [active_lease(site=site) for _ in range(2)]
    services.dispatch_due(now=NOW, enqueue=False)
    few, _result = cycle_queries(NOW + timedelta(minutes=5))
    end = at("2026-11-29 10:10")
    for lease in ending + [active_lease(site=site) for _ in range(8)]:
        lease.ends_at = end
        lease.save(update_fields=["ends_at"])
        lease.assignments.update(assigned_until=end)
    services.dispatch_due(now=end - timedelta(seconds=30), enqueue=False)
    many, result = cycle_queries(end + timedelta(seconds=30))
    assert many == few
    closing = ProbeRun.objects.filter(slot_at=end, kind="counters")
    # 10 closing readings, and the live leases' 10:10 link and counters sweeps.
    assert closing.count() == 12 and result.runs == 14
    assert set(closing.values_list("deadline_at", flat=True)) == {end + timedelta(minutes=5)}
    assert {run.lease_id for run in closing} >= {lease.pk for lease in live}


def test_a_closing_reading_is_made_of_the_nodes_held_in_the_last_instant_in_sql_and_orm():
    """Due.held_at: the node-level insert reads the assignments in force then, not now
    (the lease's nodes were released at its end), in SQL as through the ORM."""
    from benchmarks import node_runs

    lease = active_lease(nodes=2, technology="ethernet")
    end = NOW - timedelta(minutes=1)
    lease.assignments.update(assigned_until=end)
    last = end - timedelta(microseconds=1)
    due = [
        node_runs.Due(
            lease.pk,
            "counters",
            end,
            end + timedelta(minutes=5),
            Trigger.SCHEDULE,
            lease.terms.get().pk,
            held_at=last,
        )
    ]

    def made(create):  # type: ignore[no-untyped-def]
        batches = create(due, NOW)
        found = list(
            ProbeRun.objects.filter(batch__in=[b for b, _ in batches]).values_list(
                "lease_id", "kind", "slot_at", "site_id"
            )
        )
        ProbeRun.objects.filter(batch__in=[b for b, _ in batches]).delete()
        return found

    site = lease.assignments.first().node.leaf_switch.fabric.site_id
    expected = [(lease.pk, "counters", end, site)]
    assert made(node_runs._create_with_orm) == expected
    if connection.vendor == "postgresql":
        assert made(node_runs._create_in_sql) == expected
    # Read at now, the lease holds nothing: no run.
    assert node_runs.create([dataclasses.replace(due[0], held_at=None)], now=NOW) == []
