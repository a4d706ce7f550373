"""Time to repair (issue 32 item 7): each network fault's fault, acknowledged, mitigated and
resolved instants, and a lease-month's mean time to repair, hand-computed. Times below are
Asia/Shanghai (``at``); November 2026 there runs from 2026-11-01 00:00 to 2026-12-01 00:00."""

from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from rest_framework.test import APIClient

from accounts.choices import Role
from billing.reports import sla_report
from incidents import repair
from incidents.models import Incident
from tests.factories import MembershipFactory, UserFactory, at, make_lease
from tests.portal.support import client_for

pytestmark = pytest.mark.django_db


def _incident(lease, kind, opened, closed=None, **fields):  # type: ignore[no-untyped-def]
    return Incident.objects.create(
        lease=lease,
        kind=kind,
        target="n1>n2",
        pattern="ring",
        state="closed" if closed else "open",
        opened_at=opened,
        closed_at=closed,
        rule="r",
        terms=lease.terms.get(),
        **fields,
    )


@pytest.fixture
def lease():
    return make_lease(reference="ZY-2026-777", starts_at=at("2026-10-01 00:00"))


@pytest.fixture
def november(lease):
    """A 90-minute throughput fault acknowledged after 7.5 minutes; a 45-minute fabric
    health fault; a link fault that began in October and was resolved 20 minutes later, in
    November's first minutes; a fault resolved at December's first instant (December's);
    a measurement-integrity dispute and a metering gap (not repairs); one still open."""
    staff = UserFactory(username="noc", is_staff=True)
    return {
        "a": _incident(
            lease,
            "throughput",
            at("2026-11-03 10:00"),
            at("2026-11-03 11:30"),
            acknowledged_at=at("2026-11-03 10:07:30"),
            acknowledged_by=staff,
            mitigated_at=at("2026-11-03 10:20"),
            mitigated_by=staff,
        ),
        "b": _incident(lease, "telemetry", at("2026-11-10 02:00"), at("2026-11-10 02:45")),
        "d": _incident(lease, "link", at("2026-10-31 23:50"), at("2026-11-01 00:10")),
        "e": _incident(lease, "latency", at("2026-11-30 23:00"), at("2026-12-01 00:00")),
        "integrity": _incident(lease, "integrity", at("2026-11-05 00:00"), at("2026-11-05 09:00")),
        "gap": _incident(lease, "metering_gap", at("2026-11-06 00:00"), at("2026-11-09 00:00")),
        "open": _incident(lease, "throughput", at("2026-11-20 08:00")),
    }


def test_a_months_mean_time_to_repair_by_hand(lease, november):
    figures = repair.time_to_repair(
        Incident.objects.filter(lease=lease),
        start=at("2026-11-01 00:00"),
        end=at("2026-12-01 00:00"),
    )
    # Resolved in November: a (90 min), b (45 min), d (20 min: 23:50 to 00:10, whole).
    # e ends at December's first instant (December's); integrity and gap are no repairs.
    # Mean (90 + 45 + 20) / 3 = 51.666... -> 51.7; acknowledged: a, after 7.5 min.
    assert figures == repair.TimeToRepair(
        resolved=3,
        mean_minutes=Decimal("51.7"),
        longest_minutes=Decimal("90.0"),
        acknowledged=1,
        mean_acknowledge_minutes=Decimal("7.5"),
    )
    december = repair.time_to_repair(
        Incident.objects.filter(lease=lease),
        start=at("2026-12-01 00:00"),
        end=at("2027-01-01 00:00"),
    )
    assert (december.resolved, december.mean_minutes) == (1, Decimal("60.0"))
    assert repair.repair_minutes(november["open"]) is None


def test_the_sla_report_carries_each_faults_instants_and_the_month(lease, november):
    report = sla_report(lease=lease, period="2026-11", now=at("2026-12-02 00:00"))
    assert report["time_to_repair"] == {
        "resolved": 3,
        "mean_minutes": "51.7",
        "longest_minutes": "90.0",
        "acknowledged": 1,
        "mean_acknowledge_minutes": "7.5",
    }
    row = next(item for item in report["incidents"] if item["id"] == november["a"].pk)
    assert row["acknowledged_at"] == "2026-11-03T02:07:30+00:00"  # 10:07:30 in Shanghai
    assert row["mitigated_at"] == "2026-11-03T02:20:00+00:00"
    assert row["repair_minutes"] == "90.0"


def test_acknowledge_then_mitigate_and_the_refusals(lease):
    user = UserFactory(username="noc2", is_staff=True)
    fault = _incident(lease, "throughput", at("2026-11-20 08:00"))
    acknowledged = repair.acknowledge(
        incident_id=fault.pk, user=user, note="Checking leaf2.", at=at("2026-11-20 08:04")
    )
    assert (acknowledged.acknowledged_at, acknowledged.acknowledged_by) == (
        at("2026-11-20 08:04"),
        user,
    )
    with pytest.raises(repair.RepairError, match="already acknowledged"):
        repair.acknowledge(incident_id=fault.pk, user=user, at=at("2026-11-20 08:05"))
    with pytest.raises(repair.RepairError, match="before it was acknowledged"):
        repair.mitigate(incident_id=fault.pk, user=user, at=at("2026-11-20 08:03"))
    mitigated = repair.mitigate(
        incident_id=fault.pk, user=user, note="Traffic off port 3.", at=at("2026-11-20 08:30")
    )
    assert mitigated.mitigated_at == at("2026-11-20 08:30")
    assert mitigated.repair_note == "Checking leaf2.\nTraffic off port 3."
    # Mitigating acknowledges too when nobody had; never before the fault; never once resolved.
    other = _incident(lease, "link", at("2026-11-21 08:00"))
    with pytest.raises(repair.RepairError, match="before its fault"):
        repair.mitigate(incident_id=other.pk, user=user, at=at("2026-11-21 07:59"))
    both = repair.mitigate(incident_id=other.pk, user=user, at=at("2026-11-21 08:10"))
    assert both.acknowledged_at == both.mitigated_at == at("2026-11-21 08:10")
    closed = _incident(lease, "throughput", at("2026-11-22 08:00"), at("2026-11-22 09:00"))
    with pytest.raises(repair.RepairError, match="resolved"):
        repair.acknowledge(incident_id=closed.pk, user=user)
    dispute = _incident(lease, "integrity", at("2026-11-23 08:00"))
    with pytest.raises(repair.RepairError, match="not a network fault"):
        repair.acknowledge(incident_id=dispute.pk, user=user)


def _staff(username: str, *codenames: str):  # type: ignore[no-untyped-def]
    user = UserFactory(username=username, is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return type(user).objects.get(pk=user.pk)


def _api(user) -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(user)
    return client


def test_the_api_lets_staff_with_the_permission_state_it_and_no_one_else(lease):
    fault = _incident(lease, "throughput", at("2026-11-20 08:00"))
    url = f"/api/v1/incidents/{fault.pk}/acknowledge/"
    admin = MembershipFactory(tenant=lease.tenant, role=Role.ADMIN).user
    assert _api(admin).post(url, {"note": "x"}, format="json").status_code == 403
    assert _api(_staff("plain")).post(url, {}, format="json").status_code == 403
    noc = _staff("noc3", "acknowledge_incident", "mitigate_incident")
    answer = _api(noc).post(url, {"note": "On it."}, format="json")
    assert answer.status_code == 200
    assert answer.json()["acknowledged_at"] is not None
    assert answer.json()["repair_note"] == "On it."
    again = _api(noc).post(url, {}, format="json")
    assert again.status_code == 409
    assert "already acknowledged" in again.json()["error"]["message"]
    seen = _api(admin).get(f"/api/v1/incidents/{fault.pk}/").json()
    assert seen["acknowledged_at"] == answer.json()["acknowledged_at"]
    assert seen["repair_minutes"] is None  # still open


def test_the_sla_page_shows_the_months_time_to_repair(lease, november):
    viewer = MembershipFactory(tenant=lease.tenant, role=Role.VIEWER).user
    page = client_for(viewer).get(f"/leases/{lease.pk}/sla/?period=2026-11").content.decode()
    assert "Mean time to repair" in page
    assert "51.7 min" in page
    assert "3 network faults resolved, the longest in 90.0 min" in page
    assert "acknowledged in 7.5 min on average" in page
    assert "51.7 min (3 faults)" in page  # the month-by-month table
    chinese = client_for(viewer, "zh-hans").get(f"/leases/{lease.pk}/sla/?period=2026-11")
    assert "平均修复时间" in chinese.content.decode()


def test_rounding_is_half_up_on_the_exact_mean(lease):
    # 10 min 3 s and 10 min 6 s: mean 10.075 min -> 10.1 (half-up on the exact mean).
    _incident(lease, "throughput", at("2026-11-02 00:00"), at("2026-11-02 00:10:03"))
    _incident(lease, "link", at("2026-11-03 00:00"), at("2026-11-03 00:10:06"))
    figures = repair.time_to_repair(
        Incident.objects.filter(lease=lease),
        start=at("2026-11-01 00:00"),
        end=at("2026-12-01 00:00"),
    )
    assert (figures.mean_minutes, figures.longest_minutes) == (Decimal("10.1"), Decimal("10.1"))
