"""The edges and gaps of metering (issue 34, item 4), through the real path: the
dispatcher's cycles (``dispatch_due``), a worker running each counters sweep
(``execute_batch``; each node prints the kernel's netdev statistics, the real capture
counters/netdev_sysfs_virtio_capture.txt, with its data0 at the figure the test gives),
ingest, the invoice and the audit bundle the standalone verifier checks.

- A lease is read at its end instant (its closing reading), so the last interval of a
  lease, and of a month when the lease ends at the month's end, is metered: per GB and
  95计费.
- A lease that starts mid-slot is read at its start instant.
- Readings days apart bill the counters' difference by time and open one metering-gap
  incident, which issuing reports.

Shanghai midnight is 16:00 UTC; every figure is worked out in the comments."""

from datetime import datetime, timedelta
from decimal import Decimal as D
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from benchmarks import execution
from benchmarks import services as probe_services
from benchmarks.models import ProbeRun
from benchmarks.transports.base import CommandResult, HostUnreachable
from billing import audit, services
from billing.choices import InvoiceStatus, LineKind
from billing.ingest import ingest_all, recompute_traffic
from billing.models import Invoice, TrafficSample
from incidents.choices import MeteringIncidentKind
from incidents.models import Incident
from leases import services as lease_services
from leases.choices import BillingMode, LeaseStatus
from tests.billing.test_sweeps import counters
from tests.factories import NicPortFactory, NodeFactory, StaffFactory, TenantFactory, at, make_lease

pytestmark = pytest.mark.django_db

GB = 10**9
SECOND = timedelta(seconds=1)


@pytest.fixture(autouse=True)
def _key(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.AUDIT_SIGNING_KEY = str(tmp_path / "audit.pem")


class Printing:
    """A node that prints what it is told to: its counters, or that it cannot be reached."""

    label = "printing"

    def __init__(self, text: str | Exception) -> None:
        self.text = text

    async def run(self, command, *, timeout_s, max_output_bytes=0):  # type: ignore[no-untyped-def]
        if isinstance(self.text, Exception):
            raise self.text
        return CommandResult(command, 0, self.text, "", 0.01, False)

    async def close(self) -> None:
        return None


def lease_of(starts: str, ends: str | None = None, **terms):  # type: ignore[no-untyped-def]
    """An active lease of n1 (one 100 Gbit/s Ethernet port, data0), its counters read every
    5 minutes (no other probe, so that only the readings are run)."""
    node = NodeFactory(hostname="n1")
    NicPortFactory(node=node, device="data0", netdev="data0", rate_gbps=100)
    lease = make_lease(
        tenant=TenantFactory(slug="zhiyuan"),
        nodes=[node],
        starts_at=at(starts),
        ends_at=at(ends) if ends else None,
        probe_cadence_s={"counters": 300},
        **terms,
    )
    return lease_services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at(starts))


def cycle(now: datetime, sent: int | None) -> list[ProbeRun]:
    """One dispatcher cycle at ``now``, then a worker running the counters sweeps it made
    5 s later, n1 printing that data0 has sent ``sent`` bytes (None: n1 unreachable).
    Returns the sweeps run."""
    made = probe_services.dispatch_due(now=now, enqueue=False)
    text = counters(sent) if sent is not None else HostUnreachable("n1: no route to host")
    ran = []
    for batch in made.batch_ids:
        if ProbeRun.objects.filter(batch=batch, kind="counters", trigger="schedule").exists():
            ran += execution.execute_batch(
                batch, now=now + 5 * SECOND, connect=lambda node: Printing(text), max_attempts=1
            )
    return ran


def run_cycles(first: str, sent: list[int | None], *, offset: timedelta = 30 * SECOND) -> None:
    """Cycles every 5 minutes from ``first`` (Shanghai) plus ``offset``, one per figure."""
    for index, figure in enumerate(sent):
        cycle(at(first) + timedelta(minutes=5 * index) + offset, figure)


def samples(lease) -> list[tuple[datetime, int, int]]:  # type: ignore[no-untyped-def]
    return [
        (slot_at, seconds, int(tx))
        for slot_at, seconds, tx in TrafficSample.objects.filter(lease=lease)
        .order_by("slot_at")
        .values_list("slot_at", "seconds", "tx_bytes")
    ]


def usage_line(lease, period: str, kind: str):  # type: ignore[no-untyped-def]
    with time_machine.travel(at("2026-12-04 09:00"), tick=False):
        invoice = services.draft_invoice(tenant=lease.tenant, period=period)
    return invoice.lines.get(kind=kind)


# --- the end of a lease ---------------------------------------------------------------------


def test_a_per_gb_lease_ending_at_the_months_end_bills_its_last_interval_in_that_month():
    # Readings at 23:40, 23:45, 23:50, 23:55 on 30 November (0, 10, 20, 30 GB), then the
    # closing reading at the end, 1 December 00:00 (70 GB), made by the cycle at 00:00:30:
    # the last interval [23:55, 24:00) holds 40 GB and is November's last sample.
    # November: 70 GB x ¥0.50 = ¥35.00 (without the closing reading, 30 GB: ¥15.00).
    lease = lease_of(
        "2026-11-30 23:40",
        "2026-12-01 00:00",
        billing_mode=BillingMode.PER_GB,
        price_per_gb=D("0.5000"),
    )
    run_cycles("2026-11-30 23:40", [0, 10 * GB, 20 * GB, 30 * GB, 70 * GB])
    ingest_all(notify=False)
    line = usage_line(lease, "2026-11", LineKind.USAGE_GB)
    assert (line.quantity, line.amount) == (D("70.000"), D("35.00"))
    closing = ProbeRun.objects.get(lease=lease, kind="counters", slot_at=at("2026-12-01 00:00"))
    assert (closing.trigger, closing.state, closing.deadline_at) == (
        "schedule",
        "ok",
        at("2026-12-01 00:05"),
    )
    # Read a few seconds after the end, of the node the lease held in its last instant.
    assert closing.hostnames() == ["n1"]
    assert samples(lease) == [
        (at("2026-11-30 23:40"), 300, 10 * GB),
        (at("2026-11-30 23:45"), 300, 10 * GB),
        (at("2026-11-30 23:50"), 300, 10 * GB),
        (at("2026-11-30 23:55"), 300, 40 * GB),
    ]
    # Made once: the next cycles make nothing more for the ended lease.
    assert cycle(at("2026-12-01 00:01:30"), 99 * GB) == []
    assert ProbeRun.objects.filter(lease=lease, slot_at__gte=at("2026-12-01 00:00")).count() == 1


def test_a_95th_percentile_lease_ending_at_the_months_end_bills_the_burst_of_its_last_interval():
    # 21 intervals from 22:15 to 24:00 on 30 November: 3 GB each (80 Mbps), but 300 GB
    # (8,000 Mbps) in [23:00, 23:05) and in the last one, [23:55, 24:00), which only the
    # closing reading at 00:00 measures. 21 samples drop floor(21 x 5 / 100) = 1: the
    # second highest, 8,000 Mbps, is billed. Without the last interval 20 samples drop 1
    # too, and the base, 80 Mbps, is billed.
    # ¥36 per Mbps x 8,000 Mbps x 6,300 s / 2,592,000 s (30 days) = ¥700.00 (80 Mbps: ¥7.00).
    lease = lease_of(
        "2026-11-30 22:15",
        "2026-12-01 00:00",
        billing_mode=BillingMode.P95,
        price_per_mbps_p95=D("36.00"),
    )
    sent, total = [0], 0
    for slot in range(21):
        total += 300 * GB if slot in (9, 20) else 3 * GB  # 22:15 + 9 x 5 min = 23:00
        sent.append(total)
    run_cycles("2026-11-30 22:15", sent)
    ingest_all(notify=False)
    line = usage_line(lease, "2026-11", LineKind.USAGE_P95)
    assert (line.quantity, line.amount) == (D("8000.00"), D("700.00"))
    assert line.detail["samples"] == 21 and line.detail["dropped_samples"] == 1
    found = samples(lease)
    assert found[9] == (at("2026-11-30 23:00"), 300, 300 * GB)
    assert found[-1] == (at("2026-11-30 23:55"), 300, 300 * GB)


def test_the_dispatcher_down_over_the_end_still_makes_the_closing_reading_once():
    # Cycles at 23:50:30 and 23:55:30, then none until 00:03:00: that cycle, within the
    # closing reading's deadline (00:05), makes it at slot 00:00 and the worker reads the
    # node the lease held in its last instant. The cycle at 00:04:00 makes none.
    lease = lease_of("2026-11-30 23:50", "2026-12-01 00:00", billing_mode=BillingMode.PER_GB)
    run_cycles("2026-11-30 23:50", [0, 5 * GB])
    [closing] = cycle(at("2026-12-01 00:03"), 12 * GB)
    assert (closing.slot_at, closing.deadline_at, closing.state) == (
        at("2026-12-01 00:00"),
        at("2026-12-01 00:05"),
        "ok",
    )
    assert closing.hostnames() == ["n1"]
    assert probe_services.dispatch_due(now=at("2026-12-01 00:04"), enqueue=False).runs == 0
    ingest_all(notify=False)
    assert samples(lease) == [
        (at("2026-11-30 23:50"), 300, 5 * GB),
        (at("2026-11-30 23:55"), 300, 7 * GB),
    ]


def test_a_lease_an_operator_ends_mid_slot_is_read_at_that_instant():
    # Ended at 10:02:17 (not a slot): the next cycle reads its counters with slot_at =
    # 10:02:17; the interval [10:00, 10:02:17) is its last sample, 137 s, 4 GB.
    lease = lease_of("2026-11-02 09:55", billing_mode=BillingMode.PER_GB)
    run_cycles("2026-11-02 09:55", [0, 1 * GB])
    ended = at("2026-11-02 10:02:17")
    lease_services.transition_lease(lease=lease, to=LeaseStatus.ENDED, at=ended)
    [closing] = cycle(at("2026-11-02 10:02:30"), 5 * GB)
    assert (closing.slot_at, closing.deadline_at) == (ended, ended + timedelta(minutes=5))
    ingest_all(notify=False)
    assert samples(lease) == [
        (at("2026-11-02 09:55"), 300, 1 * GB),
        (at("2026-11-02 10:00"), 137, 4 * GB),
    ]


# --- the start of a lease -------------------------------------------------------------------


def test_a_lease_starting_mid_slot_is_metered_from_its_start_reading():
    # The lease starts at 10:02: the cycle at 10:02:30 reads its counters at 10:02 (not at
    # the 10:00 slot, before it began); readings at 10:05 and 10:10 follow. Samples: 10:02,
    # 180 s, 6 GB, and 10:05, 300 s, 10 GB. The billed window starts at 10:02, so both are
    # billed: 16 GB x ¥1.00 (a reading stamped 10:00 would leave 6 GB out: ¥10.00).
    lease = lease_of("2026-11-02 10:02", billing_mode=BillingMode.PER_GB, price_per_gb=D("1"))
    [opening] = cycle(at("2026-11-02 10:02:30"), 0)
    assert cycle(at("2026-11-02 10:03:30"), 1 * GB) == []  # the slot has its reading
    run_cycles("2026-11-02 10:05", [6 * GB, 16 * GB])
    ingest_all(notify=False)
    line = usage_line(lease, "2026-11", LineKind.USAGE_GB)
    assert (line.quantity, line.amount) == (D("16.000"), D("16.00"))
    assert (opening.slot_at, opening.deadline_at) == (
        at("2026-11-02 10:02"),
        at("2026-11-02 10:07"),
    )
    assert samples(lease) == [
        (at("2026-11-02 10:02"), 180, 6 * GB),
        (at("2026-11-02 10:05"), 300, 10 * GB),
    ]


# --- gaps ---------------------------------------------------------------------------------


def gapped_lease():  # type: ignore[no-untyped-def]
    """n1 read at 10:00 and 10:05 on 28 November (0 and 1 GB), unreachable at noon on
    30 November, read again at 10:05 and 10:10 on 3 December (1,441 and 1,442 GB): the
    dispatcher was down in between. The gap [28 Nov 10:05, 3 Dec 10:05) is 5 days, 1,440
    slots of 5 minutes: its 1,440 GB are 1 GB a slot; November's part of it runs to
    1 December 00:00 (2 days 13 h 55 min = 743 slots, 743 GB), December's 697."""
    lease = lease_of("2026-11-01 00:00", billing_mode=BillingMode.PER_GB, price_per_gb=D("1"))
    run_cycles("2026-11-28 10:00", [0, 1 * GB])
    assert [run.state for run in cycle(at("2026-11-30 12:00:30"), None)] == ["unreachable"]
    run_cycles("2026-12-03 10:05", [1441 * GB, 1442 * GB])
    ingest_all(notify=False)
    return lease


def test_readings_days_apart_bill_by_time_across_the_month_and_open_one_incident():
    lease = gapped_lease()
    found = samples(lease)
    assert found[0] == (at("2026-11-28 10:00"), 300, 1 * GB)
    gap = found[1:-1]
    assert len(gap) == 1440 and {tx for _slot, _s, tx in gap} == {1 * GB}
    assert (gap[0][0], gap[-1][0]) == (at("2026-11-28 10:05"), at("2026-12-03 10:00"))
    november = usage_line(lease, "2026-11", LineKind.USAGE_GB)
    assert (november.quantity, november.amount) == (D("744.000"), D("744.00"))  # 1 + 743
    [incident] = Incident.objects.filter(lease=lease, kind=MeteringIncidentKind.GAP)
    assert (incident.target, incident.state, incident.opened_at, incident.closed_at) == (
        "n1",
        "closed",
        at("2026-11-28 10:05"),
        at("2026-12-03 10:05"),
    )
    assert incident.gap_bytes == 1440 * GB
    assert incident.detail == (
        "n1 was not read from 2026-11-28T02:05:00.000000Z to 2026-12-03T02:05:00.000000Z "
        "(5.00 days, more than the 3-day reading reach): the 1440000000000 B its counters "
        "rose by over that time are billed by time, at their average rate over the gap, not "
        "measured slot by slot."
    )
    assert sorted(run.slot_at for run in incident.runs.all()) == [
        at("2026-11-28 10:05"),
        at("2026-12-03 10:05"),
    ]
    # Ingest recomputing the gap's window again records no second incident.
    recompute_traffic(lease=lease, start=at("2026-11-28 10:05"), end=at("2026-12-03 10:10"))
    run_cycles("2026-12-03 10:15", [1443 * GB])
    ingest_all(notify=False)
    assert Incident.objects.filter(lease=lease, kind=MeteringIncidentKind.GAP).count() == 1


def test_the_verifier_rebuilds_the_gaps_samples_from_the_bundle_and_names_an_edited_one():
    lease = gapped_lease()
    for period in ("2026-11", "2026-12"):
        doc = audit.signed_bundle(lease=lease, period=period, now=at("2026-12-04 09:00"))
        mismatches, notes = audit.verify_report(doc, audit.published_key_info())
        assert mismatches == [], (period, mismatches)
        assert (
            "traffic: metering gap, n1 not read from 2026-11-28T02:05:00.000000Z to "
            "2026-12-03T02:05:00.000000Z (more than 3 days): its 1440000000000 B are billed "
            "by time over the gap"
        ) in notes
    # The insider doubles one slot of the gap (29 Nov 00:00 Shanghai) and re-signs.
    TrafficSample.objects.filter(lease=lease, slot_at=at("2026-11-29 00:00")).update(
        tx_bytes=2 * GB
    )
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=at("2026-12-04 09:00"))
    mismatches, _notes = audit.verify_report(doc, audit.published_key_info())
    assert mismatches[0] == (
        "traffic sample 2026-11-28T16:00:00.000000Z: the bundle says 2000000000 B over 300 s "
        "from 1 node(s), 0 reset(s), 0 wrap(s), rebuilt from the runs 1000000000 B over "
        "300 s from 1 node(s), 0 reset(s), 0 wrap(s)"
    )


WARNING = (
    "GL-2026-000001 (zhiyuan 2026-11): Metering gap: node n1 of lease {lease} was not read "
    "from 2026-11-28 10:05 to 2026-12-03 10:05 (Asia/Shanghai), more than 3 days; 743.000 GB "
    "of its traffic in this period is billed by time over the gap, not measured slot by "
    "slot (incident {incident})."
)


def _issue_in_admin(invoice: Invoice) -> str:
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(StaffFactory())
    response = client.post(
        reverse("admin:billing_invoice_changelist"),
        {"action": "issue", "_selected_action": [invoice.pk]},
        follow=True,
    )
    return response.content.decode()


def _issue_in_api(invoice: Invoice) -> str:
    client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    client.force_authenticate(StaffFactory())
    response = client.post(
        reverse("api:invoice-issue", kwargs={"pk": invoice.pk}), {}, format="json"
    )
    assert response.status_code == 200, response.content
    [gap] = response.json()["metering_gaps"]
    assert gap["bytes_in_period"] == str(743 * GB)
    return str(response.json())


def _issue_with_bill(invoice: Invoice) -> str:
    out, err = StringIO(), StringIO()
    call_command("bill", period="2026-11", issue=True, stdout=out, stderr=err)
    return err.getvalue()


@pytest.mark.parametrize("issue", [_issue_in_admin, _issue_in_api, _issue_with_bill])
def test_issuing_a_month_with_a_metering_gap_warns_records_it_and_issues(issue):
    lease = gapped_lease()
    incident = Incident.objects.get(lease=lease, kind=MeteringIncidentKind.GAP)
    with time_machine.travel(at("2026-12-04 09:00"), tick=False):
        draft = services.draft_invoice(tenant=lease.tenant, period="2026-11")
        said = issue(draft)
    draft.refresh_from_db()
    assert draft.status == InvoiceStatus.ISSUED
    if issue is not _issue_in_api:
        assert WARNING.format(lease=lease.reference, incident=incident.pk) in said
    assert draft.metering_gaps == [
        {
            "incident": incident.pk,
            "lease": lease.reference,
            "node": "n1",
            "start": "2026-11-28T02:05:00.000000Z",
            "end": "2026-12-03T02:05:00.000000Z",
            "bytes": str(1440 * GB),
            "bytes_in_period": str(743 * GB),
        }
    ]
