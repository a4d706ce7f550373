"""The lease month (billing/lease_month.py): one billed window and one set of figures that
the invoice, the SLA report, the API, the portal's SLA history and the audit bundle all
show. Figures counted by hand; November 2026 in Asia/Shanghai is 2,592,000 s."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D

import pytest
from rest_framework.test import APIClient

from accounts.choices import Role
from benchmarks.choices import Pattern, RunState, Tool, Trigger, Verdict
from benchmarks.models import ProbeRun
from billing import invoicing
from billing.audit.bundle import build_bundle
from billing.choices import LineKind
from billing.lease_month import lease_month
from billing.models import HourlyRollup
from billing.reports import sla_report
from leases import services
from leases.choices import LeaseStatus, ProbeKind
from tests.factories import MembershipFactory, NodeFactory, amend_acknowledged, at, make_lease
from tests.portal.support import client_for

pytestmark = pytest.mark.django_db

NOVEMBER = "2026-11"
ACCEPTED = at("2026-11-10 14:00")  # 2026-11-10T06:00Z


def _lease(tenant, **terms):  # type: ignore[no-untyped-def]
    lease = make_lease(tenant=tenant, nodes=NodeFactory.create_batch(1), **terms)
    return services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))


def _accept(lease, finished: datetime) -> None:  # type: ignore[no-untyped-def]
    node = lease.assignments.first().node
    ProbeRun.objects.create(
        lease=lease,
        kind=ProbeKind.LINK,
        tool=Tool.ETHTOOL,
        target=node.hostname,
        pattern=Pattern.NODE,
        trigger=Trigger.ACCEPTANCE,
        slot_at=finished - timedelta(minutes=5),
        deadline_at=finished + timedelta(hours=1),
        site=node.leaf_switch.fabric.site,
        state=RunState.OK,
        verdict=Verdict.PASS,
        finished_at=finished,
    )


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


def _rollups(lease) -> None:  # type: ignore[no-untyped-def]
    """Before acceptance, 11-05 00:00Z: a whole hour down (60 min). After it: 11-12 00:00Z
    up 60 min with 10 passing throughput samples; 11-13 00:00Z up 50, down 10."""
    _link(lease, datetime(2026, 11, 5, tzinfo=UTC), up=0, down=60)
    _link(lease, datetime(2026, 11, 12, tzinfo=UTC), up=60)
    _link(lease, datetime(2026, 11, 13, tzinfo=UTC), up=50, down=10)
    HourlyRollup.objects.create(
        lease=lease, kind=ProbeKind.THROUGHPUT, hour=datetime(2026, 11, 12, tzinfo=UTC), passed=10
    )


@pytest.fixture
def member():
    return MembershipFactory(role=Role.VIEWER)


def test_a_lease_accepted_mid_month_shows_one_window_and_one_availability_everywhere(
    member, monkeypatch
):
    # Created 2026-11-01 00:00, billed from its acceptance on 11-10 14:00 (Shanghai) to the
    # month's end: 20 days 10 hours = 1,764,000 s. Availability over that window: the down
    # hour of 11-05 is before it, so up 110 of 120 minutes = 91.6666... -> 91.667 %
    # (acceptance-blind, from 11-01: 110 of 180 = 61.111 %). Throughput 10/10 = 100 %.
    # Credit compliance = min(100, 91.667) = 91.667 < 95: the 50 % tier. Network fee
    # 6,000 x 1,764,000 / 2,592,000 = 4,083.333 -> 4,083.33; credit 50 % = 2,041.665 ->
    # -2,041.67. Rent 45,000 x 1,764,000 / 2,592,000 = 30,625.00.
    lease = _lease(member.tenant, billing_starts_on_acceptance=True)
    _accept(lease, ACCEPTED)
    _rollups(lease)

    month = lease_month(lease, NOVEMBER, instant=at("2026-12-02 00:00"))
    assert (month.window.start, month.window.end) == (ACCEPTED, at("2026-12-01 00:00"))
    assert month.window.accepted == ACCEPTED
    assert month.availability.percent == D("91.667")
    assert (month.availability.available_minutes, month.availability.unavailable_minutes) == (
        110,
        10,
    )
    assert month.credit is not None and month.credit.result.amount == D("-2041.67")

    # The invoice.
    lines = invoicing.lease_lines(lease=lease, period=NOVEMBER, zone="Asia/Shanghai")
    by_kind = {line.kind: line for line in lines}
    assert by_kind[LineKind.NODE_RENT].amount == D("30625.00")
    assert by_kind[LineKind.NETWORK_FEE].amount == D("4083.33")
    credit = by_kind[LineKind.SLA_CREDIT]
    assert credit.amount == D("-2041.67")
    assert (credit.detail["window_start"], credit.detail["window_end"]) == (
        "2026-11-10T06:00:00Z",
        "2026-11-30T16:00:00Z",
    )
    assert credit.detail["availability"]["percent"] == "91.667"

    # The SLA report.
    report = sla_report(lease=lease, period=NOVEMBER, now=at("2026-12-02 00:00"))
    assert (report["billed_from"], report["billed_until"]) == (
        "2026-11-10T06:00:00+00:00",
        "2026-11-30T16:00:00+00:00",
    )
    assert report["availability"]["percent"] == "91.667"
    assert report["credit"]["amount"] == "-2041.67"

    # The API.
    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_authenticate(member.user)
    answer = api.get(f"/api/v1/leases/{lease.pk}/sla/", {"period": NOVEMBER})
    assert answer.status_code == 200
    assert answer.json()["billed_from"] == "2026-11-10T06:00:00+00:00"
    assert answer.json()["availability"]["percent"] == "91.667"

    # The portal's SLA history: the November row is the same window and figure.
    monkeypatch.setattr("portal.selectors.now", lambda: at("2026-12-02 00:00"))
    response = client_for(member.user).get(f"/leases/{lease.pk}/sla/", {"period": NOVEMBER})
    assert response.status_code == 200
    rows = {row.period: row for row in response.context["rows"]}
    assert list(rows) == ["2026-12", NOVEMBER]
    november = rows[NOVEMBER]
    assert (november.window.start, november.window.end) == (ACCEPTED, at("2026-12-01 00:00"))
    assert november.summary.availability.percent == D("91.667")
    assert november.credit.amount == D("-2041.67")
    assert "91.667 %" in response.content.decode()
    assert "61.111" not in response.content.decode()

    # The audit bundle.
    bundle = build_bundle(lease=lease, period=NOVEMBER, now=at("2026-12-02 00:00"))
    stamp = "2026-11-10T06:00:00.000000Z"
    assert bundle["billing_window"]["start"] == bundle["billing_window"]["billing_start"] == stamp
    assert bundle["compliance"]["window_start"] == stamp
    assert bundle["compliance"]["availability"]["percent"] == "91.667"


def test_a_month_without_acceptance_yet_bills_nothing_and_shows_no_figures(member):
    # The terms bill from acceptance and none has passed: no window, no lines, no credit,
    # and the rollups measured meanwhile (180 minutes) are not the month's figures.
    lease = _lease(member.tenant, billing_starts_on_acceptance=True)
    _rollups(lease)
    month = lease_month(lease, NOVEMBER, instant=at("2026-12-02 00:00"))
    assert not month.billed and month.window.awaiting_acceptance
    assert month.segments == () and month.credit is None
    assert month.availability.percent is None
    assert invoicing.lease_lines(lease=lease, period=NOVEMBER, zone="Asia/Shanghai") == []
    report = sla_report(lease=lease, period=NOVEMBER, now=at("2026-12-02 00:00"))
    assert (report["billed_from"], report["billed_until"]) == (None, None)
    assert report["not_billed"] == "the acceptance the terms require has not passed"
    assert report["availability"]["percent"] is None
    assert report["credit"] is None


def test_a_lease_ending_at_the_months_last_instant(member):
    # Ends 2026-12-01 00:00 (the month's end, exclusive): November is billed whole,
    # 2,592,000 s, rent 45,000.00; December bills nothing. One ending a second earlier,
    # 11-30 23:59:59: 2,591,999 s, rent 45,000 x 2,591,999 / 2,592,000 = 44,999.98264
    # -> 44,999.98.
    whole = _lease(member.tenant, ends_at=at("2026-12-01 00:00"))
    month = lease_month(whole, NOVEMBER, instant=at("2026-12-02 00:00"))
    assert (month.window.start, month.window.end) == (
        at("2026-11-01 00:00"),
        at("2026-12-01 00:00"),
    )
    assert sum(segment.seconds for segment in month.segments) == 2_592_000
    assert not lease_month(whole, "2026-12", instant=at("2026-12-02 00:00")).billed
    report = sla_report(lease=whole, period="2026-12", now=at("2026-12-02 00:00"))
    assert report["billed_from"] is None
    assert report["not_billed"] == "the lease was not billed in this period"

    short = _lease(member.tenant, ends_at=at("2026-11-30 23:59:59"))
    month = lease_month(short, NOVEMBER, instant=at("2026-12-02 00:00"))
    assert month.window.end == at("2026-11-30 23:59:59")
    assert month.segments[0].seconds == 2_591_999
    lines = invoicing.lease_lines(lease=short, period=NOVEMBER, zone="Asia/Shanghai")
    assert lines[0].kind == LineKind.NODE_RENT and lines[0].amount == D("44999.98")


def test_an_amendment_mid_month_gives_two_segments_everywhere(member):
    # v2 from 11-21 00:00: segments [11-01, 11-21) under v1 (1,728,000 s) and
    # [11-21, 12-01) under v2 (864,000 s); the report lists both versions.
    lease = _lease(member.tenant)
    amend_acknowledged(
        lease=lease,
        effective_from=at("2026-11-21 00:00"),
        changes={"network_fee_per_month": D("10000.00")},
        reason="Upgraded.",
    )
    month = lease_month(lease, NOVEMBER, instant=at("2026-12-02 00:00"))
    assert [(s.terms.version, s.start, s.end, s.seconds) for s in month.segments] == [
        (1, at("2026-11-01 00:00"), at("2026-11-21 00:00"), 1_728_000),
        (2, at("2026-11-21 00:00"), at("2026-12-01 00:00"), 864_000),
    ]
    assert [terms.version for terms in month.terms] == [1, 2]
    report = sla_report(lease=lease, period=NOVEMBER, now=at("2026-12-02 00:00"))
    assert [version["version"] for version in report["terms_versions"]] == [1, 2]
    fees = [
        line.amount
        for line in invoicing.lease_lines(lease=lease, period=NOVEMBER, zone="Asia/Shanghai")
        if line.kind == LineKind.NETWORK_FEE
    ]
    assert fees == [D("4000.00"), D("3333.33")]  # 6,000 x 20/30; 10,000 x 10/30


def test_without_a_credit_base_the_portal_history_still_counts_from_acceptance(member, monkeypatch):
    # No network fee: no credit base, so no credit. The history's November row used to be
    # evaluated over the acceptance-blind window (110 of 180 minutes = 61.111 %); it is the
    # billed window's 110 of 120 = 91.667 %, as the SLA report says.
    lease = _lease(
        member.tenant, billing_starts_on_acceptance=True, network_fee_per_month=D("0.00")
    )
    _accept(lease, ACCEPTED)
    _rollups(lease)
    report = sla_report(lease=lease, period=NOVEMBER, now=at("2026-12-02 00:00"))
    assert report["credit"] is None
    assert report["availability"]["percent"] == "91.667"
    monkeypatch.setattr("portal.selectors.now", lambda: at("2026-12-02 00:00"))
    response = client_for(member.user).get(f"/leases/{lease.pk}/sla/", {"period": NOVEMBER})
    november = {row.period: row for row in response.context["rows"]}[NOVEMBER]
    assert november.credit is None
    assert november.summary.availability.percent == D("91.667")
    assert "61.111" not in response.content.decode()
