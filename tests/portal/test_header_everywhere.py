# ruff: noqa: RUF001 (the Chinese strings' full-width punctuation is the point)
"""The month header on every lease page (the lease, its SLA history, an incident, its
evidence) and on the tenant's invoices list, each with the figures of the lease page and
of the draft invoice; and one status rule (portal.lease_status) for the header and the
overview's and the fleet's row badges. Figures counted by hand in
tests/portal/test_month_header.py: the breached lease's month to date ¥16,858.33,
projection ¥32,666.66, credit ¥-2,041.67."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.choices import Role
from billing.models import Evidence, HourlyRollup
from incidents.choices import FabricIncidentKind, IncidentState
from incidents.models import Incident
from leases.choices import ProbeKind
from tests.factories import MembershipFactory, NodeFactory, StaffFactory, make_lease, make_run
from tests.portal.support import NOW, active, client_for
from tests.portal.test_evidence_pages import upload
from tests.portal.test_month_header import breached_lease, header_of

pytestmark = pytest.mark.django_db

BREACHED = {
    "status": "breached",
    "reason": "Availability 91.667 % < 99.5 % SLA: a credit of ¥2,041.67 is due.",
    "open-incidents": "1",
    "to-date": "¥16,858.33",
    "projected": "¥32,666.66",
    "credit": "¥-2,041.67",
}
FIELDS = tuple(BREACHED)


def shown(client, url: str, status: int = 200) -> dict[str, str]:  # type: ignore[no-untyped-def]
    response = client.get(url)
    assert response.status_code == status, url
    header = header_of(response.content.decode())
    # Within the page's first content: before anything but the title and the page's lead.
    assert int(header["position"]) < response.content.decode().index("</h1>") + 400, url
    return {field: header[field] for field in FIELDS}


def test_every_lease_page_and_the_invoices_list_show_the_same_header():
    member = MembershipFactory(role=Role.VIEWER)
    lease = breached_lease(member.tenant)
    incident = lease.incidents.get()
    client = client_for(member.user)
    for url, status in [
        (f"/leases/{lease.pk}/", 200),
        (f"/leases/{lease.pk}/sla/", 200),
        (f"/leases/{lease.pk}/incidents/{incident.pk}/", 200),
        (f"/leases/{lease.pk}/evidence/new/", 403),  # a viewer reads the guide only
    ]:
        assert shown(client, url, status) == BREACHED, url
    # The tenant's pages sum its one lease: the same figures, the reason names the lease.
    overview = shown(client, "/")
    assert {k: overview[k] for k in ("to-date", "projected", "credit", "open-incidents")} == {
        k: BREACHED[k] for k in ("to-date", "projected", "credit", "open-incidents")
    }
    assert shown(client, "/invoices/") == overview
    # In Chinese, the SLA page's header reads as the lease page's.
    zh = client_for(member.user, "zh-hans")
    sla = shown(zh, f"/leases/{lease.pk}/sla/")
    assert sla["reason"] == "可用率 91.667 % < SLA 99.5 %：应赔付 ¥2,041.67。"
    assert sla == shown(zh, f"/leases/{lease.pk}/")


def test_a_past_month_on_the_sla_page_has_that_months_header():
    member = MembershipFactory(role=Role.VIEWER)
    lease = breached_lease(member.tenant)
    html = client_for(member.user).get(f"/leases/{lease.pk}/sla/?period=2026-10").content.decode()
    header = header_of(html)
    # October: before the lease (active from 11-01): nothing billed, nothing owed; the open
    # incident is still counted, as on the lease page's October.
    assert (header["status"], header["reason"]) == ("no_data", "Nothing is billed in 2026-10.")
    assert (header["to-date"], header["projected"], header["credit"]) == ("¥0.00",) * 3
    assert "This month: 2026-10" in html


def test_the_evidence_page_shows_the_lease_pages_header():
    admin = MembershipFactory(role=Role.ADMIN)
    nodes = [NodeFactory(hostname="gz-a100-01"), NodeFactory(hostname="gz-a100-02")]
    lease = active(make_lease(tenant=admin.tenant, reference="ZY-2026-201", nodes=nodes))
    client = client_for(admin.user)
    assert upload(client, lease).status_code == 302
    evidence = Evidence.objects.get()
    detail = shown(client, f"/leases/{lease.pk}/evidence/{evidence.pk}/")
    assert detail == shown(client, f"/leases/{lease.pk}/")
    assert detail["status"] == "no_data"
    assert detail["reason"] == "No measurement in this month's billed window yet."


def _count(client, url: str) -> int:  # type: ignore[no-untyped-def]
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


def test_the_header_adds_a_fixed_number_of_queries():
    # More open incidents, more leases, more months: the same queries (no N+1).
    member = MembershipFactory(role=Role.VIEWER)
    lease = breached_lease(member.tenant)
    client = client_for(member.user)
    client.get("/")  # warm the session
    pages = [
        f"/leases/{lease.pk}/sla/",
        f"/leases/{lease.pk}/incidents/{lease.incidents.get().pk}/",
        "/invoices/",
    ]
    before = {url: _count(client, url) for url in pages}
    node = lease.assignments.first().node
    for hour in range(3):
        Incident.objects.create(
            lease=lease,
            terms=lease.terms.get(),
            kind=ProbeKind.LINK,
            target=f"{node.hostname}-{hour}",
            pattern="node",
            state=IncidentState.OPEN,
            opened_at=NOW - timedelta(hours=hour + 1),
        )
    for index in range(3):
        breached_lease(member.tenant, f"LX-2026-95{index}")
    assert {url: _count(client, url) for url in pages} == before


def _month(lease, *, up: int = 60, degraded: int = 0, fresh: bool = True) -> None:  # type: ignore[no-untyped-def]
    hour = datetime(2026, 11, 12, tzinfo=UTC)
    HourlyRollup.objects.create(
        lease=lease,
        kind=ProbeKind.LINK,
        hour=hour,
        passed=1,
        available_minutes=up,
        degraded_minutes=degraded,
    )
    HourlyRollup.objects.create(lease=lease, kind=ProbeKind.THROUGHPUT, hour=hour, passed=12)
    if fresh:
        make_run(lease, slot=NOW - timedelta(minutes=30), measured_bps=98 * 10**9)


def _badges(html: str) -> dict[str, tuple[str, str]]:
    """reference -> (status, reason) of each row's badge."""
    import re
    from html import unescape

    rows = {}
    for row in re.findall(r"<tr[^>]*data-status=.*?</tr>", html, re.S):
        reference = re.search(r'href="/leases/\d+/">([\w-]+)</a>', row).group(1)
        status, reason = re.search(r'data-status="(\w+)" title="([^"]*)"', row).groups()
        rows[reference] = (status, unescape(reason))
    return rows


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_header_and_the_row_badges_agree(language):
    member = MembershipFactory(role=Role.VIEWER)
    tenant = member.tenant
    meeting = active(make_lease(tenant=tenant, reference="A-MEETING", nodes=[NodeFactory()]))
    _month(meeting)
    degraded = active(make_lease(tenant=tenant, reference="B-DEGRADED", nodes=[NodeFactory()]))
    _month(degraded, degraded=12)
    breached = breached_lease(tenant, "C-BREACHED")
    # 100 % so far, but nothing measured for hours: not called meeting.
    stale = active(make_lease(tenant=tenant, reference="D-STALE", nodes=[NodeFactory()]))
    _month(stale, fresh=False)
    empty = active(make_lease(tenant=tenant, reference="E-EMPTY", nodes=[NodeFactory()]))
    client = client_for(member.user, language)
    rows = _badges(client.get("/").content.decode())
    fleet = _badges(
        client_for(StaffFactory(), language).get(reverse("portal:fleet")).content.decode()
    )
    expected = {
        "A-MEETING": "meeting",
        "B-DEGRADED": "degraded",
        "C-BREACHED": "breached",
        "D-STALE": "no_data",
        "E-EMPTY": "no_data",
    }
    for lease in (meeting, degraded, breached, stale, empty):
        header = header_of(client.get(f"/leases/{lease.pk}/").content.decode())
        badge = (header["status"], header["reason"])
        assert badge == rows[lease.reference] == fleet[lease.reference], lease.reference
        assert header["status"] == expected[lease.reference]
    if language == "en":
        assert rows["A-MEETING"][1] == "Availability 100 % ≥ 99.5 % SLA."
        assert rows["B-DEGRADED"][1] == (
            "Availability 100 % ≥ 99.5 % SLA. 12 degraded minutes this month."
        )
        assert rows["D-STALE"][1] == (
            "Nothing measured within twice the probe cadence. Availability 100 % ≥ 99.5 % SLA."
        )
        assert rows["E-EMPTY"][1] == "No measurement in this month's billed window yet."
    else:
        assert rows["D-STALE"][1] == "两倍探测周期内没有测量。可用率 100 % ≥ SLA 99.5 %。"
    # A fabric-health incident open now on the meeting lease: degraded, in both places.
    Incident.objects.create(
        lease=meeting,
        terms=meeting.terms.get(),
        kind=FabricIncidentKind.TELEMETRY,
        target="leaf-1",
        pattern="node",
        state=IncidentState.OPEN,
        opened_at=NOW - timedelta(hours=1),
    )
    header = header_of(client.get(f"/leases/{meeting.pk}/").content.decode())
    row = _badges(client.get("/").content.decode())["A-MEETING"]
    assert (header["status"], header["reason"]) == row
    assert row[0] == "degraded"
    if language == "en":
        assert row[1] == "1 incident is open now. Availability 100 % ≥ 99.5 % SLA."
