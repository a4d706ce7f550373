# ruff: noqa: RUF001 (the Chinese strings' full-width punctuation is the point)
"""Issue 17's points in a real browser, each in both languages, as the customer's engineer,
finance officer and auditor would meet them: the interactive chart's hover values, a past
month from the SLA history to its report, incidents and invoice, the named worst pair and
stale data on the overview, the usage chart with its running 95th percentile, an auditor's
own token and bundle download, the multi-node evidence guide and the printed invoice.
The clock is pinned to 2026-11-20 12:00 Shanghai. Screenshots go to var/screenshots/."""

import json
from datetime import timedelta
from decimal import Decimal as D

import pytest
from django.conf import settings
from django.db import transaction

from accounts.choices import Role
from billing.ingest import ingest_all
from billing.models import TrafficSample
from billing.services import issue_invoice
from leases import services
from leases.choices import BillingMode, LeaseStatus
from tests.browser.test_portal import active_lease
from tests.factories import MembershipFactory, NodeFactory, at, make_lease, make_run
from tests.portal.support import NOW, active, october_invoice

# What each language must show; written out by hand, so a lost translation fails here.
WORDS = {
    "en": {
        "worst": "worst of 2 node pairs",
        "stale": "stale: nothing measured for",
        "report": "report",
        "incidents": "incidents",
        "report_title": "SLA report for 2026-10",
        "incidents_title": "Incidents in 2026-10",
        "estimate": "Month-to-date estimate",
        "so_far": "(65.00 % of the month so far; before tax and SLA credit)",
        "running": "95th percentile so far",
        "draft": "DRAFT: not an invoice yet; figures may still change.",
        "create": "Create token",
        "bundle": "audit bundle",
        "hover_date": "11/03/2026",
    },
    "zh-hans": {
        "worst": "2 个节点对中最差的",
        "stale": "数据陈旧：已有",
        "report": "报告",
        "incidents": "事件",
        "report_title": "2026-10 的 SLA 报告",
        "incidents_title": "2026-10 的事件",
        "estimate": "本月至今估算",
        "so_far": "（本月已过 65.00 %；未含税及 SLA 赔付）",
        "running": "截至目前的95计费带宽",
        "draft": "草稿：尚不是发票，金额仍可能变化。",
        "create": "创建令牌",
        "bundle": "审计包",
        "hover_date": "2026/11/03",
    },
}
LANGUAGES = list(WORDS)


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    monkeypatch.setattr("portal.selectors.now", lambda: NOW)


@pytest.fixture(params=LANGUAGES)
def language(request, page, live_server) -> str:
    page.context.add_cookies(
        [{"name": settings.LANGUAGE_COOKIE_NAME, "value": request.param, "url": live_server.url}]
    )
    return request.param


def hover_until(page, selector: str, *wanted: str) -> str:  # type: ignore[no-untyped-def]
    """Sweep the mouse across a chart until its tooltip shows one of ``wanted``; its text."""
    chart = page.locator(f"{selector} .echart canvas").first
    chart.wait_for(state="visible")
    chart.scroll_into_view_if_needed()
    box = chart.bounding_box()
    assert box is not None
    text = ""
    for step in range(8, 100, 3):
        page.mouse.move(box["x"] + box["width"] * step / 100, box["y"] + box["height"] / 2)
        page.wait_for_timeout(40)
        text = " ".join(page.locator(f"{selector} .echart div").all_inner_texts())
        if any(word in text for word in wanted):
            break
    return text


def test_hovering_the_throughput_chart_shows_date_value_and_unit(
    page, log_in, screenshot, language
):
    member = MembershipFactory(role=Role.VIEWER)
    lease = active_lease(tenant=member.tenant, reference="ZY-2026-801", failing_hours=(5,))
    log_in(member.user)
    page.goto(f"/leases/{lease.pk}/")
    text = hover_until(page, "#throughput", "98 Gbit/s", "40 Gbit/s")
    # One unit spelling in both languages, a figure from the runs, the date in the
    # language's own order.
    assert "98 Gbit/s" in text or "40 Gbit/s" in text, text
    assert WORDS[language]["hover_date"] in text, text
    # Zoom with the wheel: the window narrows from the whole range.
    chart = page.locator("#throughput .echart canvas").first
    box = chart.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    zoom = "() => document.querySelector('#throughput').echart.getOption().dataZoom[0]"
    assert page.evaluate(zoom)["end"] - page.evaluate(zoom)["start"] == 100
    page.mouse.wheel(0, -600)
    page.wait_for_timeout(200)
    zoomed = page.evaluate(zoom)
    assert zoomed["end"] - zoomed["start"] < 100, zoomed
    # A click on the first legend entry hides its line, a second shows it again.
    legend = "() => document.querySelector('#throughput').echart.getOption().legend[0].selected"
    page.mouse.click(box["x"] + 12, box["y"] + 8)
    hidden = [name for name, shown in page.evaluate(legend).items() if not shown]
    assert len(hidden) == 1, page.evaluate(legend)
    page.mouse.click(box["x"] + 12, box["y"] + 8)
    assert all(page.evaluate(legend).values())
    screenshot(f"hover-{language}")


@pytest.fixture
def october_lease():
    """Active since 2026-10-01: six hours on 2026-10-10, three failing at 40 Gbit/s and so
    an incident, six hours on 2026-11-10; an October draft invoice."""
    with transaction.atomic():
        member = MembershipFactory(role=Role.AUDITOR)
        lease = make_lease(
            tenant=member.tenant,
            reference="ZY-2026-802",
            starts_at=at("2026-10-01 00:00"),
            nodes=NodeFactory.create_batch(2),
        )
        services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-10-01"))
        for hour in range(6):
            failing = hour in (2, 3, 4)
            make_run(
                lease,
                slot=at("2026-10-10 00:00") + timedelta(hours=hour),
                verdict="fail" if failing else "pass",
                measured_bps=(40 if failing else 98) * 10**9,
            )
            make_run(lease, slot=at("2026-11-10 00:00") + timedelta(hours=hour))
        ingest_all(notify=False)
        invoice = october_invoice(tenant=member.tenant, lease=lease)
    return member, lease, invoice


def test_a_past_month_leads_to_its_report_incidents_and_invoice(
    page, log_in, screenshot, language, october_lease
):
    member, lease, invoice = october_lease
    words = WORDS[language]
    log_in(member.user)
    page.goto(f"/leases/{lease.pk}/sla/")
    row = page.locator("tr.month", has_text="2026-10")
    row.get_by_role("link", name=words["report"], exact=True).click()
    page.wait_for_url("**/sla/?period=2026-10")
    assert page.locator("#month h2").first.inner_text() == words["report_title"]
    screenshot(f"sla-2026-10-{language}")

    page.locator("tr.month", has_text="2026-10").get_by_role(
        "link", name=words["incidents"], exact=True
    ).click()
    page.wait_for_url("**/?period=2026-10#incidents")
    assert page.locator("h2#incidents").inner_text() == words["incidents_title"]
    incidents = page.locator("h2#incidents ~ table").first
    assert "40 Gbit/s" in incidents.inner_text(), page.locator("main").inner_text()
    screenshot(f"incidents-2026-10-{language}")

    page.goto(f"/leases/{lease.pk}/sla/")
    page.locator("tr.month", has_text="2026-10").locator("a.invoice").click()
    page.wait_for_url(f"**/invoices/{invoice.pk}/")
    assert page.locator("tr.line").count() >= 1


def test_the_overview_names_the_worst_pair_and_marks_stale_data(page, log_in, screenshot, language):
    words = WORDS[language]
    member = MembershipFactory(role=Role.VIEWER)
    with transaction.atomic():
        fresh = active(
            make_lease(tenant=member.tenant, reference="ZY-2026-803", nodes=[NodeFactory()])
        )
        recent = NOW - timedelta(minutes=30)
        make_run(fresh, target="sz-01>sz-02", slot=recent, measured_bps=97_900_000_000)
        make_run(
            fresh, target="sz-02>sz-01", slot=recent, measured_bps=41_500_000_000, verdict="fail"
        )
        old = active(
            make_lease(tenant=member.tenant, reference="ZY-2026-804", nodes=[NodeFactory()])
        )
        make_run(old, target="sz-03>sz-04", slot=NOW - timedelta(hours=5), measured_bps=98 * 10**9)
        make_lease(tenant=member.tenant, reference="ZY-2026-805", nodes=[NodeFactory()])  # draft
    log_in(member.user)
    # The full reference: the tenant's name ("Tenant 804" from the factory's sequence) is on
    # every row.
    rows = {
        ref: page.locator("tr.lease-row", has_text=f"ZY-2026-{ref}")
        for ref in ("803", "804", "805")
    }
    worst = rows["803"].locator("td.latest").inner_text()
    assert "41.5 Gbit/s" in worst and "97.9" not in worst
    assert "sz-02 → sz-01" in worst and words["worst"] in worst
    assert words["stale"] in rows["804"].inner_text()
    assert rows["804"].locator(".status").get_attribute("data-status") == "no_data"
    draft = rows["805"].locator(".status")
    assert draft.get_attribute("data-status") not in ("meeting", "breached", "degraded")
    # Never colour alone: every badge carries an icon and words.
    for row in rows.values():
        badge = row.locator(".status").first
        assert badge.locator(".status-icon").inner_text().strip()
        assert len(badge.inner_text().strip()) > 1
    screenshot(f"overview-status-{language}")


def test_a_usage_customer_sees_traffic_the_running_p95_and_the_estimate(
    page, log_in, screenshot, language
):
    words = WORDS[language]
    member = MembershipFactory(role=Role.VIEWER)
    with transaction.atomic():
        lease = active(
            make_lease(
                tenant=member.tenant,
                reference="ZY-2026-806",
                nodes=[NodeFactory()],
                billing_mode=BillingMode.P95,
                price_per_mbps_p95=D("0.4000"),
            )
        )
        # 17 samples at 300 Mbit/s, then 800, 900, 1000: the running p95 ends at 900, and
        # 900 x ¥0.40 x 0.65 of November so far = ¥234.00 (tests/portal/test_usage_chart.py).
        for index, mbps in enumerate([300] * 17 + [800, 900, 1000]):
            TrafficSample.objects.create(
                lease=lease,
                slot_at=at("2026-11-05 00:00") + timedelta(minutes=5 * index),
                seconds=300,
                tx_bytes=mbps * 37_500_000,
                nodes=1,
            )
    log_in(member.user)
    page.goto(f"/leases/{lease.pk}/")
    estimate = page.locator("#usage-estimate").inner_text()
    assert words["estimate"] in estimate and "¥234.00" in estimate
    assert words["so_far"] in estimate
    page.locator("#traffic .echart canvas").first.wait_for(state="visible")
    legend = json.loads(page.locator("script#traffic-data").text_content())
    assert [series["name"] for series in legend["series"]][1] == words["running"]
    text = hover_until(page, "#traffic", "300 Mbit/s", "900 Mbit/s")
    assert "Mbit/s" in text and words["running"] in text, text
    screenshot(f"usage-{language}")


def test_an_auditor_makes_a_token_and_downloads_a_bundle(
    page, log_in, screenshot, language, october_lease
):
    member, lease, _invoice = october_lease
    words = WORDS[language]
    log_in(member.user)
    page.goto("/tokens/")
    page.fill("input[name=name]", "audit script")
    page.get_by_role("button", name=words["create"]).click()
    secret = page.locator("#new-token").inner_text()
    assert secret.startswith("gpl_")
    screenshot(f"token-{language}")
    page.goto("/tokens/")
    assert page.locator("#new-token").count() == 0  # shown once

    page.goto(f"/leases/{lease.pk}/sla/")
    row = page.locator("tr.month", has_text="2026-10")
    with page.expect_download() as download:
        row.get_by_role("link", name=words["bundle"]).click()
    document = json.loads(download.value.path().read_text(encoding="utf-8"))
    assert document["bundle"]["lease"]["reference"] == "ZY-2026-802"
    assert document["bundle"]["period"]["period"] == "2026-10" and document["signature"]
    assert "gpulease-verify" in page.locator("pre.verify-command").inner_text()


def test_the_evidence_guide_measures_across_nodes(page, log_in, language):
    member = MembershipFactory(role=Role.ADMIN)
    lease = active_lease(tenant=member.tenant, reference="ZY-2026-807")
    log_in(member.user)
    page.goto(f"/leases/{lease.pk}/evidence/new/")
    nccl = page.locator("#guide-nccl pre").first.inner_text()
    assert nccl.startswith("mpirun") and "all_reduce_perf -b 8 -e 8G -f 2 -g 1" in nccl
    assert "NCCL_IB_HCA" in nccl and "NCCL_SOCKET_IFNAME" in nccl
    rdma = page.locator("#guide-rdma pre").inner_text()
    assert "ib_write_bw -d <device> -x 3 --report_gbits" in rdma
    # 100G and up: several iperf3 processes at once, added up.
    iperf3 = page.locator("#guide-iperf3 pre").inner_text()
    assert "for i in $(seq 0 7)" in iperf3 and "-P 4" in iperf3 and "add / 1e9" in iperf3
    tiers = page.locator("table.tiers").inner_text()
    assert "400 Gbit/s" in tiers  # the figures each tier should reach


def test_the_printed_invoice_carries_the_draft_mark_then_number_and_identities(
    page, log_in, screenshot, language, october_lease
):
    words = WORDS[language]
    member, _lease, invoice = october_lease
    log_in(member.user)
    page.emulate_media(media="print")
    page.goto(f"/invoices/{invoice.pk}/")
    mark = page.locator(".draft-mark")
    assert mark.is_visible() and mark.inner_text() == words["draft"]
    assert not page.locator("nav").first.is_visible()  # the print drops the navigation
    screenshot(f"invoice-draft-print-{language}")

    issued = issue_invoice(invoice=invoice, now=NOW)  # recomputed from the runs, numbered
    page.goto(f"/invoices/{invoice.pk}/")
    text = page.locator("main").inner_text()
    assert page.locator(".draft-mark").count() == 0
    assert issued.number.startswith("GL-2026-") and issued.number in text
    seller, buyer = issued.seller, issued.buyer
    assert seller["legal_name"] == settings.INVOICE_SELLER["legal_name"]
    assert seller["legal_name"] in text and seller["tax_id"] in text and buyer["legal_name"] in text
    assert issued.issue_date.isoformat() in text and issued.due_date.isoformat() in text
    screenshot(f"invoice-issued-print-{language}")
    assert len(page.pdf(format="A4")) > 10_000  # Chromium prints it
