"""Provider pages: fleet, fabric health, network cost share, open incidents. Every figure
below is worked out by hand from the runs and terms the test creates."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from billing.ingest import ingest_all
from incidents.choices import IncidentState
from incidents.models import Incident
from leases.choices import SwitchRole
from tests.factories import (
    FabricFactory,
    MembershipFactory,
    NodeFactory,
    StaffFactory,
    SwitchFactory,
    TenantFactory,
    UserFactory,
    at,
    make_lease,
    make_run,
)
from tests.portal.support import active, client_for

pytestmark = pytest.mark.django_db

PAGES = ["/provider/", "/provider/fabrics/", "/provider/cost-share/", "/provider/incidents/"]
GIGA = 10**9


@pytest.fixture
def staff():
    return client_for(StaffFactory())


def hourly_lease(reference, *, failing=(), hours=20, tenant=None, start=None, **terms):
    """An active lease with ``hours`` hourly throughput runs from 2026-11-03 00:00, those
    in ``failing`` at 40 Gbit/s (fail), the others at 98 Gbit/s (pass). Once every lease
    is made, ``ingest_all`` (the ingest reads runs in finish order from a cursor, so it runs
    once, last): three failures in a row open an incident, the next pass closes it."""
    lease = active(
        make_lease(
            tenant=tenant or TenantFactory(name=f"Tenant of {reference}"),
            reference=reference,
            nodes=[NodeFactory()],
            **terms,
        )
    )
    start = start or at("2026-11-03 00:00")
    for hour in range(hours):
        fail = hour in failing
        make_run(
            lease,
            slot=start + timedelta(hours=hour),
            verdict="fail" if fail else "pass",
            measured_bps=(40 if fail else 98) * GIGA,
        )
    return lease


# --------------------------------------------------------------------------------------
# Access
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PAGES)
def test_a_tenant_user_gets_404_on_every_provider_page(path):
    member = MembershipFactory()
    hourly_lease("ZY-OWN-1", tenant=member.tenant)
    ingest_all(notify=False)
    assert client_for(member.user).get(path).status_code == 404
    assert client_for(UserFactory()).get(path).status_code == 404  # no tenant at all


@pytest.mark.parametrize("path", PAGES)
def test_anonymous_users_are_sent_to_log_in(path):
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


@pytest.mark.parametrize("path", PAGES)
def test_staff_get_every_provider_page(staff, path):
    assert staff.get(path).status_code == 200


def test_the_provider_nav_group_is_shown_to_staff_only(staff):
    member = MembershipFactory()
    assert 'href="/provider/fabrics/"' in staff.get("/").content.decode()
    html = client_for(member.user).get("/").content.decode()
    assert "/provider/" not in html and "Provider" not in html


# --------------------------------------------------------------------------------------
# Fleet
# --------------------------------------------------------------------------------------


@pytest.fixture
def fleet():
    leases = {
        # 85% (17 of 20), incident still open at the end: breached.
        "breached": hourly_lease("A-BREACHED", failing={17, 18, 19}),
        # 85%, incident opened and closed this month: the month earns a credit, breached
        # (portal.lease_status: the month header's rule, not only an incident open now).
        "closed_85": hourly_lease("B-CLOSED-85", failing={5, 6, 7}),
        # 70% (14 of 20), two closed incidents: breached too, and worse than 85%.
        "closed_70": hourly_lease("C-CLOSED-70", failing={2, 3, 4, 10, 11, 12}),
        # 100%: meeting.
        "meeting": hourly_lease("D-MEETING"),
    }
    ingest_all(notify=False)
    return leases


def fleet_rows(html: str) -> list[tuple[str, str]]:
    import re

    body = html.split('<table id="fleet"', 1)[1].split("<tbody>", 1)[1].split("</tbody>")[0]
    return re.findall(r'<tr data-status="(\w+)" data-lease="([^"]+)">', body)


def test_fleet_lists_every_active_lease_worst_first(staff, fleet):
    make_lease(reference="E-DRAFT")  # never activated: not in the fleet
    response = staff.get("/provider/")
    assert response.status_code == 200
    html = response.content.decode()
    assert fleet_rows(html) == [
        ("breached", "C-CLOSED-70"),  # lower compliance first within a status
        ("breached", "A-BREACHED"),  # 85 %, as B: by reference
        ("breached", "B-CLOSED-85"),
        # 100 %, but its last run (11-03) is weeks before the clock (11-20): not called
        # meeting without a measurement within twice the cadence (portal.lease_status).
        ("no_data", "D-MEETING"),
    ]
    assert "E-DRAFT" not in html
    assert "Tenant of A-BREACHED" in html
    assert "70.000 %" in html and "85.000 %" in html and "100.000 %" in html
    assert "100 Gbit/s" in html  # contracted
    assert "40 Gbit/s" in html  # latest measured of the breached lease
    assert "2026-11-03 19:00 (Asia/Shanghai)" in html  # latest run, in the tenant's zone


def test_fleet_reads_a_constant_number_of_queries(staff, fleet, django_assert_num_queries):
    staff.get("/provider/")  # warm the session
    # Session, user, then lease_overview's: leases, terms, the pairs' latest runs, open
    # incidents and the lease months' terms, assignments and rollups of the billed windows
    # (billing.lease_month.current_months), which the rows and the month header share.
    with django_assert_num_queries(9) as few:
        staff.get("/provider/")
    for index in range(3):
        hourly_lease(f"F-MORE-{index}", failing={0, 1, 2}, start=at("2026-11-05 00:00"))
    ingest_all(notify=False)
    with django_assert_num_queries(len(few.captured_queries)):
        html = staff.get("/provider/").content.decode()
    assert len(fleet_rows(html)) == 7


# --------------------------------------------------------------------------------------
# Fabric health
# --------------------------------------------------------------------------------------


@pytest.fixture
def fabrics():
    """Fabric "oversub" (3:1): leaf-a with n1, n2 (leased), leaf-b with n3 (leased) and n4
    (free). Fabric "flat" (1:1): leaf-c with n5, n6 (leased)."""
    oversub = FabricFactory(name="oversub", oversubscription=Decimal("3"))
    SwitchFactory(fabric=oversub, name="spine-1", role=SwitchRole.SPINE)
    SwitchFactory(fabric=oversub, name="spine-2", role=SwitchRole.SPINE)
    leaf_a = SwitchFactory(fabric=oversub, name="leaf-a")
    leaf_b = SwitchFactory(fabric=oversub, name="leaf-b")
    flat = FabricFactory(name="flat", site=oversub.site, oversubscription=Decimal("1"))
    leaf_c = SwitchFactory(fabric=flat, name="leaf-c")
    n1, n2 = NodeFactory(leaf_switch=leaf_a), NodeFactory(leaf_switch=leaf_a)
    n3, _n4 = NodeFactory(leaf_switch=leaf_b), NodeFactory(leaf_switch=leaf_b)
    n5, n6 = NodeFactory(leaf_switch=leaf_c), NodeFactory(leaf_switch=leaf_c)
    big = active(make_lease(reference="FAB-1", nodes=[n1, n2, n3]))
    small = active(make_lease(reference="FAB-2", nodes=[n5, n6]))
    slot = at("2026-11-19 00:00")
    # Cross-leaf n1>n3: 40, 40 (fail), 97 (pass); same-leaf n1>n2: 98, 98 (pass).
    for hour, (pair, nodes, gbps, verdict) in enumerate(
        [
            ("n1>n3", [n1, n3], 40, "fail"),
            ("n1>n3", [n1, n3], 40, "fail"),
            ("n1>n3", [n1, n3], 97, "pass"),
            ("n1>n2", [n1, n2], 98, "pass"),
            ("n1>n2", [n1, n2], 98, "pass"),
        ]
    ):
        make_run(
            big,
            slot=slot + timedelta(hours=hour),
            target=pair,
            nodes=nodes,
            verdict=verdict,
            measured_bps=gbps * GIGA,
        )
    # Not judged: an unreachable run (no verdict) counts nowhere.
    make_run(
        big, slot=slot + timedelta(hours=9), target="n1>n3", nodes=[n1, n3], state="unreachable"
    )
    # leaf-c: two passes at 99 inside the window, one failure 10 days ago (outside it).
    for hour in (0, 1):
        make_run(
            small,
            slot=slot + timedelta(hours=hour),
            target="n5>n6",
            nodes=[n5, n6],
            verdict="pass",
            measured_bps=99 * GIGA,
        )
    make_run(
        small,
        slot=at("2026-11-10 00:00"),
        target="n5>n6",
        nodes=[n5, n6],
        verdict="fail",
        measured_bps=10 * GIGA,
    )
    return oversub, flat


def leaf_row(html: str, name: str) -> str:
    return html.split(f'data-leaf="{name}"', 1)[1].split("</tr>", 1)[0]


def cells(row: str) -> list[str]:
    import re

    return [
        re.sub(r"<[^>]+>", "", cell).strip()
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    ]


def test_fabric_page_flags_the_leaves_with_failing_runs(staff, fabrics):
    oversub, flat = fabrics
    response = staff.get("/provider/fabrics/")
    assert response.status_code == 200
    html = response.content.decode()
    # leaf-a: 3 passed, 2 failed = 40.0 %; mean (40+40+97+98+98)/5 = 74.6 of 100 Gbit/s.
    row_a = leaf_row(html, "leaf-a")
    assert 'data-flagged="true"' in row_a
    assert cells(row_a)[1:] == ["2", "2", "3", "2", "40.0 %", "74.6 Gbit/s", "100 Gbit/s", "74.6 %"]
    # leaf-b: only the cross-leaf runs, 1 passed, 2 failed = 66.7 %; mean 177/3 = 59.
    row_b = leaf_row(html, "leaf-b")
    assert 'data-flagged="true"' in row_b
    assert cells(row_b)[1:] == ["2", "1", "1", "2", "66.7 %", "59 Gbit/s", "100 Gbit/s", "59.0 %"]
    # leaf-c: both nodes under it, each run counted once; the old failure is outside 7 days.
    row_c = leaf_row(html, "leaf-c")
    assert 'data-flagged="false"' in row_c
    assert cells(row_c)[1:] == ["2", "2", "2", "0", "0.0 %", "99 Gbit/s", "100 Gbit/s", "99.0 %"]
    # The 3:1 fabric fails under two leaves: its uplinks are suspect; the 1:1 one is not.
    sections = html.split('<section class="fabric"')[1:]
    oversub_html = next(s for s in sections if f'data-fabric="{oversub.pk}"' in s)
    flat_html = next(s for s in sections if f'data-fabric="{flat.pk}"' in s)
    assert 'data-uplink-suspect="true"' in oversub_html and "3:1" in oversub_html
    assert "2 spines" in oversub_html
    assert "Suspect the leaf-spine uplinks" in oversub_html
    assert "data-uplink-suspect" not in flat_html and "1:1" in flat_html


def test_fabric_page_reads_a_constant_number_of_queries(staff, fabrics, django_assert_num_queries):
    staff.get("/provider/fabrics/")
    with django_assert_num_queries(5) as few:
        staff.get("/provider/fabrics/")
    more = FabricFactory(name="more", oversubscription=Decimal("2"))
    for index in range(3):
        leaf = SwitchFactory(fabric=more, name=f"leaf-more-{index}")
        nodes = [NodeFactory(leaf_switch=leaf), NodeFactory(leaf_switch=leaf)]
        lease = active(make_lease(reference=f"MORE-{index}", nodes=nodes))
        make_run(lease, slot=at("2026-11-19 05:00"), nodes=nodes, verdict="fail", measured_bps=GIGA)
    with django_assert_num_queries(len(few.captured_queries)):
        html = staff.get("/provider/fabrics/").content.decode()
    assert html.count('class="leaf"') == 6


# --------------------------------------------------------------------------------------
# Network cost share
# --------------------------------------------------------------------------------------


@pytest.fixture
def billed():
    one = active(
        make_lease(
            reference="COST-1",
            tenant=TenantFactory(name="Alpha"),
            nodes=[NodeFactory(), NodeFactory()],
            network_fee_per_month=Decimal("6000.00"),
        )
    )
    two = active(
        make_lease(
            reference="COST-2",
            tenant=TenantFactory(name="Beta"),
            nodes=[NodeFactory()],
            network_fee_per_month=Decimal("22000.00"),
        )
    )
    make_lease(reference="COST-DRAFT", nodes=[NodeFactory()])  # drafts are never billed
    return one, two


def test_cost_share_per_lease_and_overall(staff, billed):
    response = staff.get("/provider/cost-share/?period=2026-11")
    assert response.status_code == 200
    html = response.content.decode()
    # COST-1: 2 nodes x ¥45,000 = ¥90,000 rent, ¥6,000 fee: 6,000 / 96,000 = 6.25 %.
    row = cells(html.split('data-lease="COST-1"', 1)[1].split("</tr>", 1)[0])
    assert row[1:] == ["Alpha", "¥90,000.00", "¥6,000.00", "¥0.00", "6.25 %"]
    # COST-2: ¥45,000 rent, ¥22,000 fee: 22,000 / 67,000 = 0.32836 -> 32.84 %.
    row = cells(html.split('data-lease="COST-2"', 1)[1].split("</tr>", 1)[0])
    assert row[1:] == ["Beta", "¥45,000.00", "¥22,000.00", "¥0.00", "32.84 %"]
    # Overall: 28,000 / (135,000 + 28,000) = 0.17178 -> 17.18 %.
    overall = html.split('<tr class="overall">', 1)[1].split("</tr>", 1)[0]
    assert "¥135,000.00" in overall and "¥28,000.00" in overall and "17.18 %" in overall
    assert "COST-DRAFT" not in html


def test_cost_share_defaults_to_the_current_month_in_shanghai(staff, billed):
    html = staff.get("/provider/cost-share/").content.decode()
    assert 'value="2026-11"' in html and "17.18 %" in html


def test_cost_share_of_a_month_without_billed_leases(staff, billed):
    response = staff.get("/provider/cost-share/?period=2026-10")
    assert response.status_code == 200
    assert "No lease is billed in this month." in response.content.decode()


@pytest.mark.parametrize("period", ["2026-13", "nonsense", "2026-1", "0001-01", "9999-12"])
def test_a_bad_period_is_a_400_page_with_the_form(staff, period):
    response = staff.get("/provider/cost-share/", {"period": period})
    assert response.status_code == 400
    html = response.content.decode()
    assert "The period must be a month written YYYY-MM" in html
    assert '<input id="period" name="period"' in html


# --------------------------------------------------------------------------------------
# Open incidents
# --------------------------------------------------------------------------------------


def test_open_incidents_lists_only_open_ones_oldest_first(staff):
    # Opens at hour 17 of 2026-11-03 (Shanghai) and stays open.
    later = hourly_lease("INC-LATER", failing={17, 18, 19})
    # In a UTC tenant: opens at hour 2 and stays open (all failing from hour 2).
    earlier = hourly_lease(
        "INC-EARLIER",
        failing=set(range(2, 20)),
        tenant=TenantFactory(name="Utc tenant", time_zone="UTC"),
    )
    closed = hourly_lease("INC-CLOSED", failing={5, 6, 7})
    ingest_all(notify=False)
    assert closed.incidents.get().state == IncidentState.CLOSED
    response = staff.get("/provider/incidents/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "INC-CLOSED" not in html
    assert html.index('data-lease="INC-EARLIER"') < html.index('data-lease="INC-LATER"')
    assert html.count('<tr class="incident"') == 2
    # Opened at the slot of the first violating run; shown in each tenant's own zone.
    earlier_incident = Incident.objects.get(lease=earlier)
    later_incident = Incident.objects.get(lease=later)
    assert earlier_incident.opened_at == at("2026-11-03 02:00")
    assert "2026-11-02 18:00 (UTC)" in html
    assert later_incident.opened_at == at("2026-11-03 17:00")
    assert "2026-11-03 17:00 (Asia/Shanghai)" in html
    assert "Utc tenant" in html and "40 Gbit/s" in html
    for run_id in later_incident.runs.values_list("pk", flat=True):
        assert f'href="/api/v1/probe-runs/{run_id}/raw/"' in html


def test_open_incidents_read_a_constant_number_of_queries(staff, django_assert_num_queries):
    hourly_lease("INC-1", failing={17, 18, 19})
    ingest_all(notify=False)
    staff.get("/provider/incidents/")
    with django_assert_num_queries(4) as few:
        staff.get("/provider/incidents/")
    for index in range(3):
        hourly_lease(f"INC-MORE-{index}", failing={17, 18, 19}, start=at("2026-11-05 00:00"))
    ingest_all(notify=False)
    with django_assert_num_queries(len(few.captured_queries)):
        html = staff.get("/provider/incidents/").content.decode()
    assert html.count('<tr class="incident"') == 4
