"""The switch-side witness off the probe's critical path (issue 34, item 3), on the real lab
with its real snmpd: a throughput batch frees its nodes when its client ends; the switch's
settled reading is taken later and joins the runs before they are judged and recorded.

The lab: 4 hosts of 1 Gbit on 2 leaves (lab-h1, lab-h2 on leaf1), lease LAB-1, 3-second
iperf3 runs, WITNESS_SETTLE_S 4 s."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from benchmarks import execution, services, witness_settle
from benchmarks.choices import RunState
from benchmarks.models import NodeLock, PendingWitness, ProbeRun
from billing.ingest import pending_runs

# waits: mostly waits on real time; make test runs it in the waiting lane (scripts/test_shards.py).
pytestmark = [pytest.mark.lab, pytest.mark.waits]


def batch_of(lease, target: str, pattern: str = "ring"):  # type: ignore[no-untyped-def]
    """The batch of a manual throughput request holding ``target``; the others dropped."""
    chosen = None
    for batch in services.request_runs(lease=lease, kinds=["throughput"], enqueue=False):
        if ProbeRun.objects.filter(batch=batch, target=target, pattern=pattern).exists():
            chosen = batch
        else:
            ProbeRun.objects.filter(batch=batch).delete()
    assert chosen is not None
    return chosen


def held() -> set[str]:
    return set(NodeLock.objects.values_list("node__hostname", flat=True))


@pytest.mark.django_db(transaction=True)
def test_the_nodes_are_free_when_the_client_ends_and_the_run_is_judged_once_the_switch_settled(
    lab, lab_lease
):
    batch = batch_of(lab_lease, "lab-h1>lab-h2")
    (returned,) = execution.execute_batch(batch, max_attempts=1)
    run = ProbeRun.objects.get(pk=returned.pk)
    # iperf3 has ended and printed; the run is not judged, linked or ingestable yet.
    assert run.state == RunState.RUNNING and run.finished_at is None
    assert run.chain_index is None and run.verdict == "none"
    assert '"sum_received"' in run.raw_output
    assert not pending_runs().filter(pk=run.pk).exists()
    pending = PendingWitness.objects.get(batch=batch)
    assert timezone.now() < pending.due_at <= timezone.now() + timedelta(seconds=4)
    # The server is free at once; the client's port stays fenced for the reading.
    assert held() == {"lab-h1"}
    assert execution.execute_batch(batch, max_attempts=1) == []  # a redelivery runs nothing

    # Another heavy probe sending from lab-h2 runs now, while the first waits for its
    # reading; one sending from the fenced lab-h1 waits.
    from_h2 = batch_of(lab_lease, "lab-h2>lab-h3")
    (second,) = execution.execute_batch(from_h2, max_attempts=1)
    from_h1 = batch_of(lab_lease, "lab-h1>lab-h3", "cross_leaf")
    with pytest.raises(execution.NodesBusy):
        execution.execute_batch(from_h1, max_attempts=1)

    settled = witness_settle.settle_in_foreground(batch)
    assert [r.pk for r in settled] == [run.pk]
    run.refresh_from_db()
    assert run.state == RunState.OK and run.verdict in ("pass", "fail")
    block = run.parsed["witness"]
    assert block["port"] == "h1-data" and block["agrees"] is True
    assert run.chain_index is not None
    assert pending_runs().filter(pk=run.pk).exists()
    assert "lab-h1" not in held()
    assert witness_settle.settle(batch) == []  # a second delivery of the settle: nothing
    witness_settle.settle_in_foreground(from_h2)
    second.refresh_from_db()
    assert second.state == RunState.OK and second.parsed["witness"]["port"] == "h2-data"
    assert held() == set()


@pytest.mark.django_db(transaction=True)
def test_a_lost_settle_is_taken_by_the_dispatcher_and_one_too_late_drops_the_witness(
    lab, lab_lease
):
    batch = batch_of(lab_lease, "lab-h3>lab-h4")
    execution.execute_batch(batch, max_attempts=1)
    # Its settle task was lost (a broker or worker died): the dispatcher's next cycle past
    # the due time takes it, while the port is still fenced, so the reading is trusted.
    due = PendingWitness.objects.get(batch=batch).due_at
    time.sleep(max(0.0, (due - timezone.now()).total_seconds()))  # the switch settles
    cycle = services.dispatch_due(
        now=due + witness_settle.OVERDUE + timedelta(seconds=1), enqueue=False
    )
    assert cycle.settled == 1
    run = ProbeRun.objects.get(batch=batch)
    assert run.state == RunState.OK and run.parsed["witness"]["agrees"] is True
    assert held() == set()

    # A settle after the fence expired (another probe may have sent from the port since)
    # records the run without a witness rather than with a reading it cannot trust.
    late = batch_of(lab_lease, "lab-h4>lab-h1")
    execution.execute_batch(late, max_attempts=1)
    due = PendingWitness.objects.get(batch=late).due_at
    witness_settle.settle(late, now=witness_settle.fence_until(due) + timedelta(seconds=1))
    run = ProbeRun.objects.get(batch=late)
    assert run.state == RunState.OK and "witness" not in run.parsed
    assert run.verdict in ("pass", "fail") and run.chain_index is not None
