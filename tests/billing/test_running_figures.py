"""The running figures of usage-billed leases on /metrics (issue 32 item 2): ingest stores
them per lease and month (``billing.running.refresh_running``, ``RunningFigure``), a
scrape reads every lease's in one query, and they are the figures the API's usage
endpoint computes live. Counter readings go through the real path (counters runs as the
probe parses them, ``ingest_all``); every figure is worked by hand in the comments.

Rates and bytes of a 300 s slot: Mbit/s x 10^6 / 8 x 300 = Mbit/s x 37,500,000 bytes.
The clock: NOW = 2026-11-20 12:00 Shanghai, 1,684,800 s of November's 2,592,000 (0.65)."""

import threading
import time
from datetime import timedelta
from decimal import Decimal as D

import pytest
import time_machine
from django.core.cache import cache
from django.db import connection, transaction
from django.forms.models import model_to_dict
from rest_framework.test import APIClient

from accounts.choices import Role
from billing import running
from billing.ingest import ingest_all
from billing.models import RunningFigure, TrafficSample
from leases.choices import BillingMode
from leases.models import Lease
from monitoring import metrics
from tests.billing.test_traffic_intervals import (
    FIRST_COUNTER,
    active_lease,
    counters_every_slot,
    reading,
)
from tests.factories import MembershipFactory, at
from tests.monitoring.test_metrics import families

pytestmark = pytest.mark.django_db

NOW = at("2026-11-20 12:00")
GB = 10**9
MBPS_SLOT = 37_500_000  # bytes of a 300 s slot at 1 Mbit/s
FIVE = timedelta(minutes=5)
RUNNING = [
    "gpulease_lease_usage_month_to_date",
    "gpulease_lease_usage_p95_bytes_per_second",
    "gpulease_lease_slots_above_p95",
    "gpulease_lease_amount_month_to_date_cny",
    "gpulease_lease_amount_projected_cny",
    "gpulease_lease_running_age_seconds",
]


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()


@pytest.fixture
def member():
    return MembershipFactory(role=Role.VIEWER)


def p95_lease(tenant, reference="ZY-95"):  # type: ignore[no-untyped-def]
    lease = active_lease(
        tenant=tenant, billing_mode=BillingMode.P95, price_per_mbps_p95=D("0.4000")
    )
    lease.reference = reference
    lease.save(update_fields=["reference"])
    return lease


def per_gb_lease(tenant, reference="ZY-GB"):  # type: ignore[no-untyped-def]
    lease = active_lease(tenant=tenant, billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    lease.reference = reference
    lease.save(update_fields=["reference"])
    return lease


def exported(**labels):  # type: ignore[no-untyped-def]
    """The running figures of the scrape's series that match ``labels``, by metric name."""
    found = families(metrics.exposition())
    out = {}
    for name in RUNNING:
        values = [
            (s.labels, s.value)
            for s in found[name]
            if all(s.labels.get(k) == v for k, v in labels.items())
        ]
        assert len(values) <= 1, (name, values)
        if values:
            out[name] = values[0]
    return out


def api_usage(user, lease, period):  # type: ignore[no-untyped-def]
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_login(user)
    response = api.get(f"/api/v1/leases/{lease.pk}/usage/", {"period": period})
    assert response.status_code == 200, response.content
    return response.json()["usage"]


def test_the_metrics_are_the_api_s_running_figures_after_ingest(member):
    """95计费 at ¥0.40/Mbps: 20 samples from 2026-11-05 00:00, 17 at 300 Mbit/s then 800,
    900 and 1,000. 20 x 5 // 100 = 1 sample (the 1,000) is left out: the 95th so far is
    900 Mbit/s = 112,500,000 bytes/s, one slot above it. So far 900 x 0.40 x 0.65 =
    ¥234.00; the month at that 95th 900 x 0.40 = ¥360.00.
    Per GB at ¥0.50: three slots of 1.5 GB, 4.5 GB x 0.50 = ¥2.25 so far; the month at
    that rate 2.25 x 2,592,000 / 1,684,800 = 3.4615... -> ¥3.46."""
    p95 = p95_lease(member.tenant)
    per_gb = per_gb_lease(member.tenant)
    first = at("2026-11-05 00:00")
    counters_every_slot(
        p95, "n1", first, [300 * MBPS_SLOT] * 17 + [x * MBPS_SLOT for x in (800, 900, 1000)]
    )
    counters_every_slot(per_gb, "n1", first, [1_500_000_000] * 3)
    with time_machine.travel(NOW, tick=False):
        ingest_all(notify=False)
        ninety_fifth = exported(lease="ZY-95")
        traffic = exported(lease="ZY-GB")
        by_api = api_usage(member.user, p95, "2026-11")
        gb_api = api_usage(member.user, per_gb, "2026-11")

    labels, quantity = ninety_fifth["gpulease_lease_usage_month_to_date"]
    assert (labels["period"], labels["unit"], labels["tenant"]) == (
        "2026-11",
        "Mbps",
        member.tenant.slug,
    )
    assert quantity == 900.0
    assert ninety_fifth["gpulease_lease_usage_p95_bytes_per_second"][1] == 112_500_000.0
    assert ninety_fifth["gpulease_lease_slots_above_p95"][1] == 1
    assert ninety_fifth["gpulease_lease_amount_month_to_date_cny"][1] == 234.00
    assert ninety_fifth["gpulease_lease_amount_projected_cny"][1] == 360.00
    assert ninety_fifth["gpulease_lease_running_age_seconds"][1] == 0.0
    # The API's figures, computed live, are the same.
    (part,) = by_api["parts"]
    assert (by_api["amount_so_far"], by_api["projected_amount"]) == ("234.00", "360.00")
    assert (part["quantity"], part["unit"], part["samples_above_the_95th"]) == ("900.00", "Mbps", 1)
    assert (
        float(part["p95_bps"]) / 8 == ninety_fifth["gpulease_lease_usage_p95_bytes_per_second"][1]
    )
    assert (
        float(by_api["amount_so_far"]) == ninety_fifth["gpulease_lease_amount_month_to_date_cny"][1]
    )

    labels, quantity = traffic["gpulease_lease_usage_month_to_date"]
    assert (labels["unit"], quantity) == ("GB", 4.5)
    assert traffic["gpulease_lease_amount_month_to_date_cny"][1] == 2.25
    assert traffic["gpulease_lease_amount_projected_cny"][1] == 3.46
    # Per GB there is no 95th and no slot above it.
    assert "gpulease_lease_usage_p95_bytes_per_second" not in traffic
    assert "gpulease_lease_slots_above_p95" not in traffic
    (part,) = gb_api["parts"]
    assert (gb_api["amount_so_far"], gb_api["projected_amount"], part["quantity"]) == (
        "2.25",
        "3.46",
        "4.500000",
    )

    row = RunningFigure.objects.get(lease=p95)
    assert (row.samples, row.samples_through) == (20, first + 19 * FIVE)  # its newest slot
    assert row.computed_at == NOW

    # An hour later the API's 95th line has grown with the month (prorated by time), the
    # stored row has not: its age says how old it is.
    with time_machine.travel(NOW + timedelta(hours=1), tick=False):
        later = exported(lease="ZY-95")
    assert later["gpulease_lease_running_age_seconds"][1] == 3600.0
    assert later["gpulease_lease_amount_month_to_date_cny"][1] == 234.00


def test_ingest_again_changes_nothing_and_a_refresh_at_the_same_instant_writes_the_same_row(
    member,
):
    lease = p95_lease(member.tenant)
    counters_every_slot(lease, "n1", at("2026-11-05 00:00"), [300 * MBPS_SLOT] * 4)
    with time_machine.travel(NOW, tick=False):
        ingest_all(notify=False)
    before = model_to_dict(RunningFigure.objects.get(lease=lease))
    with time_machine.travel(NOW + timedelta(minutes=5), tick=False):
        assert ingest_all(notify=False).runs == 0
    assert model_to_dict(RunningFigure.objects.get(lease=lease)) == before
    # The same refresh again, at the instant of the first: the same figures.
    windows = {lease.pk: (lease, at("2026-11-05 00:00"), at("2026-11-05 00:20"))}
    assert running.refresh_running(windows, instant=NOW) == 1
    assert model_to_dict(RunningFigure.objects.get(lease=lease)) == before
    assert before["amount"] == D("78.00")  # 300 x 0.40 x 0.65
    assert RunningFigure.objects.count() == 1


def test_the_month_boundary(member):
    """Per GB at ¥0.50, 1 GB a slot. Readings at 23:45, 23:50, 23:55 on 30 November and at
    00:00 on 1 December, ingested at 00:03: the samples 23:45, 23:50 and 23:55 refresh
    November's row, final now (3 GB, ¥1.50, projected ¥1.50); no December row yet, and
    the scrape keeps November's figures. The reading at 00:05, ingested at 00:08, gives
    December's first sample (00:00, 1 GB): December's row starts, ¥0.50 so far, the month
    at that rate 0.50 x 2,678,400 s / 480 s = ¥2,790.00; November's row is left alone."""
    lease = per_gb_lease(member.tenant)
    counters_every_slot(lease, "n1", at("2026-11-30 23:45"), [GB] * 3)
    with time_machine.travel(at("2026-12-01 00:03"), tick=False):
        ingest_all(notify=False)
        first = exported(lease="ZY-GB")
    november = RunningFigure.objects.get(lease=lease)
    assert (november.period, november.quantity, november.amount, november.projected_amount) == (
        "2026-11",
        D("3"),
        D("1.50"),
        D("1.50"),
    )
    assert first["gpulease_lease_usage_month_to_date"][0]["period"] == "2026-11"
    assert first["gpulease_lease_amount_projected_cny"][1] == 1.50
    assert first["gpulease_lease_running_age_seconds"][1] == 0.0

    # The next reading, 00:05: one more GB.
    reading(lease, "n1", at("2026-12-01 00:05"), FIRST_COUNTER + 4 * GB)
    with time_machine.travel(at("2026-12-01 00:08"), tick=False):
        ingest_all(notify=False)
        second = exported(lease="ZY-GB")
    december = RunningFigure.objects.get(lease=lease, period="2026-12")
    assert (december.quantity, december.amount, december.projected_amount) == (
        D("1"),
        D("0.50"),
        D("2790.00"),
    )
    assert model_to_dict(RunningFigure.objects.get(lease=lease, period="2026-11")) == model_to_dict(
        november
    )
    # One series per lease: the newest month.
    assert second["gpulease_lease_usage_month_to_date"][0]["period"] == "2026-12"
    assert second["gpulease_lease_amount_month_to_date_cny"][1] == 0.50


def test_a_lease_with_no_sample_this_month_has_no_row_and_no_series(member):
    """The API answers zeros for the month; /metrics leaves the series out until the
    month's first sample is ingested (a usage-billed lease without counters yet)."""
    lease = p95_lease(member.tenant, reference="ZY-QUIET")
    with time_machine.travel(NOW, tick=False):
        ingest_all(notify=False)
        usage = api_usage(member.user, lease, "2026-11")
        assert exported(lease="ZY-QUIET") == {}
    assert usage["amount_so_far"] == "0.00"
    assert not RunningFigure.objects.exists()


def test_a_scrape_reads_the_running_figures_in_one_query(
    member, settings, django_assert_num_queries, django_assert_max_num_queries
):
    """The same number of queries for 1 lease with running figures and for 50 (the SLA
    credits, cached per lease, are filled in before counting)."""
    settings.METRICS_CREDIT_REFRESH_PER_SCRAPE = 100
    start = at("2026-11-05 00:00")
    leases = [p95_lease(member.tenant, reference="Q-0")]
    counters_every_slot(leases[0], "n1", start, [300 * MBPS_SLOT] * 2)
    with time_machine.travel(NOW, tick=False):
        ingest_all(notify=False)
        metrics.exposition()  # fills the credit cache
        # 19: the lease status (portal.lease_status) reads the month's figures, three queries.
        with django_assert_num_queries(19) as one:
            metrics.exposition()
        for index in range(1, 50):
            lease = p95_lease(member.tenant, reference=f"Q-{index}")
            counters_every_slot(lease, "n1", start, [(300 + index) * MBPS_SLOT] * 2)
            leases.append(lease)
        ingest_all(notify=False)
        metrics.exposition()
        with django_assert_max_num_queries(len(one.captured_queries)):
            text = metrics.exposition()
    assert RunningFigure.objects.count() == 50
    assert text.count(b"gpulease_lease_amount_month_to_date_cny{") == 50
    # two samples at 349 Mbit/s, none dropped: 349 x 0.40 x 0.65 = 90.74.
    found = [
        s
        for s in families(text)["gpulease_lease_amount_month_to_date_cny"]
        if s.labels["lease"] == "Q-49"
    ]
    assert [s.value for s in found] == [90.74]


@pytest.mark.django_db(transaction=True)
def test_a_slow_older_refresh_never_overwrites_a_newer_one(monkeypatch):
    """Two ingests refresh one lease at once: the first reads the month (3 slots of 1 GB)
    and is slow to write; meanwhile a fourth slot commits and the second refresh starts.
    The second waits for the first to commit, then reads all 4 slots: the row keeps the
    newer figures (4 GB, ¥2.00 at ¥0.50/GB), not the first refresh's 3 GB written last."""
    member = MembershipFactory(role=Role.VIEWER)
    lease = per_gb_lease(member.tenant)
    first = at("2026-11-05 00:00")
    for index in range(3):
        TrafficSample.objects.create(
            lease=lease, slot_at=first + index * FIVE, seconds=300, tx_bytes=GB, nodes=1
        )
    computed, release, order = threading.Event(), threading.Event(), []
    month_to_date = running.month_to_date

    def slow_for_the_first(**kwargs):  # type: ignore[no-untyped-def]
        month = month_to_date(**kwargs)
        if threading.current_thread().name == "older":
            computed.set()
            release.wait(10)
        return month

    monkeypatch.setattr(running, "month_to_date", slow_for_the_first)
    lease = Lease.objects.select_related("tenant").get(pk=lease.pk)
    windows = {lease.pk: (lease, first, first + 4 * FIVE)}

    def refresh() -> None:
        try:
            with transaction.atomic():
                running.refresh_running(windows, instant=NOW)
            order.append(threading.current_thread().name)
        finally:
            connection.close()

    older = threading.Thread(target=refresh, name="older")
    newer = threading.Thread(target=refresh, name="newer")
    older.start()
    assert computed.wait(10)
    TrafficSample.objects.create(
        lease=lease, slot_at=first + 3 * FIVE, seconds=300, tx_bytes=GB, nodes=1
    )
    newer.start()
    time.sleep(0.3)
    assert newer.is_alive()  # waiting for the older refresh to commit
    release.set()
    older.join(10)
    newer.join(10)
    assert order == ["older", "newer"]
    row = RunningFigure.objects.get(lease=lease)
    assert (row.quantity, row.amount) == (D("4.000000"), D("2.00"))
