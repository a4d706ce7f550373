"""Which month a counter interval's bytes belong to, proved through the real path: counter
runs parsed as the probe parses them, ``ingest_all``, then the invoice and the audit
bundle. Every figure is worked by hand in the comments.

Rates and bytes of a 300 s slot: 1,000 Mbps = 37.5 GB, 2,000 Mbps = 75 GB,
3,000 Mbps = 112.5 GB, 10,000 Mbps = 375 GB (Mbps x 10^6 / 8 x 300)."""

import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from benchmarks.choices import Tool
from benchmarks.models import ProbeRun
from benchmarks.probes.interpret import interpret
from benchmarks.probes.plan import PlanNode
from billing import audit, invoicing, metering
from billing.choices import LineKind
from billing.ingest import ingest_all
from billing.models import TrafficSample
from gpulease_verify.periods import Period
from gpulease_verify.traffic import (
    READING_REACH,
    Gap,
    Reading,
    gaps,
    period_of,
    slot_shares,
    slot_traffic,
)
from leases import services
from leases.choices import BillingMode, LeaseStatus
from tests.factories import NodeFactory, SiteFactory, TenantFactory, at, make_lease, make_run

GB = 10**9
SLOT = timedelta(minutes=5)
# The counters fixture: `ethtool -S` of an mlx5 port, the format the probe reads
# (tests/benchmarks/fixtures/counters/SOURCES.md). Each reading advances its tx_bytes_phy.
ETHTOOL = (
    Path(__file__).parents[1] / "benchmarks/fixtures/counters/ethtool_S_mlx5_physical.txt"
).read_text()
FIRST_COUNTER = 12_512_566_605_440  # tx_bytes_phy in the fixture
NODE = PlanNode(hostname="gpu-01", leaf="leaf-1", gpus=8, ports=())


def parsed(tx_bytes: int) -> dict:
    """ProbeRun.parsed of a counters run, exactly as the runner stores it: the probe's
    output (one '### counters IFACE' section per port) through ``interpret``."""
    text = re.sub(r"tx_bytes_phy: \d+", f"tx_bytes_phy: {tx_bytes}", ETHTOOL)
    raw = f"### counters eth0\n# ethtool -S eth0\n{text}"
    return interpret(tool=Tool.COUNTERS, raw_output=raw, terms=None, node=NODE).parsed  # type: ignore[arg-type]


def counters_every_slot(lease, target: str, first: datetime, sent: list[int]) -> None:  # type: ignore[no-untyped-def]
    """One reading at ``first`` and one per slot after it; ``sent[i]`` is the bytes sent
    in the i-th slot. Bulk-created like ``make_run`` (a month is 8,641 runs)."""
    site, terms = SiteFactory(), lease.terms.get(version=1)
    counter, runs = FIRST_COUNTER, []
    for index in range(len(sent) + 1):
        slot = first + index * SLOT
        runs.append(
            ProbeRun(
                lease=lease,
                kind="counters",
                tool="counters",
                target=target,
                pattern="node",
                slot_at=slot,
                deadline_at=slot + SLOT,
                site=site,
                state="ok",
                started_at=slot + timedelta(seconds=5),
                finished_at=slot + timedelta(seconds=20),
                verdict="none",
                parsed=parsed(counter),
                terms=terms,
            )
        )
        counter += sent[index] if index < len(sent) else 0
    ProbeRun.objects.bulk_create(runs)


def reading(lease, target: str, slot: datetime, counter: int, **extra):  # type: ignore[no-untyped-def]
    return make_run(
        lease,
        kind="counters",
        target=target,
        pattern="node",
        slot=slot,
        cadence_s=300,
        verdict="none",
        parsed=parsed(counter),
        **extra,
    )


def active_lease(*, tenant=None, **terms):  # type: ignore[no-untyped-def]
    lease = make_lease(
        tenant=tenant, starts_at=at("2026-10-01 00:00"), nodes=[NodeFactory()], **terms
    )
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE)


def samples(lease) -> list[tuple[datetime, int, int, int]]:  # type: ignore[no-untyped-def]
    return [
        (s.slot_at, int(s.tx_bytes), s.seconds, s.nodes)
        for s in TrafficSample.objects.filter(lease=lease).order_by("slot_at")
    ]


# --- the rule (pure) ------------------------------------------------------------------


def test_a_slot_belongs_to_the_month_its_start_lies_in_on_the_tenants_clock():
    # 23:55 on 31 October is October's last slot, 00:00 on 1 November November's first,
    # on each tenant's own clock. 23:55 Shanghai is 15:55 UTC: still October in UTC too,
    # but 23:55 UTC is already 07:55 on 1 November in Shanghai.
    for zone in ("Asia/Shanghai", "UTC"):
        local = ZoneInfo(zone)
        assert period_of(datetime(2026, 10, 31, 23, 55, tzinfo=local), zone) == Period(2026, 10)
        assert period_of(datetime(2026, 11, 1, 0, 0, tzinfo=local), zone) == Period(2026, 11)
    assert period_of(datetime(2026, 10, 31, 23, 55, tzinfo=UTC), "Asia/Shanghai") == Period(
        2026, 11
    )


def test_an_interval_stretched_across_midnight_is_split_pro_rata_by_time():
    # Readings at 23:50 and 00:05 (both between missing): 15 minutes, three slots of 5.
    # 150 GB -> 50 GB each; October gets 23:50 and 23:55 (100 GB), November 00:00 (50 GB).
    shares = slot_shares(
        start=at("2026-10-31 23:50"), end=at("2026-11-01 00:05"), total_bytes=150 * GB, step_s=300
    )
    assert [(s.slot_at, s.seconds, s.bytes) for s in shares] == [
        (at("2026-10-31 23:50"), 300, 50 * GB),
        (at("2026-10-31 23:55"), 300, 50 * GB),
        (at("2026-11-01 00:00"), 300, 50 * GB),
    ]
    # Whole bytes that add up: 100 B over three slots -> floor(100/3) = 33,
    # floor(200/3) - 33 = 33, 100 - 66 = 34.
    uneven = slot_shares(
        start=at("2026-10-31 23:50"), end=at("2026-11-01 00:05"), total_bytes=100, step_s=300
    )
    assert [s.bytes for s in uneven] == [33, 33, 34]


def test_a_thirty_day_month_at_five_minutes_is_8640_slots():
    # One interval over the whole of November (30 x 24 x 12 = 8,640 slots of 300 s):
    # 8,640 GB gives each slot 1 GB, the first 2026-11-01 00:00, the last 2026-11-30 23:55.
    shares = slot_shares(
        start=at("2026-11-01 00:00"), end=at("2026-12-01 00:00"), total_bytes=8640 * GB, step_s=300
    )
    assert len(shares) == 8640
    assert {s.bytes for s in shares} == {GB}
    assert (shares[0].slot_at, shares[-1].slot_at) == (
        at("2026-11-01 00:00"),
        at("2026-11-30 23:55"),
    )
    assert {period_of(s.slot_at, "Asia/Shanghai") for s in shares} == {Period(2026, 11)}


# --- through ingest ---------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("zone", ["Asia/Shanghai", "UTC"])
def test_the_last_slot_of_october_is_octobers_after_ingest(zone):
    # Readings at 23:50, 23:55, 00:00 and 00:05 on the tenant's clock, 1 GB a slot:
    # samples stamped 23:50 and 23:55 (October) and 00:00 (November).
    local = ZoneInfo(zone)
    lease = active_lease(tenant=TenantFactory(time_zone=zone))
    first = datetime(2026, 10, 31, 23, 50, tzinfo=local)
    counters_every_slot(lease, "n1", first, [GB, GB, GB])
    ingest_all(notify=False)
    october, november = Period(2026, 10).bounds(zone), Period(2026, 11).bounds(zone)
    in_october = metering.samples_in(lease_id=lease.pk, start=october[0], end=october[1])
    in_november = metering.samples_in(lease_id=lease.pk, start=november[0], end=november[1])
    assert sorted(s.slot_at for s in in_october) == [first, first + SLOT]
    assert [s.slot_at for s in in_november] == [datetime(2026, 11, 1, 0, 0, tzinfo=local)]


@pytest.mark.django_db
def test_each_node_is_rated_over_its_own_interval():
    # n1 reads every slot at 1,000 Mbps (37.5 GB a slot). n2's 10:05 run failed: its one
    # interval [10:00, 10:10) sent 75 GB, 37.5 GB in each slot. n3's first reading is at
    # 10:05: nothing for it at 10:00.
    #   10:00: n1 37.5 + n2 37.5        =  75.0 GB -> 2,000 Mbps, 2 nodes
    #   10:05: n1 37.5 + n2 37.5 + n3 37.5 = 112.5 GB -> 3,000 Mbps, 3 nodes
    # (Rating every node over the longest interval would have given 10:05 112.5 GB over
    # 600 s = 1,500 Mbps.)
    lease = active_lease()
    start = at("2026-11-02 10:00")
    counters_every_slot(lease, "n1", start, [37_500_000_000] * 2)
    reading(lease, "n2", start, FIRST_COUNTER)
    make_run(
        lease,
        kind="counters",
        target="n2",
        pattern="node",
        slot=start + SLOT,
        cadence_s=300,
        state="failed",
    )
    reading(lease, "n2", start + 2 * SLOT, FIRST_COUNTER + 75 * GB)
    reading(lease, "n3", start + SLOT, FIRST_COUNTER)
    reading(lease, "n3", start + 2 * SLOT, FIRST_COUNTER + 37_500_000_000)
    ingest_all(notify=False)
    assert samples(lease) == [
        (start, 75 * GB, 300, 2),
        (start + SLOT, 112_500_000_000, 300, 3),
    ]
    rates = metering.bandwidth_samples_bps(lease_id=lease.pk, start=start, end=start + 2 * SLOT)
    assert sorted(rates) == [2000 * 10**6, 3000 * 10**6]


@pytest.mark.django_db
def test_a_late_reading_splits_the_interval_it_falls_in():
    # n1 reads 10:00 and 10:10 first: 75 GB over [10:00, 10:10) -> 37.5 GB a slot. Its
    # 10:05 reading finishes late (10:12) and says all 75 GB went in the first slot.
    lease = active_lease()
    start = at("2026-11-02 10:00")
    reading(lease, "n1", start, FIRST_COUNTER)
    reading(lease, "n1", start + 2 * SLOT, FIRST_COUNTER + 75 * GB)
    ingest_all(notify=False)
    assert samples(lease) == [
        (start, 37_500_000_000, 300, 1),
        (start + SLOT, 37_500_000_000, 300, 1),
    ]
    late = start + timedelta(minutes=12)
    reading(lease, "n1", start + SLOT, FIRST_COUNTER + 75 * GB, finished=late)
    ingest_all(notify=False)
    assert samples(lease) == [(start, 75 * GB, 300, 1), (start + SLOT, 0, 300, 1)]


@pytest.mark.django_db
def test_per_gb_bills_each_month_its_own_share_of_a_gap_across_midnight():
    # One node, October 31 23:00 to November 1 01:00 (Shanghai), readings every 5 minutes
    # except 23:55 and 00:00. It sends 1,000 Mbps (37.5 GB a slot) until midnight and
    # 2,000 Mbps (75 GB a slot) after.
    #   [23:00, 23:50): 10 intervals x 37.5 GB                    = 375 GB, October
    #   [23:50, 00:05): 37.5 + 37.5 + 75 = 150 GB, by time 50 GB a slot:
    #                   23:50 and 23:55 (October) 100 GB, 00:00 (November) 50 GB
    #   [00:05, 01:00): 11 intervals x 75 GB                      = 825 GB, November
    # October 475 GB, 12 samples; November 875 GB, 12 samples (00:00 to 00:55).
    # At 0.50 per GB: October 237.50, November 437.50.
    # (Stamping each interval with its end gave October 375 GB and November 975 GB.)
    lease = active_lease(billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    counter = FIRST_COUNTER
    slot = at("2026-10-31 23:00")
    while slot <= at("2026-11-01 01:00"):
        if slot not in (at("2026-10-31 23:55"), at("2026-11-01 00:00")):
            reading(lease, "n1", slot, counter)
        counter += 37_500_000_000 if slot < at("2026-11-01 00:00") else 75 * GB
        slot += SLOT
    ingest_all(notify=False)
    expected = {"2026-10": (475 * GB, D("237.50"), 12), "2026-11": (875 * GB, D("437.50"), 12)}
    for period, (total, amount, count) in expected.items():
        invoice = invoicing.draft_invoice(tenant=lease.tenant, period=period)
        [usage] = invoice.lines.filter(kind=LineKind.USAGE_GB)
        assert (usage.detail["bytes"], usage.amount, usage.detail["samples"]) == (
            total,
            amount,
            count,
        )
    assert usage.detail["first_slot"] == "2026-10-31T16:00:00Z"  # 00:00 Shanghai
    assert usage.detail["last_slot"] == "2026-10-31T16:55:00Z"
    # The audit bundle reads the same samples as the invoice, and recomputes its line.
    doc = audit.signed_bundle(lease=lease, period="2026-11", now=at("2026-12-01 02:00"))
    bundled = doc["bundle"]["traffic_samples"]
    assert (len(bundled), sum(int(s["tx_bytes"]) for s in bundled)) == (12, 875 * GB)
    assert audit.verify(doc, audit.published_key_info()) == []


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("burst_hours", "billed_mbps", "amount"),
    [(36, D("3000.00"), D("75000.00")), (37, D("10000.00"), D("250000.00"))],
)
def test_95th_percentile_drops_a_36_hour_burst_and_bills_a_37_hour_one(
    burst_hours, billed_mbps, amount
):
    # A lease running since 1 October, 95计费 at 25.00 per Mbps. Readings every 5 minutes
    # from 31 October 23:00 to 1 December 00:00 (Shanghai): October's last hour at
    # 10,000 Mbps, then November: a burst at 10,000 Mbps from 00:00 on the 1st, then
    # 3,000 Mbps to the end of the month.
    # November is 30 days: 8,640 samples, floor(8,640 x 5%) = 432 dropped, the 433rd
    # highest billed. 36 h = 432 slots: all dropped, 3,000 Mbps billed, x 25.00 = 75,000.00.
    # 37 h = 444 slots: the 433rd highest is a burst slot, 10,000 x 25.00 = 250,000.00.
    # October's last slot [23:55, 24:00) is October's: stamped with its end it would have
    # been November's 433rd burst sample (the finance finding: 36 h billed as a burst).
    lease = active_lease(billing_mode=BillingMode.P95, price_per_mbps_p95=D("25.0000"))
    burst, base = 375 * GB, 112_500_000_000
    burst_slots = burst_hours * 12
    sent = [burst] * 12 + [burst] * burst_slots + [base] * (8640 - burst_slots)
    counters_every_slot(lease, "n1", at("2026-10-31 23:00"), sent)
    ingest_all(notify=False)
    invoice = invoicing.draft_invoice(tenant=lease.tenant, period="2026-11")
    [usage] = invoice.lines.filter(kind=LineKind.USAGE_P95)
    assert (usage.quantity, usage.amount) == (billed_mbps, amount)
    assert (usage.detail["samples"], usage.detail["dropped_samples"]) == (8640, 432)
    assert usage.detail["first_slot"] == "2026-10-31T16:00:00Z"  # 1 November 00:00
    assert usage.detail["last_slot"] == "2026-11-30T15:55:00Z"  # 30 November 23:55


def test_a_reading_between_grid_instants_is_cut_on_the_grid():
    # A lease's first reading at 10:02 (it started then), the next at 10:10 (10:05's
    # missing): 8 minutes cut on the 5-minute grid, [10:02, 10:05) and [10:05, 10:10), not
    # at 10:07. 80 GB -> 30 GB over 180 s and 50 GB over 300 s.
    shares = slot_shares(
        start=at("2026-11-02 10:02"), end=at("2026-11-02 10:10"), total_bytes=80 * GB, step_s=300
    )
    assert [(s.slot_at, s.seconds, s.bytes) for s in shares] == [
        (at("2026-11-02 10:02"), 180, 30 * GB),
        (at("2026-11-02 10:05"), 300, 50 * GB),
    ]


def test_readings_days_apart_are_a_gap_billed_by_time():
    # 0 then 1,440 GB five days apart (1,440 slots): 1 GB a slot, and one metering gap.
    start, end = at("2026-11-28 10:05"), at("2026-12-03 10:05")
    readings = {
        "n1": [
            Reading(at=start, step_s=300, ports={"counters data0/data0": 0}),
            Reading(at=end, step_s=300, ports={"counters data0/data0": 1440 * GB}),
        ]
    }
    found = slot_traffic(readings, start=start, end=end, counter_bits=64, max_rate_bps=None)
    assert len(found) == 1440 and {s.bytes for s in found} == {GB}
    assert gaps(readings, counter_bits=64, max_rate_bps=None) == [Gap("n1", start, end, 1440 * GB)]
    # Three days apart is still an interval, not a gap.
    readings["n1"][1] = Reading(
        at=start + READING_REACH, step_s=300, ports={"counters data0/data0": GB}
    )
    assert gaps(readings, counter_bits=64, max_rate_bps=None) == []
