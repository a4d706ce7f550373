"""The lease page's interactive charts in a real browser: the ECharts bundle replaces the
server's SVG, hovering shows a value with its unit, and the page's JavaScript and CSS stay
within 300 KB gzipped (issue 17's budget)."""

import gzip
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from accounts.choices import Role
from tests.browser.test_portal import active_lease
from tests.factories import MembershipFactory
from tests.portal.support import NOW

STATIC = Path(settings.BASE_DIR) / "portal" / "static"
BUDGET_BYTES = 300 * 1024


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    monkeypatch.setattr("portal.selectors.now", lambda: NOW)


def test_the_throughput_chart_is_interactive_and_the_page_stays_light(
    page, live_server, log_in, screenshot
):
    member = MembershipFactory(role=Role.VIEWER)
    lease = active_lease(tenant=member.tenant, reference="ZY-2026-601", failing_hours=(5,))
    log_in(member.user)
    assets: list[str] = []
    page.on(
        "response",
        lambda response: (
            assets.append(response.url)
            if response.request.resource_type in ("script", "stylesheet")
            else None
        ),
    )
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(reverse("portal:lease", args=[lease.pk]))
    chart = page.locator("#throughput .echart canvas").first
    chart.wait_for(state="visible")
    assert not page.locator("#throughput svg").first.is_visible()  # the SVG gave way
    chart.scroll_into_view_if_needed()  # below the month header on a 900 px screen
    box = chart.bounding_box()
    assert box is not None and box["width"] > 600
    # Sweep across the plot until the tooltip shows a figure: 98 or 40 Gbit/s.
    tooltip = ""
    for step in range(10, 100, 5):
        page.mouse.move(box["x"] + box["width"] * step / 100, box["y"] + box["height"] / 2)
        page.wait_for_timeout(50)
        texts = page.locator("#throughput .echart div").all_inner_texts()
        tooltip = " ".join(text for text in texts if "Gbit/s" in text)
        if "98 Gbit/s" in tooltip or "40 Gbit/s" in tooltip:
            break
    assert "98 Gbit/s" in tooltip or "40 Gbit/s" in tooltip, tooltip
    screenshot("lease-interactive")

    # What the page loaded as scripts and stylesheets, gzipped as a server would send them.
    names = sorted(
        {url.split("/static/", 1)[1].split("?")[0] for url in assets if "/static/" in url}
    )
    assert "portal/vendor/charts.min.js" in names
    total = sum(len(gzip.compress((STATIC / name).read_bytes(), 9)) for name in names)
    assert total <= BUDGET_BYTES, (total, names)
