# ruff: noqa: RUF001 (the Chinese strings' full-width punctuation is the point)
"""The month header (portal/month_header.py) on the lease page, the overview and the fleet:
state, reason, open incidents, month to date, projection and credit, each figure the draft
invoice's own. The clock is pinned at 2026-11-20 12:00 Shanghai (tests/portal/conftest.py);
November 2026 there is 2,592,000 s. Figures counted by hand."""

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from html import unescape
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.choices import Role
from benchmarks.choices import Pattern, RunState, Tool, Trigger, Verdict
from benchmarks.models import ProbeRun
from billing.models import HourlyRollup, TrafficSample
from incidents.choices import IncidentState
from incidents.models import Incident
from leases.choices import BillingMode, ProbeKind
from leases.models import Lease
from portal.month_header import leases_header
from tests.factories import MembershipFactory, NodeFactory, StaffFactory, at, make_lease, make_run
from tests.portal.support import NOW, active, client_for

pytestmark = pytest.mark.django_db

ACCEPTED = at("2026-11-10 14:00")  # 2026-11-10T06:00Z


def _link(lease, hour: datetime, *, up: int, down: int = 0) -> None:  # type: ignore[no-untyped-def]
    HourlyRollup.objects.create(
        lease=lease,
        kind=ProbeKind.LINK,
        hour=hour,
        passed=1 if not down else 0,
        failed=1 if down else 0,
        available_minutes=up,
        unavailable_minutes=down,
    )


def breached_lease(tenant, reference: str = "LX-2026-901"):  # type: ignore[no-untyped-def]
    """Billed from its acceptance on 11-10 14:00 (tests/billing/test_lease_month.py): up 110
    of 120 link minutes after it, 10 passing throughput samples; an open incident."""
    lease = active(
        make_lease(
            tenant=tenant,
            reference=reference,
            nodes=NodeFactory.create_batch(1),
            billing_starts_on_acceptance=True,
        )
    )
    node = lease.assignments.first().node
    ProbeRun.objects.create(
        lease=lease,
        kind=ProbeKind.LINK,
        tool=Tool.ETHTOOL,
        target=node.hostname,
        pattern=Pattern.NODE,
        trigger=Trigger.ACCEPTANCE,
        slot_at=ACCEPTED - timedelta(minutes=5),
        deadline_at=ACCEPTED + timedelta(hours=1),
        site=node.leaf_switch.fabric.site,
        state=RunState.OK,
        verdict=Verdict.PASS,
        finished_at=ACCEPTED,
    )
    _link(lease, datetime(2026, 11, 5, tzinfo=UTC), up=0, down=60)  # before acceptance
    _link(lease, datetime(2026, 11, 12, tzinfo=UTC), up=60)
    _link(lease, datetime(2026, 11, 13, tzinfo=UTC), up=50, down=10)
    HourlyRollup.objects.create(
        lease=lease, kind=ProbeKind.THROUGHPUT, hour=datetime(2026, 11, 12, tzinfo=UTC), passed=10
    )
    Incident.objects.create(
        lease=lease,
        terms=lease.terms.get(),
        kind=ProbeKind.LINK,
        target=node.hostname,
        pattern=Pattern.NODE,
        state=IncidentState.OPEN,
        opened_at=at("2026-11-13 08:10"),
    )
    return lease


def p95_lease(tenant, reference: str = "ZY-2026-902"):  # type: ignore[no-untyped-def]
    """95计费 at ¥0.40 per Mbps from 11-01: 17 samples at 300 Mbit/s, then 800, 900, 1000
    (tests/portal/test_usage_chart.py: the p95 is 900 Mbit/s)."""
    lease = active(
        make_lease(
            tenant=tenant,
            reference=reference,
            nodes=[NodeFactory()],
            billing_mode=BillingMode.P95,
            price_per_mbps_p95=D("0.4000"),
        )
    )
    for index, mbps in enumerate([300] * 17 + [800, 900, 1000]):
        TrafficSample.objects.create(
            lease=lease,
            slot_at=at("2026-11-05 00:00") + timedelta(minutes=5 * index),
            seconds=300,
            tx_bytes=mbps * 37_500_000,
            nodes=1,
        )
    return lease


def header_of(html: str) -> dict[str, str]:
    """The header's fields as a reader sees them (tags dropped, spaces squeezed)."""
    section = re.search(r'<section class="month-header".*?</section>', html, re.S)
    assert section, "no month header"
    fields = dict(
        re.findall(r'data-field="([a-z-]+)"[^>]*>(.*?)</(?:dd|p|span)>', section.group(0), re.S)
    )
    clean = {k: " ".join(unescape(re.sub(r"<[^>]+>", " ", v)).split()) for k, v in fields.items()}
    clean["status"] = re.search(r'data-status="([a-z_]+)"', section.group(0)).group(1)
    clean["position"] = str(html.index(section.group(0)))
    return clean


def draft_lines(reference: str) -> dict[str, D]:
    """The lease's lines in ``bill --dry-run --json`` for November, by kind."""
    out = StringIO()
    call_command(
        "bill", "--period", "2026-11", "--dry-run", "--json", stdout=out, stderr=StringIO()
    )
    return {
        line["kind"]: D(line["amount"])
        for invoice in json.loads(out.getvalue())
        for line in invoice["lines"]
        if line["lease"] == reference
    }


def test_a_breached_lease_shows_its_credit_and_the_draft_invoices_figures():
    # Window 11-10 14:00 to 12-01 00:00 = 1,764,000 s; so far (to 11-20 12:00) 856,800 s.
    # Availability 110 of 120 min = 91.667 % < 95: the 50 % tier (cap 50 %); the SLA level
    # is the top tier's 99.5 %. Network fee 6,000 x 1,764,000 / 2,592,000 = 4,083.33;
    # credit 50 % = -2,041.67. Rent 45,000 x 1,764,000 / 2,592,000 = 30,625.00.
    # Projection: 30,625.00 + 4,083.33 - 2,041.67 = 32,666.66. To date: rent 45,000 x
    # 856,800 / 2,592,000 = 14,875.00, fee 6,000 x the same = 1,983.33: 16,858.33.
    member = MembershipFactory(role=Role.VIEWER)
    lease = breached_lease(member.tenant)
    page = client_for(member.user).get(f"/leases/{lease.pk}/")
    header = header_of(page.content.decode())
    assert header["status"] == "breached"
    assert header["reason"] == ("Availability 91.667 % < 99.5 % SLA: a credit of ¥2,041.67 is due.")
    assert header["open-incidents"] == "1"
    assert f'href="/leases/{lease.pk}/#incidents"' in page.content.decode()
    assert (header["to-date"], header["projected"], header["credit"]) == (
        "¥16,858.33",
        "¥32,666.66",
        "¥-2,041.67",
    )
    # The header comes before the page's first chart.
    assert int(header["position"]) < page.content.decode().index('id="throughput"')

    lines = draft_lines(lease.reference)
    assert lines == {
        "node_rent": D("30625.00"),
        "network_fee": D("4083.33"),
        "sla_credit": D("-2041.67"),
    }
    assert sum(lines.values()) == D("32666.66")

    zh_page = client_for(member.user, "zh-hans").get(f"/leases/{lease.pk}/").content.decode()
    zh = header_of(zh_page)
    assert zh["reason"] == "可用率 91.667 % < SLA 99.5 %：应赔付 ¥2,041.67。"
    assert "本月：2026-11" in zh_page and "未达标" in zh_page
    assert (zh["to-date"], zh["projected"], zh["credit"]) == (
        "¥16,858.33",
        "¥32,666.66",
        "¥-2,041.67",
    )


def test_a_usage_lease_projects_its_95th_percentile_and_has_no_credit_base():
    # Rent: 45,000 x 0.65 so far = 29,250.00, the whole month 45,000.00. The p95 so far is
    # 900 Mbit/s x ¥0.40 x 0.65 = 234.00; projected 234.00 x 2,592,000 / 1,684,800 =
    # 360.00. No network fee line: no credit base, no credit. No rollups: no data.
    member = MembershipFactory(role=Role.VIEWER)
    lease = p95_lease(member.tenant)
    header = header_of(client_for(member.user).get(f"/leases/{lease.pk}/").content.decode())
    assert header["status"] == "no_data"
    assert header["reason"] == "No measurement in this month's billed window yet."
    assert (header["to-date"], header["projected"], header["credit"]) == (
        "¥29,484.00",
        "¥45,360.00",
        "¥0.00",
    )
    # The draft invoice bills the p95 so far for the whole window's share (900 Mbit/s x
    # ¥0.40 x 1): the projection is its lines' sum, 45,000.00 + 360.00.
    lines = draft_lines(lease.reference)
    assert lines == {"node_rent": D("45000.00"), "usage_p95": D("360.00")}
    assert sum(lines.values()) == D("45360.00")


def test_the_overview_sums_its_leases_and_the_fleet_counts_them():
    member = MembershipFactory(role=Role.VIEWER)
    breached_lease(member.tenant)
    p95_lease(member.tenant)
    make_lease(tenant=member.tenant, reference="ZY-2026-903")  # a draft: not counted
    page = client_for(member.user).get("/").content.decode()
    header = header_of(page)
    # 16,858.33 + 29,484.00; 32,666.66 + 45,360.00; the breached lease's credit.
    assert (header["to-date"], header["projected"], header["credit"]) == (
        "¥46,342.33",
        "¥78,026.66",
        "¥-2,041.67",
    )
    assert header["status"] == "breached"
    assert header["reason"].startswith("1 of 2 leases; LX-2026-901: Availability 91.667 %")
    counts = re.search(r'data-field="counts">(.*?)</p>', page, re.S).group(1)
    assert " ".join(unescape(re.sub(r"<[^>]+>", "", counts)).split()) == (
        "breached: 1 · degraded: 0 · no data: 1 · meeting the contract: 0"
    )
    assert header["open-incidents"] == "1"
    chinese = header_of(client_for(member.user, "zh-hans").get("/").content.decode())
    assert chinese["reason"].startswith("2 个租约中的 1 个；LX-2026-901：可用率 91.667 %")

    fleet = client_for(StaffFactory()).get(reverse("portal:fleet")).content.decode()
    provider = header_of(fleet)
    assert (provider["to-date"], provider["projected"], provider["credit"]) == (
        header["to-date"],
        header["projected"],
        header["credit"],
    )
    assert f'href="{reverse("portal:incidents")}"' in fleet


def test_a_month_not_billed_yet_says_why_in_both_languages():
    member = MembershipFactory(role=Role.VIEWER)
    lease = active(
        make_lease(tenant=member.tenant, nodes=[NodeFactory()], billing_starts_on_acceptance=True)
    )
    en = header_of(client_for(member.user).get(f"/leases/{lease.pk}/").content.decode())
    assert en["status"] == "no_data"
    assert en["reason"] == "Not billed yet: the acceptance test has not passed."
    assert (en["to-date"], en["projected"], en["credit"]) == ("¥0.00", "¥0.00", "¥0.00")
    zh = header_of(client_for(member.user, "zh-hans").get(f"/leases/{lease.pk}/").content.decode())
    assert zh["reason"] == "尚未计费：验收测试尚未通过。"


def _queries(user) -> int:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as queries:
        leases_header(user=user, instant=NOW)
    return len(queries)


def test_the_header_of_many_leases_reads_a_fixed_number_of_queries(
    django_assert_max_num_queries,
):
    # selectors.lease_overview, whose rows the header sums: leases, terms, the pairs'
    # latest runs, open incidents, and the lease months' terms, assignments, acceptances,
    # rollups and traffic samples: nine, whether two leases or twenty (half of them
    # 95计费, half accepted mid-month).
    staff = StaffFactory()
    member = MembershipFactory(role=Role.VIEWER)
    breached_lease(member.tenant, "LX-2026-910")
    p95_lease(member.tenant, "ZY-2026-910")
    few = _queries(staff)
    for index in range(9):
        breached_lease(member.tenant, f"LX-2026-92{index}")
        p95_lease(member.tenant, f"ZY-2026-92{index}")
    assert Lease.objects.count() == 20
    assert _queries(staff) == few == 9
    with django_assert_max_num_queries(9):
        header = leases_header(user=staff, instant=NOW)
    assert header is not None and header.counts == {"breached": 10, "no_data": 10}
    # Ten times each lease's own figures.
    assert header.credit == D("-20416.70")
    assert header.to_date == D("463423.30")
    assert header.projected == D("780266.60")


@pytest.mark.parametrize(
    ("up", "down", "degraded", "status", "reason", "zh"),
    [
        # 60 of 60 minutes up, no degraded minute: 100 % against the 99.5 % level.
        (60, 0, 0, "meeting", "Availability 100 % ≥ 99.5 % SLA.", "可用率 100 % ≥ SLA 99.5 %。"),
        # Up all hour, 12 minutes of it in a failed throughput slot (weight 0: still up).
        (
            60,
            0,
            12,
            "degraded",
            "Availability 100 % ≥ 99.5 % SLA. 12 degraded minutes this month.",
            "可用率 100 % ≥ SLA 99.5 %。本月降级 12 分钟。",
        ),
    ],
    ids=["meeting", "degraded"],
)
def test_a_month_at_or_above_the_sla_is_meeting_or_degraded(up, down, degraded, status, reason, zh):
    member = MembershipFactory(role=Role.VIEWER)
    lease = active(make_lease(tenant=member.tenant, nodes=[NodeFactory()]))
    HourlyRollup.objects.create(
        lease=lease,
        kind=ProbeKind.LINK,
        hour=datetime(2026, 11, 12, tzinfo=UTC),
        passed=1,
        available_minutes=up,
        unavailable_minutes=down,
        degraded_minutes=degraded,
    )
    HourlyRollup.objects.create(
        lease=lease, kind=ProbeKind.THROUGHPUT, hour=datetime(2026, 11, 12, tzinfo=UTC), passed=12
    )
    # Measured half an hour ago: without it the month in progress says no data
    # (portal.lease_status: nothing recent says the lease meets its contract).
    make_run(lease, slot=NOW - timedelta(minutes=30), measured_bps=98 * 10**9)
    page = client_for(member.user).get(f"/leases/{lease.pk}/").content.decode()
    header = header_of(page)
    assert (header["status"], header["reason"]) == (status, reason)
    # A whole month of rent and fee, no credit: 45,000.00 + 6,000.00; so far 65 %.
    assert (header["to-date"], header["projected"], header["credit"]) == (
        "¥33,150.00",
        "¥51,000.00",
        "¥0.00",
    )
    chinese = client_for(member.user, "zh-hans").get(f"/leases/{lease.pk}/").content.decode()
    assert header_of(chinese)["reason"] == zh
