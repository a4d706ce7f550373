"""Issue 33's portal points in a real browser, each at 390 and 1440 px in English and
Chinese, on the demo (``manage.py demo`` with a day of history, its invoices, and one
iperf3 result uploaded): the figures a user looks for are on the page and inside the
screen, the page never scrolls sideways, and axe-core finds no serious or critical
violation. The demo is built once for the module and served by the module's own live
server (``served_once``); each test reuses one logged-in browser context per width and
user. docs/portal-browser-coverage.md maps each point to its tests.

Hand-checked figures: the demo's issued invoice has a credit note of ¥1,000.00
(demo.invoices.GOODWILL) off the network fee, ¥1,060.00 with its 6 % VAT, and no payment,
so its amount due is its total less ¥1,060.00;
the uploaded iperf3 run (tests/benchmarks/fixtures/iperf3/tcp_3.14_macos.json) measured
204.7 Mbit/s against ZY-2026-001's 100 Gbit/s: the verdict is fail."""

from decimal import Decimal
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import timezone, translation

from billing.evidence import submit_evidence
from billing.models import Invoice
from demo.history import load_history
from demo.invoices import load_invoices
from leases.demo import load_demo
from leases.models import Lease
from tests.browser.conftest import served_once
from tests.browser.test_design import WIDTHS, axe_violations

IPERF3_JSON = Path(__file__).resolve().parents[1] / "benchmarks/fixtures/iperf3/tcp_3.14_macos.json"
SIZES = pytest.mark.parametrize("width", sorted(WIDTHS.values()))
LANGUAGES = pytest.mark.parametrize("language", ["en", "zh-hans"])
# What each language must show; written out by hand, so a lost translation fails here.
WORDS = {
    "en": {"fail": "fail", "payment": "partly credited", "credit-notes": "Credit notes"},
    "zh-hans": {"fail": "未达标", "payment": "部分红冲", "credit-notes": "红字发票"},
}


def amount(text: str) -> Decimal:
    """ "¥-1,000.00" -> Decimal("-1000.00")."""
    return Decimal(text.strip().replace("¥", "").replace(",", ""))


@pytest.fixture(scope="module")
def site(browser, django_db_setup, django_db_blocker, tmp_path_factory):  # type: ignore[no-untyped-def]
    def build():  # type: ignore[no-untyped-def]
        result = load_demo()
        load_history(days=1)
        invoices = load_invoices()
        leases = {lease.reference: lease for lease in Lease.objects.select_related("tenant")}
        zhiyuan = leases["ZY-2026-001"]
        admin = zhiyuan.tenant.memberships.get(user__username="zhiyuan-admin").user
        evidence = submit_evidence(
            lease=zhiyuan,
            user=admin,
            tool="iperf3",
            raw_output=IPERF3_JSON.read_text(),
            nodes=sorted(zhiyuan.assignments.values_list("node__hostname", flat=True))[:2],
        )
        breached = leases["LX-2026-001"]
        return {
            "passwords": {login.username: login.password for login in result.logins},
            "logins": [login.username for login in result.logins],
            "leases": leases,
            "evidence": evidence,
            "invoice": Invoice.objects.get(number=invoices.issued),
            "credit_note": invoices.credit_note,
            "incident": breached.incidents.filter(state="open").order_by("-opened_at").first(),
        }

    instant = timezone.now().replace(microsecond=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("portal.selectors.now", lambda: instant)
        yield from served_once(
            browser,
            django_db_blocker,
            build,
            VAR_DIR=tmp_path_factory.mktemp("var"),  # the demo's logins file
            ROOT_URLCONF="tests.portal.error_urls",  # /boom/ (500) and /refused/ (403)
            DEBUG=False,
        )


def open_as(site, width: int, language: str, user: str):  # type: ignore[no-untyped-def]
    return site.page(width, language, user, site.world["passwords"][user])


def visit(page, path: str, language: str, status: int = 200):  # type: ignore[no-untyped-def]
    response = page.goto(path)
    assert response is not None and response.status == status, (path, response)
    assert page.locator("html").get_attribute("lang") == language, path
    return response


def page_problems(page, width: int, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Sideways scroll and axe-core's serious and critical findings, one line each."""
    problems = []
    page.evaluate("document.fonts.ready.then(() => true)")  # widths as the fonts draw them
    overflow = page.evaluate("document.documentElement.scrollWidth") - width
    if overflow > 0:
        wide = page.evaluate(
            """(width) => [...document.querySelectorAll('body *')]
                .filter(e => e.getBoundingClientRect().right > width + 0.5)
                .slice(-3).map(e => `${e.tagName.toLowerCase()}.${e.className}`)""",
            width,
        )
        problems.append(f"{name}: the page scrolls sideways by {overflow} px ({wide})")
    problems.extend(f"{name}: {violation}" for violation in axe_violations(page))
    return problems


def shown(page, selector: str, width: int, *, text: bool = True) -> str:  # type: ignore[no-untyped-def]
    """The text of the first element ``selector`` finds: the element must be visible and
    its text lie inside the screen's width (a wide table may scroll inside itself, but the
    figure must be on the first screen of it); with ``text=False`` the element's own box
    (a long command that scrolls inside its <pre>)."""
    element = page.locator(selector).first
    assert element.is_visible(), f"{selector} is not visible"
    left, right = element.evaluate(
        """(element, text) => {
            const range = document.createRange();
            range.selectNodeContents(element);
            const box = (text ? range : element).getBoundingClientRect();
            return [box.left, box.right];
        }""",
        text,
    )
    assert left >= -0.5 and right <= width + 0.5, (
        f"{selector}: its text at {left:.0f}..{right:.0f} px"
    )
    return element.inner_text()


@SIZES
@LANGUAGES
def test_1_the_month_header_on_the_lease_tenant_and_fleet_pages(site, width, language):
    lease = site.world["leases"]["LX-2026-001"]
    problems: list[str] = []
    page = open_as(site, width, language, "lingxi-admin")
    for name, path in (
        ("lease", reverse("portal:lease", args=[lease.pk])),
        ("overview", reverse("portal:overview")),
    ):
        visit(page, path, language)
        assert page.locator("#month-header").get_attribute("data-status") == "breached", name
        for field in ("to-date", "projected", "credit", "open-incidents"):
            assert shown(page, f'#month-header [data-field="{field}"]', width).strip(), field
        problems += page_problems(page, width, name)
    page = open_as(site, width, language, "provider")
    visit(page, reverse("portal:fleet"), language)
    # The fleet's header counts its leases by state: the one breached lease among them.
    counts = shown(page, '#month-header [data-field="counts"]', width)
    assert page.locator('#month-header [data-field="counts"] [data-status="breached"]').count() == 1
    assert counts.strip()
    problems += page_problems(page, width, "fleet")
    assert problems == []


@SIZES
@LANGUAGES
def test_2_the_evidence_guide_and_an_uploaded_results_verdict(site, width, language):
    lease = site.world["leases"]["ZY-2026-001"]
    evidence = site.world["evidence"]
    page = open_as(site, width, language, "zhiyuan-admin")
    visit(page, reverse("portal:evidence-upload", args=[lease.pk]), language)
    for step in ("#guide-rdma pre", "#guide-iperf3 pre", "#guide-nccl pre"):
        shown(page, step, width, text=False)
    assert "all_reduce_perf" in page.locator("#guide-nccl pre").first.inner_text()
    problems = page_problems(page, width, "guide")
    visit(page, reverse("portal:evidence", args=[lease.pk, evidence.pk]), language)
    assert page.locator("#verdict").get_attribute("data-verdict") == "fail"
    assert WORDS[language]["fail"] in shown(page, "#verdict", width)
    assert shown(page, "#measured-bandwidth", width) == "204.7 Mbit/s"
    problems += page_problems(page, width, "verdict")
    assert problems == []


@SIZES
@LANGUAGES
def test_3_the_invoice_its_amount_due_payment_credit_note_pdf_and_print(site, width, language):
    invoice = site.world["invoice"]
    page = open_as(site, width, language, "zhiyuan-admin")
    visit(page, reverse("portal:invoices"), language)
    assert shown(page, f"main table >> text={invoice.number}", width) == invoice.number
    problems = page_problems(page, width, "invoices")

    visit(page, reverse("portal:invoice", args=[invoice.pk]), language)
    assert WORDS[language]["payment"] in shown(page, "#balance .payment-status", width)
    due = amount(shown(page, "#balance .amount-due", width))
    assert amount(shown(page, "tr.credited td", width)) == Decimal("-1060.00")
    total = amount(shown(page, "tr.net-total td", width))
    assert due == total == invoice.total - Decimal("1060.00")
    assert WORDS[language]["credit-notes"] in page.locator("main h2").all_inner_texts()
    assert site.world["credit_note"] in page.locator("main").inner_text()
    pdf = page.locator(f'a[href="{reverse("portal:invoice-pdf", args=[invoice.pk])}"]')
    assert pdf.is_visible()
    response = page.context.request.get(pdf.get_attribute("href"))
    assert response.status == 200 and response.body().startswith(b"%PDF")
    problems += page_problems(page, width, "invoice")
    # Printed: no navigation and no download links, the amount due still there.
    page.emulate_media(media="print")
    try:
        assert not page.locator("header.site nav").first.is_visible()
        assert not pdf.is_visible()
        assert page.locator("#balance .amount-due").is_visible()
    finally:
        page.emulate_media(media="screen")
    assert problems == []


@SIZES
@LANGUAGES
def test_4_the_incident_band_time_picker_csv_and_incident_page(site, width, language):
    lease = site.world["leases"]["LX-2026-001"]
    incident = site.world["incident"]
    page = open_as(site, width, language, "lingxi-admin")
    visit(page, reverse("portal:lease", args=[lease.pk]) + "?range=24h", language)
    page.locator("#throughput .echart canvas").first.wait_for(state="visible")
    bands = page.evaluate(
        """() => {
            const option = document.getElementById('throughput').echart.getOption();
            const bands = option.series.find(s => s.markArea);
            return bands ? bands.markArea.data.map(([a, b]) => a.xAxis) : [];
        }"""
    )
    assert round(incident.opened_at.timestamp() * 1000) in bands
    for control in ('#windows input[name="from"]', '#windows input[name="to"]', "#windows button"):
        shown(page, control, width)
    csv_link = page.locator("p.chart-csv a").first
    shown(page, "p.chart-csv a", width)
    response = page.context.request.get(csv_link.get_attribute("href"))
    assert response.status == 200 and "text/csv" in response.headers["content-type"]
    assert len(response.text().splitlines()) > 2  # a header and the day's hours
    problems = page_problems(page, width, "lease")
    visit(page, reverse("portal:incident", args=[lease.pk, incident.pk]), language)
    with translation.override(language):
        assert shown(page, "#incident-state", width) == incident.get_state_display()
    shown(page, "#opened-at", width)
    shown(page, "#credit-effect", width)
    problems += page_problems(page, width, "incident")
    assert problems == []


@SIZES
@LANGUAGES
def test_6_settings_tokens_error_pages_and_favicon(site, width, language):
    page = open_as(site, width, language, "zhiyuan-admin")
    visit(page, reverse("portal:tenant-settings"), language)
    for section in ("#contacts h3", "#webhook h3", "#thresholds h3"):
        shown(page, section, width)
    problems = page_problems(page, width, "settings")
    visit(page, reverse("portal:tokens"), language)
    shown(page, "main h1", width)
    problems += page_problems(page, width, "tokens")
    for code, path in (("403", "/refused/"), ("404", "/no-such-page/"), ("500", "/boom/")):
        visit(page, path, language, status=int(code))
        assert shown(page, ".error-code", width) == code
        shown(page, "main h1", width)
        icon = page.locator('link[rel="icon"]').get_attribute("href")
        response = page.context.request.get(icon)
        assert response.status == 200 and "svg" in response.headers["content-type"], code
        problems += page_problems(page, width, code)
    assert problems == []


COMBINATIONS = [
    (width, language) for width in sorted(WIDTHS.values()) for language in ("en", "zh-hans")
]


@pytest.mark.parametrize(("width", "language"), COMBINATIONS)
def test_7_the_demo_logins_log_in_and_see_their_own_leases(site, width, language):
    """The logins ``manage.py demo`` prints, through the login form: the login page in
    every combination, and the six logins shared out over the four (a login's
    authentication does not depend on the screen): each lands on the overview and sees
    its own tenant's leases only (staff see both tenants')."""
    assert site.world["logins"] == [
        "provider",
        "provider-ops",
        "zhiyuan-admin",
        "zhiyuan-viewer",
        "zhiyuan-auditor",
        "lingxi-admin",
    ]
    sees = {
        "provider": {"ZY-2026-001", "LX-2026-001"},
        "zhiyuan": {"ZY-2026-001"},
        "lingxi": {"LX-2026-001"},
    }
    mine = site.world["logins"][COMBINATIONS.index((width, language)) :: len(COMBINATIONS)]
    context = site.browser.new_context(base_url=site.url, viewport={"width": width, "height": 900})
    cookie = {"name": settings.LANGUAGE_COOKIE_NAME, "value": language, "url": site.url}
    problems: list[str] = []
    try:
        page = context.new_page()
        for username in mine:
            context.clear_cookies()
            context.add_cookies([cookie])
            visit(page, reverse("portal:login"), language)
            if username == mine[0]:
                problems += page_problems(page, width, "login")
            page.fill("input[name=username]", username)
            page.fill("input[name=password]", site.world["passwords"][username])
            page.click("main button[type=submit]")
            page.wait_for_url(f"{site.url}/")
            text = page.locator("main").inner_text()
            seen = {reference for reference in ("ZY-2026-001", "LX-2026-001") if reference in text}
            if seen != sees[username.split("-")[0]]:
                problems.append(f"{username} sees {sorted(seen)}")
    finally:
        context.close()
    assert problems == []
