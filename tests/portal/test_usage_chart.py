"""Usage-billed leases on the lease page: the traffic chart of the month so far with the
running 95th percentile, and the month-to-date estimate, hand-computed. The clock is
NOW = 2026-11-20 12:00 Shanghai: 19.5 of November's 30 days have passed."""

import json
import random
import re
from datetime import timedelta
from decimal import Decimal as D

import pytest
import time_machine
from rest_framework.test import APIClient

from accounts.choices import Role
from billing import running
from billing.models import TrafficSample
from gpulease_verify.calculations import TrafficRate, percentile_95
from leases.choices import BillingMode
from tests.factories import MembershipFactory, NodeFactory, amend_acknowledged, at, make_lease
from tests.portal.support import NOW, active, client_for

pytestmark = pytest.mark.django_db

START = at("2026-11-05 00:00")


def mbps_bytes(mbps: int) -> int:
    """Bytes of a 300 s sample at ``mbps``: mbps x 10^6 / 8 x 300 = mbps x 37,500,000."""
    return mbps * 37_500_000


def samples(lease, rates_mbps, start=START):  # type: ignore[no-untyped-def]
    for index, mbps in enumerate(rates_mbps):
        TrafficSample.objects.create(
            lease=lease,
            slot_at=start + timedelta(minutes=5 * index),
            seconds=300,
            tx_bytes=mbps_bytes(mbps),
            nodes=1,
        )


@pytest.fixture
def member():
    return MembershipFactory(role=Role.VIEWER)


def usage_lease(member, **terms):  # type: ignore[no-untyped-def]
    return active(
        make_lease(tenant=member.tenant, reference="ZY-2026-501", nodes=[NodeFactory()], **terms)
    )


# 17 samples at 300 Mbit/s, then 800, 900 and 1000. Under 20 samples nothing is dropped
# (the running figure is the highest so far); the 20th makes one to drop: 900.
RATES = [300] * 17 + [800, 900, 1000]


def test_running_p95_and_month_to_date_estimate_of_a_p95_lease(member):
    lease = usage_lease(member, billing_mode=BillingMode.P95, price_per_mbps_p95=D("0.4000"))
    samples(lease, RATES)
    month = running.month_to_date(lease=lease, period="2026-11", instant=NOW)
    assert month is not None and month.in_progress
    (part,) = month.parts
    assert [value for _slot, value in part.running_p95] == [D(300_000_000) for _ in range(17)] + [
        D(800_000_000),
        D(900_000_000),
        D(900_000_000),
    ]
    assert part.p95_bps == D(900_000_000)
    # 2026-11-01 00:00 to 2026-11-20 12:00 = 1,684,800 s of 2,592,000 = 0.65 of the month;
    # 900.00 Mbit/s x ¥0.40 x 0.65 = ¥234.00.
    assert month.elapsed_share == D("0.650000")
    assert (part.line.quantity, part.line.amount) == (D("900.00"), D("234.00"))
    assert month.amount == D("234.00")

    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    assert "Month-to-date estimate: ¥234.00" in page
    assert "(65.00 % of the month so far; before tax and SLA credit)" in page
    assert "900 Mbit/s" in page  # the 95th percentile so far, in the portal's spelling
    data = json.loads(
        re.search(
            r'<script id="traffic-data" type="application/json">(.*?)</script>', page, re.S
        ).group(1)
    )
    assert data["unit"] == "Mbit/s"
    traffic, so_far = data["series"]
    assert traffic["name"] == "traffic sent" and len(traffic["points"]) == 20
    assert [y for _x, y in traffic["points"]][-3:] == [800.0, 900.0, 1000.0]
    # The running line changes at the first sample (300), the 18th (800) and the 19th
    # (900), and stops where the month so far ends.
    ms = lambda text: round(at(text).timestamp() * 1000)  # noqa: E731
    assert so_far["name"] == "95th percentile so far" and so_far["step"] is True
    assert so_far["points"] == [
        [ms("2026-11-05 00:00"), 300.0],
        [ms("2026-11-05 01:25"), 300.0],
        [ms("2026-11-05 01:25"), 800.0],
        [ms("2026-11-05 01:30"), 800.0],
        [ms("2026-11-05 01:30"), 900.0],
        [ms("2026-11-20 12:00"), 900.0],
    ]
    assert '<figure id="traffic" data-chart="traffic-data">' in page


def test_the_running_p95_is_percentile_95_of_the_samples_so_far():
    generator = random.Random(17)
    rows = [
        TrafficRate(START + timedelta(minutes=5 * i), 300, generator.randrange(1, 10**6))
        for i in range(500)
    ]
    rates = [row.tx_bps for row in rows]
    points = running.running_p95(rows)
    assert [value for _slot, value in points] == [
        percentile_95(rates[: index + 1]) for index in range(len(rates))
    ]


def test_an_amendment_prices_each_part_on_its_own(member):
    """¥0.40 until 2026-11-11 00:00 (10 days), ¥0.50 from then. Part 1: five samples at
    300 Mbit/s, 300 x 0.40 x 10/30 = ¥40.00. Part 2 so far (9.5 days, 820,800 s): the
    RATES samples on 11-15, p95 900, 900 x 0.50 x 820,800 / 2,592,000 = 142.50."""
    lease = usage_lease(member, billing_mode=BillingMode.P95, price_per_mbps_p95=D("0.4000"))
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-11 00:00"),
        changes={"price_per_mbps_p95": D("0.5000")},
        reason="New price.",
    )
    samples(lease, [300] * 5)
    samples(lease, RATES, start=at("2026-11-15 00:00"))
    month = running.month_to_date(lease=lease, period="2026-11", instant=NOW)
    first, second = month.parts
    assert (first.line.quantity, first.line.amount) == (D("300.00"), D("40.00"))
    assert (second.line.quantity, second.line.amount) == (D("900.00"), D("142.50"))
    assert month.amount == D("182.50")


def test_per_gb_month_to_date(member):
    """Three samples of 1.5 GB: 4.5 GB x ¥0.50 = ¥2.25."""
    lease = usage_lease(member, billing_mode=BillingMode.PER_GB, price_per_gb=D("0.5000"))
    for index in range(3):
        TrafficSample.objects.create(
            lease=lease,
            slot_at=START + timedelta(minutes=5 * index),
            seconds=300,
            tx_bytes=1_500_000_000,
            nodes=1,
        )
    month = running.month_to_date(lease=lease, period="2026-11", instant=NOW)
    (part,) = month.parts
    assert (part.line.quantity, part.line.amount, part.p95_bps) == (D("4.5"), D("2.25"), None)
    assert part.running_p95 == []
    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    assert "Month-to-date estimate: ¥2.25" in page and "4.5 GB" in page
    data = json.loads(
        re.search(
            r'<script id="traffic-data" type="application/json">(.*?)</script>', page, re.S
        ).group(1)
    )
    # 1.5 GB in 300 s = 40 Mbit/s; no 95th percentile line for traffic billing.
    assert [series["name"] for series in data["series"]] == ["traffic sent"]
    assert [y for _x, y in data["series"][0]["points"]] == [40.0, 40.0, 40.0]


def test_a_monthly_plan_has_no_usage_section(member):
    lease = usage_lease(member)
    assert running.month_to_date(lease=lease, period="2026-11", instant=NOW) is None
    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    assert 'id="usage"' not in page and "traffic-data" not in page


def test_the_projection_and_the_running_figures_in_the_api(member):
    """At NOW 0.65 of November is billed (1,684,800 of 2,592,000 s). 95th: ¥234.00 so far,
    the month at that 95th 900 Mbit/s x ¥0.40 = ¥360.00 (234.00 x 2,592,000 / 1,684,800).
    Per GB: ¥2.25 so far, 2.25 / 0.65 = 3.4615... -> ¥3.46."""
    lease = usage_lease(member, billing_mode=BillingMode.P95, price_per_mbps_p95=D("0.4000"))
    samples(lease, RATES)
    month = running.month_to_date(lease=lease, period="2026-11", instant=NOW)
    assert (month.amount, month.projected_amount) == (D("234.00"), D("360.00"))
    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    assert "Projected for the whole month at the rate so far: <strong>¥360.00</strong>" in page
    # Once the month is over the projection is the invoice's figure.
    over = running.month_to_date(lease=lease, period="2026-11", instant=at("2026-12-01 00:00"))
    assert over.projected_amount == over.amount

    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_login(member.user)
    with time_machine.travel(NOW, tick=False):
        body = api.get(f"/api/v1/leases/{lease.pk}/usage/", {"period": "2026-11"}).json()
    usage = body["usage"]
    assert (usage["amount_so_far"], usage["projected_amount"], usage["elapsed_share"]) == (
        "234.00",
        "360.00",
        "0.650000",
    )
    (part,) = usage["parts"]
    # 20 samples: the top 20 x 5 // 100 = 1 (1000 Mbit/s) is left out, 900 is billed.
    assert (part["quantity"], part["samples"], part["samples_above_the_95th"]) == (
        "900.00",
        20,
        1,
    )
    assert api.get(f"/api/v1/leases/{lease.pk}/usage/").status_code == 400  # no period

    per_gb = make_lease(
        tenant=member.tenant,
        reference="ZY-2026-502",
        nodes=[NodeFactory()],
        billing_mode=BillingMode.PER_GB,
        price_per_gb=D("0.5000"),
    )
    active(per_gb)
    for index in range(3):
        TrafficSample.objects.create(
            lease=per_gb,
            slot_at=START + timedelta(minutes=5 * index),
            seconds=300,
            tx_bytes=1_500_000_000,
            nodes=1,
        )
    month = running.month_to_date(lease=per_gb, period="2026-11", instant=NOW)
    assert (month.amount, month.projected_amount) == (D("2.25"), D("3.46"))
    monthly = active(
        make_lease(tenant=member.tenant, reference="ZY-2026-503", nodes=[NodeFactory()])
    )
    with time_machine.travel(NOW, tick=False):
        body = api.get(f"/api/v1/leases/{monthly.pk}/usage/", {"period": "2026-11"}).json()
    assert body == {"lease": "ZY-2026-503", "period": "2026-11", "usage": None}
