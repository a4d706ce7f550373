"""The demo bills real figures: its per-GB and 95计费 leases are billed from counter runs
that went through the chain and the real ingest, and its yearly lease, accepted when it
went live, has rent lines.

The clock is pinned at 12:00 on 2 November 2026 in Shanghai with four days of history, so
the counter readings start at 12:00 on 29 October (04:00 UTC) and October holds 60 whole
hours of them: the per-GB lease's burst (80 hours back) and reboot (60 hours back), and
the 95计费 lease's burst (86 hours back). Expectations are worked out here from the
generator's parameters, hour by hour, not by calling the generator or the billing code.
"""

import json
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from itertools import pairwise

import pytest
import time_machine
from django.test import override_settings

from benchmarks.models import ProbeRun
from benchmarks.models.outputs import load_texts
from billing import invoicing
from billing.choices import InvoiceStatus, LineKind
from billing.models import CreditNote, Invoice, TrafficSample
from demo.counters import BOOT_TX_BYTES, DAILY_PROFILE, TRAFFIC
from demo.history import load_history
from demo.invoices import GOODWILL_REASON, DemoInvoices, load_invoices
from gpulease_verify import sweep
from leases.demo import load_demo
from leases.models import Lease, NicPort, Tenant
from ledger.chain import verify_lease
from tests.conftest import built_once

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 2, 4, 0, tzinfo=UTC)  # 12:00 in Shanghai
FIRST_READING = datetime(2026, 10, 29, 4, 0, tzinfo=UTC)  # NOW - 4 days, a whole hour
OCTOBER_END = datetime(2026, 10, 31, 16, 0, tzinfo=UTC)  # 1 November 00:00 in Shanghai
SLOT_BYTES_PER_MBPS = 10**6 * 300 // 8


def _cents(value: Decimal) -> Decimal:
    return value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def _expected_bytes(reference: str, ports_of_last_node: int, nodes: int) -> int:
    """What the lease's nodes sent from the first reading to the end of October: each
    hour 12 slots at its rate (the slots' jitter cancels within the hour), the burst at
    its own rate, and the rebooting node's drained hour only the bytes it sent booting."""
    plan = TRAFFIC[reference]
    burst = {NOW - (plan.burst_hours_ago - k) * timedelta(hours=1) for k in range(2)}
    reboot = (
        None if plan.reboot_hours_ago is None else NOW - plan.reboot_hours_ago * timedelta(hours=1)
    )
    total, hour = 0, FIRST_READING
    while hour < OCTOBER_END:
        shanghai_hour = (hour.hour + 8) % 24
        profile = plan.level_mbps * DAILY_PROFILE[shanghai_hour] // 100
        node_hour = 12 * (plan.burst_mbps if hour in burst else profile) * SLOT_BYTES_PER_MBPS
        if hour == reboot:
            total += (nodes - 1) * node_hour + BOOT_TX_BYTES * ports_of_last_node
        else:
            total += nodes * node_hour
        hour += timedelta(hours=1)
    return total


@pytest.fixture(scope="class")
def demo_at_noon(django_db_setup, django_db_blocker, tmp_path_factory):
    """The demo at NOW with four days of history, loaded once for the tests of
    TestTheDemoAtNoon (about half a minute a load): each test reads it inside its own
    savepoint, rolled back after it (tests.conftest.built_once)."""

    def build() -> None:
        var_dir = tmp_path_factory.mktemp("demo-var")  # the demo's logins file
        with override_settings(VAR_DIR=var_dir), time_machine.travel(NOW, tick=False):
            load_demo()
            load_history(days=4)

    with built_once(django_db_blocker, build):
        yield


@pytest.fixture
def demo(demo_at_noon):
    with time_machine.travel(NOW, tick=False):
        yield


def _lines(tenant_slug: str, period: str, reference: str):  # type: ignore[no-untyped-def]
    tenant = Tenant.objects.get(slug=tenant_slug)
    invoice = invoicing.draft_invoice(tenant=tenant, period=period, now=NOW)
    return {line.kind: line for line in invoice.lines.filter(lease__reference=reference)}


def _tx_phy(raw: str) -> list[int]:
    return [int(v) for v in re.findall(r"^\s+tx_bytes_phy: (\d+)$", raw, re.MULTILINE)]


class TestTheDemoAtNoon:
    """The demo loaded once at NOW (fixture demo_at_noon), read by each test."""

    def test_the_per_gb_lease_bills_the_bytes_its_counters_moved(self, demo):
        lease = Lease.objects.get(reference="LX-2026-001")
        nodes = sorted(lease.assignments.values_list("node__hostname", flat=True))
        last_ports = NicPort.objects.filter(node__hostname=nodes[-1]).count()
        assert (len(nodes), last_ports) == (2, 2)
        expected = _expected_bytes("LX-2026-001", last_ports, len(nodes))
        # By hand: Shanghai hours 12-23 of 29 October sum to 1,390 % of the level, 30 and 31
        # October to 2,175 % each: 5,740 %; the burst takes hours 04-05 of 30 October (75 %)
        # at 40,000 Mbps, and the reboot hour is 00:00 on 31 October (45 %) for one node. So
        # 16 Mbps x (2 x 5,665 - 45) + 2 x 2 x 40,000 = 340,560 Mbps-hours x 450,000,000
        # bytes, plus 2 ports x 9,216 bytes sent while booting.
        assert expected == 153_252_000_018_432
        line = _lines("lingxi", "2026-10", "LX-2026-001")["usage_gb"]
        assert line.detail["bytes"] == expected
        assert line.quantity == Decimal("153252.000018")  # GB to six places on the line
        assert (
            line.amount
            == _cents(Decimal(expected) / 10**9 * Decimal("0.0300"))
            == Decimal("4597.56")
        )
        assert line.detail["samples"] == 60 * 12
        # The reboot is one reset, on the slot whose interval holds it (xx:10 to xx:15).
        reboot = NOW - 60 * timedelta(hours=1)
        (reset,) = TrafficSample.objects.filter(lease=lease, resets__gt=0)
        assert reset.slot_at == reboot + timedelta(minutes=10)
        # The runs are the probe's own output, chained and parsed by its interpreter.
        runs = ProbeRun.objects.filter(lease=lease, kind="counters", trigger="schedule")
        assert runs.filter(chain_index__isnull=True).count() == 0
        assert verify_lease(lease_id=lease.pk) == []
        sample = runs.order_by("slot_at").first()
        assert sample is not None and sample.pattern == "sweep"
        outputs = sweep.read_transcript(sample.raw_output)
        assert [out.node for out in outputs] == nodes
        for out in outputs:
            assert "NIC statistics:" in out.stdout and "# ethtool -S ens1f0np0" in out.stdout
            assert "ethtool -S" in out.command

    def test_this_months_traffic_is_the_counter_deltas_read_from_the_raw_output(self, demo):
        """November so far, up to the last reading: the bytes between consecutive readings of
        each port, a reading lower than the one before counting from zero, less the bytes
        the lease's own iperf3 probes sent (their client JSON's bytes, the omitted first
        second included): the probe tax, kept out of metering."""
        lease = Lease.objects.get(reference="LX-2026-001")
        november = OCTOBER_END
        expected = 0
        runs = list(
            ProbeRun.objects.filter(lease=lease, kind="counters", trigger="schedule").order_by(
                "slot_at"
            )
        )
        load_texts(runs)
        printed = defaultdict(list)  # node -> (slot, what it printed), in slot order
        for run in runs:
            for out in sweep.read_transcript(run.raw_output):
                printed[out.node].append((run.slot_at, out.stdout))
        for node in lease.assignments.values_list("node__hostname", flat=True):
            readings = printed[node]
            for (slot, before), (_next, after) in pairwise(readings):
                if slot < november:
                    continue
                for old, new in zip(_tx_phy(before), _tx_phy(after), strict=True):
                    expected += new - old if new >= old else new
        last = max(run.slot_at for run in runs)
        probes = list(
            ProbeRun.objects.filter(
                lease=lease, tool="iperf3", started_at__gte=november, finished_at__lte=last
            )
        )
        load_texts(probes)
        sent = 0
        for probe in probes:
            document = json.loads(probe.raw_output[probe.raw_output.index("{") :])
            bytes_sent = document["end"]["sum_sent"]["bytes"] + sum(
                interval["sum"]["bytes"]
                for interval in document["intervals"]
                if interval["sum"]["omitted"]
            )
            # 10 s at its measured rate, and the omitted first second ramping up to it.
            assert 10.6 < bytes_sent / (probe.measured_bps / 8) < 11.0
            sent += bytes_sent
        assert len(probes) >= 2
        line = _lines("lingxi", "2026-11", "LX-2026-001")["usage_gb"]
        assert expected > sent > 0 and line.detail["bytes"] == expected - sent

    def test_the_p95_lease_bills_the_95th_percentile_of_its_samples(self, demo):
        lease = Lease.objects.get(reference="LX-2026-002")
        samples = TrafficSample.objects.filter(
            lease=lease, slot_at__gte=datetime(2026, 9, 30, 16, tzinfo=UTC), slot_at__lt=OCTOBER_END
        )
        assert samples.count() == 720
        # By hand: 30 Mbps x (5,740 - 135) % + 2 x 20,000 Mbps for the burst (22:00-24:00 on
        # 29 October), for 4 nodes: 832,600 Mbps-hours x 450,000,000 bytes.
        assert _expected_bytes("LX-2026-002", 1, 4) == 374_670_000_000_000
        assert sum(s.tx_bytes for s in samples) == 374_670_000_000_000
        rates = sorted((s.tx_bytes * 8 / s.seconds for s in samples), reverse=True)
        dropped = len(rates) * 5 // 100
        assert dropped == 36
        p95 = rates[dropped]
        line = _lines("lingxi", "2026-10", "LX-2026-002")["usage_p95"]
        mbps = (p95 / 10**6).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        assert mbps > 0 and line.quantity == mbps
        assert Decimal(line.detail["p95_bps"]) == p95
        assert line.amount == _cents(mbps * Decimal("0.4000"))  # a whole month
        # The 2-hour burst (4 nodes at 20 Gbps) is the top 24 samples, all dropped.
        burst = [rate for rate in rates if rate >= 4 * 20_000 * 10**6 * Decimal("0.8")]
        assert len(burst) == 24 and rates[0] > p95
        # The billed sample is an afternoon one: 4 nodes near the profile's peak, +-20 %.
        peak = 4 * TRAFFIC["LX-2026-002"].level_mbps * max(DAILY_PROFILE) / 100 * 10**6
        assert Decimal(peak) * Decimal("0.8") <= p95 <= Decimal(peak) * Decimal("1.2")

    def test_the_yearly_lease_is_accepted_when_it_goes_live_and_billed_from_then(self, demo):
        lease = Lease.objects.get(reference="ZY-2026-002")
        accepted = invoicing.billing_start(lease)
        assert accepted is not None and lease.starts_at < accepted < lease.starts_at + timedelta(
            hours=1
        )
        kinds = set(
            ProbeRun.objects.filter(lease=lease, trigger="acceptance").values_list(
                "kind", flat=True
            )
        )
        assert kinds == {"link", "counters", "throughput", "latency", "collective"}
        assert not ProbeRun.objects.filter(
            lease=lease, trigger="acceptance", verdict="fail"
        ).exists()
        october = _lines("zhiyuan", "2026-10", "ZY-2026-002")
        assert october["node_rent"].quantity == Decimal("4.000000")
        assert october["node_rent"].amount == Decimal("392000.00")
        assert october["network_fee"].amount == Decimal("18000.00")
        # Its first month is billed from the acceptance, a few minutes after midnight.
        first = _lines("zhiyuan", "2026-08", "ZY-2026-002")["node_rent"]
        assert Decimal("3.99") < first.quantity < Decimal("4")


# --- the demo's invoices: issued with a credit, a credit note, a draft -------------------

# The demo's terms carry the default tiers: below 95 % 50 %, below 99 % 25 %, below 99.5 % 10 %.
TIERS = (
    (Decimal("95"), Decimal("50")),
    (Decimal("99"), Decimal("25")),
    (Decimal("99.5"), Decimal("10")),
)


@pytest.mark.parametrize(
    ("instant", "last_month", "this_month"),
    [
        (datetime(2026, 11, 1, 17, 30, tzinfo=UTC), "2026-10", "2026-11"),  # 01:30 on the 1st
        (datetime(2026, 11, 28, 10, 0, tzinfo=UTC), "2026-10", "2026-11"),  # 18:00 on the 28th
    ],
    ids=["early-in-the-month", "late-in-the-month"],
)
def test_the_demo_issues_last_month_with_a_credit_a_credit_note_and_a_draft(
    instant, last_month, this_month
):
    with time_machine.travel(instant, tick=False):
        load_demo()
        load_history(days=1)
        first = load_invoices()
        counts = (Invoice.objects.count(), CreditNote.objects.count())
        # Again: nothing new, nothing refused.
        load_demo()
        load_history(days=1)
        again = load_invoices()
    assert (first.created, again.created) == (2, 0)
    assert (Invoice.objects.count(), CreditNote.objects.count()) == counts
    assert again == DemoInvoices(
        issued="GL-2026-000001", credit_note="GL-CN-2026-000001", draft=this_month
    )

    zhiyuan = Tenant.objects.get(slug="zhiyuan")
    issued = Invoice.objects.get(tenant=zhiyuan, status=InvoiceStatus.ISSUED)
    assert (issued.period, issued.number) == (last_month, "GL-2026-000001")
    assert issued.forced_reason == ""  # the history is ingested: nothing held it back
    lines = list(issued.lines.filter(lease__reference="ZY-2026-001").order_by("position"))
    fees = [line for line in lines if line.kind == LineKind.NETWORK_FEE]
    (credit,) = [line for line in lines if line.kind == LineKind.SLA_CREDIT]
    # The credit, from the lines billed: the tier of the month's compliance (the two-day
    # dip of one pair) of the network fee, both terms versions' parts (22,000 then 30,000
    # a month from the 15th: 9,935.48 + 16,451.61 = 26,387.09), capped at 50 %.
    base = sum((fee.amount for fee in fees), Decimal("0.00"))
    assert base == Decimal("26387.09")
    compliance = Decimal(credit.detail["compliance_percent"])
    assert compliance < Decimal("99.5")
    tier = next(Decimal(credit) for below, credit in TIERS if compliance < below)
    assert credit.amount == -_cents(base * min(tier, Decimal("50")) / 100) < 0

    (note,) = CreditNote.objects.filter(invoice=issued)
    (correction,) = note.lines.all()
    # ¥1,000.00 off the first network fee line, at its 6 %: -1,000.00 - 60.00 = -1,060.00.
    assert (correction.original_line, correction.amount) == (fees[0], Decimal("-1000.00"))
    assert correction.tax_rate_percent == fees[0].tax_rate_percent == Decimal("6.00")
    subtotal = sum((line.amount for line in note.lines.all()), Decimal("0.00"))
    tax = _cents(subtotal * correction.tax_rate_percent / 100)
    assert (note.subtotal, note.tax, note.total) == (subtotal, tax, subtotal + tax)
    assert (note.subtotal, note.tax, note.total) == (
        Decimal("-1000.00"),
        Decimal("-60.00"),
        Decimal("-1060.00"),
    )
    assert note.reason == GOODWILL_REASON and note.number == "GL-CN-2026-000001"

    assert note.kind == "commercial"

    draft = Invoice.objects.get(tenant=zhiyuan, period=this_month)
    assert draft.status == InvoiceStatus.DRAFT and draft.number is None
    # Goodwill is a commercial credit: this month's draft does not bill the ¥1,000.00 back.
    assert not draft.lines.filter(
        kind=LineKind.ADJUSTMENT, detail__adjusted_invoice=issued.pk
    ).exists()
