"""The Content-Security-Policy in a real browser: the lease page (its ECharts charts drawn and
their tooltip shown), the SLA page and the admin run without one refused script, style or
image, and the Permissions-Policy header raises no complaint from chromium."""

import pytest
from django.urls import reverse

from accounts.choices import Role
from tests.browser.test_portal import active_lease
from tests.factories import MembershipFactory, StaffFactory
from tests.portal.support import NOW

# Every securitypolicyviolation the page raises, kept on window for the test to read; the
# script is Playwright's own (it runs before the page's and is not subject to its policy).
RECORD_VIOLATIONS = """
window.__violations = [];
document.addEventListener("securitypolicyviolation", (event) => {
  const where = `${event.sourceFile}:${event.lineNumber}`;
  window.__violations.push(`${event.violatedDirective} ${event.blockedURI} ${where}`);
});
"""


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    monkeypatch.setattr("portal.selectors.now", lambda: NOW)


@pytest.fixture
def complaints(page):
    """What the browser said about the policies: violations and console lines naming them."""
    page.add_init_script(RECORD_VIOLATIONS)
    console: list[str] = []
    page.on(
        "console",
        lambda message: (
            console.append(message.text)
            if "Content Security Policy" in message.text or "Permissions-Policy" in message.text
            else None
        ),
    )
    page.on("pageerror", lambda error: console.append(f"page error: {error}"))

    def read() -> list[str]:
        return [*page.evaluate("window.__violations || []"), *console]

    return read


def test_lease_and_sla_pages_draw_their_charts_under_the_policy(
    page, log_in, screenshot, complaints
):
    member = MembershipFactory(role=Role.VIEWER)
    lease = active_lease(tenant=member.tenant, reference="ZY-2026-701", failing_hours=(5,))
    log_in(member.user)

    response = page.goto(reverse("portal:lease", args=[lease.pk]))
    assert "script-src 'self'" in response.headers["content-security-policy"]
    chart = page.locator("#throughput .echart canvas").first
    chart.wait_for(state="visible")
    assert page.locator(".echart canvas").count() >= 1
    # The tooltip is HTML that ECharts writes into the page: hover until it shows a figure.
    chart.scroll_into_view_if_needed()  # below the month header on a 900 px screen
    box = chart.bounding_box()
    assert box is not None
    tooltip = ""
    for step in range(10, 100, 5):
        page.mouse.move(box["x"] + box["width"] * step / 100, box["y"] + box["height"] / 2)
        page.wait_for_timeout(50)
        tooltip = " ".join(page.locator("#throughput .echart div").all_inner_texts())
        if "98 Gbit/s" in tooltip or "40 Gbit/s" in tooltip:
            break
    assert "98 Gbit/s" in tooltip or "40 Gbit/s" in tooltip, tooltip
    screenshot("lease")
    assert complaints() == []

    page.goto(reverse("portal:lease-sla", args=[lease.pk]))
    page.locator("h1").wait_for()
    page.wait_for_load_state("load")
    screenshot("sla")
    assert complaints() == []


def test_the_admin_runs_under_the_policy(page, log_in, complaints, live_server):
    staff = StaffFactory()
    lease = active_lease(tenant=MembershipFactory().tenant, reference="ZY-2026-702")
    log_in(staff)
    # The index, a change list with its actions bar and filters, a change form with its
    # date and time widgets.
    for path in (
        reverse("admin:index"),
        reverse("admin:leases_lease_changelist"),
        reverse("admin:leases_lease_change", args=[lease.pk]),
    ):
        response = page.goto(path)
        assert response.status == 200, path
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        page.wait_for_load_state("load")
        assert complaints() == [], path
    # The admin's own JavaScript ran: the change list's "select all" box ticks every row.
    page.goto(reverse("admin:leases_lease_changelist"))
    page.locator("#action-toggle").check()
    assert page.locator("input.action-select:checked").count() == 1
    assert complaints() == []


def test_the_api_docs_run_under_their_policy(page, log_in, complaints):
    log_in(StaffFactory())
    page.goto("/api/docs/")
    page.locator(".swagger-ui .opblock").first.wait_for()
    assert complaints() == []
    page.goto("/api/redoc/")
    page.locator(".api-content h1").first.wait_for()
    page.wait_for_load_state("networkidle")
    # ReDoc always shows its maker's logo from a CDN; the policy refuses it, and only it.
    refused = [line for line in complaints() if "cdn.redoc.ly/redoc/logo-mini.svg" not in line]
    assert refused == []
