"""Honest status on the overview: the worst node pair's latest throughput, named; stale
data marked with its age; draft, ended and cancelled leases grey, never green. The status
is ``portal.lease_status.state``: the month so far (an hour of rollups, all passing, is a
month meeting the contract) and what holds now."""

from datetime import UTC, datetime, timedelta

import pytest
from django.template.loader import render_to_string

from accounts.choices import Role
from billing.models import HourlyRollup
from leases import services
from leases.choices import LeaseStatus, ProbeKind
from portal import lease_status, selectors
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run
from tests.portal.support import NOW, active, client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def member():
    return MembershipFactory(role=Role.VIEWER)


def meeting_month(lease) -> None:  # type: ignore[no-untyped-def]
    """An hour of November at 100 %: 60 link minutes up, 12 throughput samples passed."""
    hour = datetime(2026, 11, 5, tzinfo=UTC)
    HourlyRollup.objects.create(
        lease=lease, kind=ProbeKind.LINK, hour=hour, passed=1, available_minutes=60
    )
    HourlyRollup.objects.create(lease=lease, kind=ProbeKind.THROUGHPUT, hour=hour, passed=12)


def row_of(html: str, reference: str) -> str:
    start = html.index(f">{reference}</a>")
    return html[html.rindex("<tr", 0, start) : html.index("</tr>", start)]


def test_latest_measured_is_the_worst_pairs_latest_figure_named(member):
    lease = active(make_lease(tenant=member.tenant, reference="ZY-2026-601", nodes=[NodeFactory()]))
    meeting_month(lease)
    recent = NOW - timedelta(minutes=30)
    # Each pair's latest run counts: sz-02>sz-01 measured 99 an hour earlier, 41.5 now.
    make_run(lease, target="sz-02>sz-01", slot=recent - timedelta(hours=1), measured_bps=99 * 10**9)
    make_run(lease, target="sz-01>sz-02", slot=recent, measured_bps=97_900_000_000)
    make_run(lease, target="sz-02>sz-01", slot=recent, measured_bps=41_500_000_000, verdict="fail")
    make_run(lease, target="sz-03>sz-04", slot=recent, measured_bps=98_200_000_000)
    # A pair last measured 3 hours ago (twice the hourly cadence is 2 h) is not in the figure.
    make_run(lease, target="sz-05>sz-06", slot=NOW - timedelta(hours=3), measured_bps=10**9)
    [row] = selectors.lease_overview(user=member.user, instant=NOW)
    assert (row.latest.bps, row.latest.target, row.latest.pairs) == (
        41_500_000_000,
        "sz-02>sz-01",
        3,
    )
    assert not row.latest.stale and row.status == lease_status.MEETING
    html = row_of(client_for(member.user).get("/").content.decode(), "ZY-2026-601")
    assert "41.5 Gbit/s" in html and "97.9 Gbit/s" not in html
    assert "sz-02 → sz-01 · worst of 3 node pairs" in html
    assert "2026-11-20 11:30 (Asia/Shanghai)" in html  # finished 20 s after the 11:30 slot
    assert "stale" not in html


def test_without_a_sample_within_twice_the_cadence_the_figure_is_stale(member):
    lease = active(make_lease(tenant=member.tenant, reference="ZY-2026-602", nodes=[NodeFactory()]))
    meeting_month(lease)
    # Finished 3 hours before the clock; the cadence is an hour.
    make_run(
        lease,
        target="sz-01>sz-02",
        slot=NOW - timedelta(hours=3, seconds=20),
        measured_bps=98 * 10**9,
    )
    [row] = selectors.lease_overview(user=member.user, instant=NOW)
    assert row.latest.stale and row.latest.bps == 98 * 10**9
    assert row.status == lease_status.NO_DATA  # not "meeting": nothing recent says so
    assert row.reason == (
        "Nothing measured within twice the probe cadence. Availability 100 % ≥ 99.5 % SLA."
    )
    html = row_of(client_for(member.user).get("/").content.decode(), "ZY-2026-602")
    assert "stale: nothing measured for 3\xa0hours" in html
    assert "98 Gbit/s" in html and "sz-01 → sz-02" in html
    assert 'data-status="no_data"' in html and "no data" in html
    assert "Nothing measured within twice the probe cadence." in html
    assert "meeting the contract" not in html


def test_the_staleness_follows_the_terms_cadence(member):
    lease = active(
        make_lease(
            tenant=member.tenant,
            reference="ZY-2026-603",
            nodes=[NodeFactory()],
            probe_cadence_s={"link": 300, "throughput": 86400},
        )
    )
    meeting_month(lease)
    # A day and a half old: stale at an hourly cadence, fresh at a daily one (2 days).
    make_run(lease, slot=NOW - timedelta(hours=36), measured_bps=96 * 10**9, cadence_s=86400)
    [row] = selectors.lease_overview(user=member.user, instant=NOW)
    assert not row.latest.stale and row.status == lease_status.MEETING


@pytest.mark.parametrize("state", ["draft", "ended", "cancelled"])
def test_a_lease_not_in_service_is_grey_never_green(member, state):
    lease = make_lease(
        tenant=member.tenant, reference="ZY-2026-604", nodes=[NodeFactory()]
    )  # a draft, with no data at all
    if state == "ended":
        lease = active(lease)
        lease = services.transition_lease(lease=lease, to=LeaseStatus.ENDED, at=at("2026-11-10"))
    elif state == "cancelled":
        lease = services.transition_lease(
            lease=lease, to=LeaseStatus.CANCELLED, at=at("2026-11-02")
        )
    meeting_month(lease)  # even a month at 100 % is not green once the lease is not in service
    html = row_of(client_for(member.user).get("/").content.decode(), "ZY-2026-604")
    assert 'data-status="no_data"' in html
    if state == "ended":  # ended on 11-10: November is billed to then, at 100 %
        assert "Not in service: the lease is ended. Availability 100 % ≥ 99.5 % SLA." in html
    else:
        assert f"Not billed: the lease is {state}." in html
    assert "meeting the contract" not in html and 'data-status="meeting"' not in html
    assert "stale" not in html


def test_an_active_lease_with_no_measurement_is_not_called_meeting(member):
    active(make_lease(tenant=member.tenant, reference="ZY-2026-605", nodes=[NodeFactory()]))
    html = row_of(client_for(member.user).get("/").content.decode(), "ZY-2026-605")
    assert 'data-status="no_data"' in html and "no measurement" in html
    assert "meeting the contract" not in html


@pytest.mark.parametrize(
    "status,icon,words",
    [
        ("breached", "✕", "breached"),
        ("degraded", "!", "degraded"),
        ("meeting", "✓", "meeting the contract"),
        ("no_data", "?", "no data"),
    ],
)
def test_every_status_badge_has_an_icon_and_words(status, icon, words):
    badge = render_to_string("portal/_status.html", {"status": status, "reason": "why"})
    assert f'<span class="status-icon" aria-hidden="true">{icon}</span>' in badge
    assert words in badge and 'title="why"' in badge
