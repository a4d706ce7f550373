"""POST /leases/{id}/run-now/ as a tenant would hammer it: while the lease's on-demand runs
are pending, every request gets those runs back; once they are over, a new request within
RUN_NOW_COOLDOWN_S is a 429 with Retry-After. Provider staff skip the cooldown only."""

from datetime import timedelta

import pytest
import time_machine

from accounts.choices import Role
from benchmarks.choices import RunState, Trigger
from benchmarks.models import ProbeRun
from tests.factories import at

pytestmark = pytest.mark.django_db

T0 = at("2026-11-29 10:02")


def run_now(client, lease, when, **body):
    with time_machine.travel(when, tick=False):
        return client.post(f"/api/v1/leases/{lease.pk}/run-now/", body, format="json")


def on_demand(lease):
    return ProbeRun.objects.filter(lease=lease).exclude(trigger=Trigger.SCHEDULE)


def workers_finish(batches, when):
    ProbeRun.objects.filter(batch__in=batches).exclude(state=RunState.SKIPPED).update(
        state=RunState.OK, finished_at=when
    )


def test_twenty_calls_in_a_few_seconds_queue_the_runs_once(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])
    lease = world.alpha.lease
    answers = [run_now(admin, lease, T0 + timedelta(seconds=0.17 * i)) for i in range(20)]
    first, rest = answers[0].json(), [answer.json() for answer in answers[1:]]
    assert [answer.status_code for answer in answers] == [202] * 20
    assert first["already_pending"] is False
    # ALPHA-1: 2 nodes on RoCE without data addresses: a link sweep and a counters sweep of
    # both, collective 1, and throughput 2 (iperf3, ib_write_bw) + latency 1, recorded
    # skipped with a reason.
    assert first["runs"] == 6
    assert all(body["already_pending"] is True for body in rest)
    assert all(body["batches"] == first["batches"] for body in rest)
    assert all(body["runs"] == 6 for body in rest)
    assert on_demand(lease).count() == 6
    assert set(on_demand(lease).values_list("trigger", flat=True)) == {Trigger.TENANT}


def test_after_the_runs_finish_a_request_within_the_cooldown_is_a_429_with_retry_after(
    world, client_for, settings
):
    settings.RUN_NOW_COOLDOWN_S = 300
    admin = client_for(world.alpha.members[Role.ADMIN])
    lease = world.alpha.lease
    first = run_now(admin, lease, T0, kinds=["link"]).json()
    workers_finish(first["batches"], T0 + timedelta(seconds=40))

    # 100.5 s after the request, 60.5 s after the runs finished: 239.5 s left, rounded up.
    refused = run_now(admin, lease, T0 + timedelta(seconds=100.5), kinds=["link"])
    assert refused.status_code == 429
    assert refused["Retry-After"] == "240"
    error = refused.json()["error"]
    assert error["code"] == "throttled" and error["fields"] == {}
    assert "ALPHA-1" in error["message"] and "240 s" in error["message"]
    assert on_demand(lease).count() == 1  # one link sweep of the lease's two nodes

    # Waiting exactly as long as Retry-After said is enough.
    again = run_now(admin, lease, T0 + timedelta(seconds=340.5), kinds=["link"])
    assert again.status_code == 202
    assert again.json()["already_pending"] is False
    assert set(again.json()["batches"]).isdisjoint(first["batches"])
    assert on_demand(lease).count() == 2


def test_the_cooldown_is_per_lease(world, client_for, settings):
    settings.RUN_NOW_COOLDOWN_S = 300
    alpha = client_for(world.alpha.members[Role.ADMIN])
    first = run_now(alpha, world.alpha.lease, T0, kinds=["link"]).json()
    workers_finish(first["batches"], T0 + timedelta(seconds=40))
    beta = client_for(world.beta.members[Role.ADMIN])
    assert (
        run_now(beta, world.beta.lease, T0 + timedelta(seconds=60), kinds=["link"]).status_code
        == 202
    )
    assert (
        run_now(alpha, world.alpha.lease, T0 + timedelta(seconds=60), kinds=["link"]).status_code
        == 429
    )


def test_provider_staff_skip_the_cooldown_but_still_get_pending_runs_back(
    world, client_for, settings
):
    settings.RUN_NOW_COOLDOWN_S = 300
    tenant = client_for(world.alpha.members[Role.ADMIN])
    staff = client_for(world.staff)
    lease = world.alpha.lease
    first = run_now(tenant, lease, T0, kinds=["link"]).json()
    workers_finish(first["batches"], T0 + timedelta(seconds=40))
    assert run_now(tenant, lease, T0 + timedelta(seconds=60), kinds=["link"]).status_code == 429

    ops = run_now(staff, lease, T0 + timedelta(seconds=60), kinds=["link"])
    assert ops.status_code == 202 and ops.json()["already_pending"] is False
    assert set(
        ProbeRun.objects.filter(batch__in=ops.json()["batches"]).values_list("trigger", flat=True)
    ) == {Trigger.MANUAL}
    # The provider's runs are pending now: the tenant gets them back, not new ones.
    pending = run_now(tenant, lease, T0 + timedelta(seconds=61), kinds=["link"])
    assert pending.status_code == 202
    assert pending.json()["already_pending"] is True
    assert pending.json()["batches"] == ops.json()["batches"]
    assert on_demand(lease).count() == 2


def test_runs_past_their_deadline_no_longer_count_as_pending(world, client_for, settings):
    """A worker that never came must not block run-now forever: past its one-hour deadline
    an on-demand run can only become missed, so it is no longer pending."""
    settings.RUN_NOW_COOLDOWN_S = 300
    admin = client_for(world.alpha.members[Role.ADMIN])
    lease = world.alpha.lease
    first = run_now(admin, lease, T0, kinds=["link"]).json()
    later = run_now(admin, lease, T0 + timedelta(hours=1, seconds=1), kinds=["link"])
    assert later.status_code == 202 and later.json()["already_pending"] is False
    assert set(later.json()["batches"]).isdisjoint(first["batches"])
