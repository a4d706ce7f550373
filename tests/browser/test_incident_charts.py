"""Incidents on the lease's charts and the charts' shared range, in a real browser, on the
demo (issue 33 item 4): the breached lease (LX-2026-001, a pair below its threshold for
the last eight hours) has its open incident shaded on the throughput chart and named in
the tooltip; on ZY-2026-001 (throughput and NCCL bus bandwidth) the range picker sets both
charts to the same range and the crosshair follows the mouse on both; the lease page and
the incident page are axe-clean in English and Chinese. The demo is built once for the
module and served by its own live server (``served_once``)."""

from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone

from accounts.choices import Role
from demo.history import load_history
from gpulease_verify.periods import Period
from leases.demo import load_demo
from leases.models import Lease
from tests.browser.conftest import served_once
from tests.browser.test_design import axe_violations
from tests.factories import MembershipFactory

# The marker makes pytest-django create the test database even when this module runs
# alone (it sets up only the databases that marked tests name); each test only reads the
# world ``served_once`` committed, through the browser.
pytestmark = pytest.mark.django_db

BREACHED, CHARTED = "LX-2026-001", "ZY-2026-001"


@pytest.fixture(scope="module")
def site(browser, django_db_setup, django_db_blocker, tmp_path_factory):  # type: ignore[no-untyped-def]
    def build():  # type: ignore[no-untyped-def]
        load_demo()
        load_history(days=1)
        leases = {lease.reference: lease for lease in Lease.objects.select_related("tenant")}
        breached = leases[BREACHED]
        return {
            "leases": leases,
            # A viewer of each lease's tenant (password "pw-for-tests").
            "viewers": {
                reference: MembershipFactory(
                    tenant=leases[reference].tenant, role=Role.VIEWER
                ).user.username
                for reference in (BREACHED, CHARTED)
            },
            "open": breached.incidents.filter(state="open").order_by("-opened_at").first(),
            "latest": breached.incidents.order_by("-opened_at").first(),
        }

    yield from served_once(
        browser, django_db_blocker, build, VAR_DIR=tmp_path_factory.mktemp("var")
    )


def viewer_page(site, reference: str, language: str = "en"):  # type: ignore[no-untyped-def]
    return site.page(1440, language, site.world["viewers"][reference])


def x_ranges(page) -> dict[str, list[int]]:  # type: ignore[no-untyped-def]
    """Each interactive chart's drawn x range (ms), by its figure's id."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('figure.interactive')]
            .map(f => [f.id, [f.echart.getOption().xAxis[0].min,
                              f.echart.getOption().xAxis[0].max]]))"""
    )


def test_the_breached_lease_shows_its_incident_as_a_band(site):
    lease, incident = site.world["leases"][BREACHED], site.world["open"]
    assert incident is not None
    page = viewer_page(site, BREACHED)
    page.goto(reverse("portal:lease", args=[lease.pk]))
    page.locator("#throughput .echart canvas").first.wait_for(state="visible")
    bands = page.evaluate(
        """() => {
            const option = document.getElementById('throughput').echart.getOption();
            const bands = option.series.find(s => s.markArea);
            return bands ? bands.markArea.data.map(([a, b]) => [a.xAxis, b.xAxis]) : [];
        }"""
    )
    opened = round(incident.opened_at.timestamp() * 1000)
    assert any(start == opened for start, _end in bands), (opened, bands)
    # Hovering the band names the incident's kind.
    middle = page.evaluate(
        """([opened]) => {
            const chart = document.getElementById('throughput').echart;
            const option = chart.getOption();
            const end = option.xAxis[0].max;
            return chart.convertToPixel({xAxisIndex: 0}, opened + (end - opened) / 2);
        }""",
        [opened],
    )
    page.locator("#throughput .echart").scroll_into_view_if_needed()
    box = page.locator("#throughput .echart").bounding_box()
    assert box is not None
    tooltip = ""
    for dy in (0.3, 0.5, 0.7):
        page.mouse.move(box["x"] + middle, box["y"] + box["height"] * dy)
        page.wait_for_timeout(100)
        tooltip = " ".join(page.locator("#throughput .echart div").all_inner_texts())
        if "incident:" in tooltip:
            break
    assert f"incident: {incident.get_kind_display()}" in tooltip, tooltip
    # The incident list links to the incident's page, which lists its evidence.
    page.click(f'a[href="/leases/{lease.pk}/incidents/{incident.pk}/"]')
    page.wait_for_url(f"**/leases/{lease.pk}/incidents/{incident.pk}/")
    assert page.locator("#credit-effect").is_visible()


def test_the_range_picker_and_the_crosshair_move_both_charts(site):
    lease = site.world["leases"][CHARTED]
    zone = ZoneInfo(lease.tenant.time_zone)
    page = viewer_page(site, CHARTED)
    page.goto(reverse("portal:lease", args=[lease.pk]) + "?range=last-month")
    # A function, not a string: the page's CSP refuses eval.
    both_drawn = (
        "() => document.querySelectorAll('#throughput.interactive, #busbw.interactive')"
        ".length === 2"
    )
    page.wait_for_function(both_drawn)
    last_month = Period.containing(timezone.now(), lease.tenant.time_zone).previous
    start, end = last_month.bounds(lease.tenant.time_zone)
    expected = [round(start.timestamp() * 1000), round(end.timestamp() * 1000)]
    assert x_ranges(page) == {"throughput": expected, "busbw": expected}
    # The episode (two days below the contract, ending before the month) is shaded.
    assert page.locator("#throughput svg rect.incident-band").count() >= 1

    # The from-to picker: the last four days of last month (the demo's history reaches
    # back a day before the episode), whole local days.
    first = last_month.next.first_day - timedelta(days=4)
    page.fill("#windows input[name=from]", first.isoformat())
    page.fill("#windows input[name=to]", (first + timedelta(days=3)).isoformat())
    page.click("#windows button[type=submit]")
    page.wait_for_url("**from=*")
    page.wait_for_function(both_drawn)
    week = [
        round(datetime.combine(first, time(), zone).timestamp() * 1000),
        round(datetime.combine(first + timedelta(days=4), time(), zone).timestamp() * 1000),
    ]
    assert x_ranges(page) == {"throughput": week, "busbw": week}

    # The crosshair: the mouse on the throughput chart shows the bus bandwidth's tooltip.
    page.locator("#throughput .echart").scroll_into_view_if_needed()
    box = page.locator("#throughput .echart").bounding_box()
    assert box is not None
    shown = ""
    for step in range(20, 90, 5):
        page.mouse.move(box["x"] + box["width"] * step / 100, box["y"] + box["height"] / 2)
        page.wait_for_timeout(80)
        shown = " ".join(page.locator("#busbw .echart div").all_inner_texts())
        if "Gbit/s" in shown:
            break
    assert "Gbit/s" in shown, shown


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_lease_and_incident_pages_are_accessible(site, language):
    lease, incident = site.world["leases"][BREACHED], site.world["latest"]
    page = viewer_page(site, BREACHED, language)
    problems = []
    for path in (
        reverse("portal:lease", args=[lease.pk]) + "?range=24h",
        reverse("portal:incident", args=[lease.pk, incident.pk]),
    ):
        response = page.goto(path)
        assert response is not None and response.status == 200
        assert page.locator("html").get_attribute("lang") == language
        problems += [f"{path}: {violation}" for violation in axe_violations(page)]
    assert problems == []
