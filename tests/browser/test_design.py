"""Every portal page in a real browser, in both languages, on a desktop (1440 px) and a phone
(390 px): axe-core finds no serious or critical accessibility violation (contrast, names,
landmarks, focus), the page never scrolls sideways (wide tables and charts scroll inside
themselves) and chart text stays readable. Screenshots go to var/screenshots/."""

from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from accounts.choices import Role
from leases import services
from tests.browser.test_portal import active_lease
from tests.conftest import require
from tests.factories import MembershipFactory, StaffFactory, at, register_tenant_key
from tests.portal.support import october_invoice

AXE = Path(__file__).resolve().parents[2] / "node_modules" / "axe-core" / "axe.min.js"
WIDTHS = {"phone": 390, "desktop": 1440}


def axe_violations(page) -> list[str]:  # type: ignore[no-untyped-def]
    """axe-core's serious and critical findings on the page, one line each."""
    require(AXE.exists(), f"{AXE} is missing (`make assets` installs axe-core from npm)")
    # Through DevTools, as one would paste it into the console: the page's
    # Content-Security-Policy refuses an injected inline <script> (add_script_tag).
    devtools = page.context.new_cdp_session(page)
    devtools.send("Runtime.evaluate", {"expression": AXE.read_text()})
    devtools.detach()
    found = page.evaluate(
        """async () => {
            const result = await axe.run(document, {resultTypes: ['violations']});
            return result.violations
                .filter(v => v.impact === 'serious' || v.impact === 'critical')
                .map(v => `${v.id} (${v.impact}): ` +
                     v.nodes.slice(0, 3).map(n => n.target.join(' ')).join(' | '));
        }"""
    )
    return list(found)


def smallest_chart_text_px(page) -> float | None:  # type: ignore[no-untyped-def]
    return page.evaluate(
        """() => {
            const heights = [...document.querySelectorAll('figure svg text')]
                .map(t => t.getBoundingClientRect().height).filter(h => h > 0);
            return heights.length ? Math.min(...heights) : null;
        }"""
    )


@pytest.fixture
def world():  # type: ignore[no-untyped-def]
    member = MembershipFactory(role=Role.ADMIN)
    lease = active_lease(tenant=member.tenant, reference="ZY-2026-301", failing_hours=(5, 6))
    invoice = october_invoice(tenant=member.tenant, lease=lease)
    staff = StaffFactory()
    register_tenant_key(member.user, member.tenant, label="laptop")
    amendment = services.propose_retroactive_amendment(
        lease=lease,
        effective_from=at("2026-11-10 00:00"),
        changes={"credit_cap_percent": "40"},
        reason="Signed on the 10th, recorded late.",
    )
    customer_pages = {
        "overview": reverse("portal:overview"),
        "lease": reverse("portal:lease", args=[lease.pk]),
        "lease-sla": reverse("portal:lease-sla", args=[lease.pk]),
        "evidence-upload": reverse("portal:evidence-upload", args=[lease.pk]),
        "tokens": reverse("portal:tokens"),
        "invoices": reverse("portal:invoices"),
        "invoice": reverse("portal:invoice", args=[invoice.pk]),
        "signing-keys": reverse("portal:signing-keys"),
        "amendment": reverse("portal:amendment", args=[amendment.pk]),
        "tenant-settings": reverse("portal:tenant-settings"),
    }
    provider_pages = {
        "fleet": reverse("portal:fleet"),
        "fabrics": reverse("portal:fabrics"),
        "cost-share": reverse("portal:cost-share"),
        "incidents": reverse("portal:incidents"),
    }
    return member.user, customer_pages, staff, provider_pages


@pytest.mark.parametrize("language", ["zh-hans", "en"])
@pytest.mark.parametrize("device", list(WIDTHS))
def test_every_page_is_accessible_and_fits_the_screen(
    page, live_server, log_in, screenshot, world, language, device
):
    user, customer_pages, staff, provider_pages = world
    width = WIDTHS[device]
    page.set_viewport_size({"width": width, "height": 900})
    page.context.add_cookies(
        [{"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": live_server.url}]
    )
    problems: list[str] = []

    def visit(name: str, path: str) -> None:
        response = page.goto(path)
        assert response is not None and response.status == 200, f"{name}: {response}"
        assert page.locator("html").get_attribute("lang") == language
        screenshot(f"{name}-{device}-{language}")
        overflow = page.evaluate("document.documentElement.scrollWidth") - width
        if overflow > 0:
            problems.append(f"{name}: the page scrolls sideways by {overflow} px")
        text_px = smallest_chart_text_px(page)
        if text_px is not None and text_px < 8:
            problems.append(f"{name}: chart text is {text_px:.1f} px high")
        problems.extend(f"{name}: {violation}" for violation in axe_violations(page))

    visit("login", reverse("portal:login"))
    log_in(user)
    for name, path in customer_pages.items():
        visit(name, path)
    page.context.clear_cookies()
    page.context.add_cookies(
        [{"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": live_server.url}]
    )
    log_in(staff)
    for name, path in provider_pages.items():
        visit(name, path)
    assert problems == []
