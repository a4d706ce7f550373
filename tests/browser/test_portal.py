"""The customer and provider portals in a real browser: log in, read the chart, switch
language, upload evidence, download an invoice; tenants stay apart; the fleet lists the
worst lease first. Screenshots of each main page go to var/screenshots/."""

import csv
import io
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.db import transaction

from accounts.choices import Role
from billing.ingest import ingest_all
from leases import services
from leases.choices import LeaseStatus
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    StaffFactory,
    TenantFactory,
    at,
    make_lease,
    make_run,
)
from tests.portal.support import NOW, october_invoice

# A real iperf 3.14 TCP client run (-J), about 205 Mbit/s; its source is in SOURCES.md there.
IPERF3_JSON = Path(__file__).resolve().parents[1] / "benchmarks/fixtures/iperf3/tcp_3.14_macos.json"


@pytest.fixture(autouse=True)
def _pinned_clock(monkeypatch):
    """The live server runs in this process's threads, so the pinned clock reaches it."""
    monkeypatch.setattr("portal.selectors.now", lambda: NOW)


def active_lease(*, tenant, reference, failing_hours=(), hours=20, nodes=2):
    """An active lease with hourly throughput samples from 2026-11-03 00:00: 98 Gbit/s,
    40 Gbit/s (failing) in ``failing_hours``; ingested, so incidents open and close.
    Committed in one transaction, before the live server reads it."""
    with transaction.atomic():
        lease = make_lease(
            tenant=tenant,
            reference=reference,
            nodes=NodeFactory.create_batch(nodes, gpu_count=8),
            network_fee_per_month=Decimal("22000.00"),
        )
        services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-11-01"))
        start = at("2026-11-03 00:00")
        for hour in range(hours):
            failing = hour in failing_hours
            make_run(
                lease,
                slot=start + timedelta(hours=hour),
                verdict="fail" if failing else "pass",
                measured_bps=(40 if failing else 98) * 10**9,
            )
        ingest_all(notify=False)
        return lease


@pytest.fixture
def member():
    """A tenant admin (admins may also upload evidence)."""
    return MembershipFactory(role=Role.ADMIN)


@pytest.fixture
def lease(member):
    return active_lease(tenant=member.tenant, reference="ZY-2026-101", failing_hours=(5, 6, 7))


@pytest.fixture
def invoice(member, lease):
    return october_invoice(tenant=member.tenant, lease=lease)


def test_tenant_logs_in_and_sees_the_throughput_chart_with_data(
    page, log_in, screenshot, member, lease
):
    log_in(member.user)
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.get_by_role("link", name="ZY-2026-101").is_visible()
    screenshot("overview")

    page.get_by_role("link", name="ZY-2026-101").click()
    page.wait_for_url(f"**/leases/{lease.pk}/")
    # The server-rendered SVG carries the figures (and stays for readers without
    # JavaScript); the ECharts chart drawn over it is what the browser shows.
    page.locator("figure#throughput .echart").wait_for()
    assert page.locator("figure#throughput .echart").is_visible()
    chart = page.locator("figure#throughput svg").first
    assert "Measured throughput per node pair" in chart.locator("title").first.text_content()
    points = chart.locator("polyline").first.get_attribute("points").split()
    assert len(points) >= 2  # a line through the measured samples, not an empty chart
    incidents = page.locator("h2#incidents + table, h2#incidents ~ table").first
    assert incidents.get_by_text("40 Gbit/s").first.is_visible()  # the incident's worst
    screenshot("lease")


def test_the_language_switch_turns_the_portal_chinese(page, log_in, screenshot, member, lease):
    log_in(member.user)
    assert page.get_by_role("link", name="Leases").is_visible()

    page.select_option("select#language", "zh-hans")
    page.click("form:has(select#language) button[type=submit]")
    page.wait_for_selector("html[lang=zh-hans]")
    nav = page.locator("nav")
    assert nav.get_by_role("link", name="租用").is_visible()
    assert nav.get_by_role("link", name="账单").is_visible()
    assert page.locator("select#language").input_value() == "zh-hans"
    screenshot("overview-zh")

    # The choice sticks (a cookie) on the next page.
    page.goto(f"/leases/{lease.pk}/")
    assert page.locator("html").get_attribute("lang") == "zh-hans"
    assert page.locator("nav").get_by_text("切换").is_visible()
    screenshot("lease-zh")


def test_tenant_downloads_an_invoice_as_csv(page, log_in, screenshot, member, invoice):
    log_in(member.user)
    page.locator("nav").get_by_role("link", name="Invoices").click()
    page.wait_for_url("**/invoices/")
    assert page.get_by_text("¥71,020.00").is_visible()
    screenshot("invoices")

    page.get_by_role("link", name="2026-10").click()
    page.wait_for_url(f"**/invoices/{invoice.pk}/")
    assert page.locator("tr.line").count() == 2
    screenshot("invoice")

    with page.expect_download() as download_info:
        page.get_by_role("link", name="Download CSV").click()
    download = download_info.value
    assert download.suggested_filename == f"invoice-{member.tenant.slug}-2026-10-draft.csv"
    text = Path(download.path()).read_bytes().decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[1][:4] == ["1", "ZY-2026-101", "node rent", "2 nodes"]
    assert rows[2][7:] == ["22000.00", "6.00", "1320.00", "23320.00"]  # amount, tax, with tax
    assert rows[-1][3:] == ["total (¥)", "", "", "", "", "", "", "71020.00"]


def test_another_tenants_lease_is_a_404(page, log_in, screenshot, lease):
    outsider = MembershipFactory(tenant=TenantFactory())
    log_in(outsider.user)
    assert page.get_by_text("ZY-2026-101").count() == 0

    response = page.goto(f"/leases/{lease.pk}/")
    assert response is not None and response.status == 404
    assert "ZY-2026-101" not in page.content()
    screenshot("lease-404")


def test_tenant_uploads_iperf3_evidence_and_sees_the_verdict(
    page, log_in, screenshot, member, lease
):
    log_in(member.user)
    page.goto(f"/leases/{lease.pk}/evidence/new/")
    page.select_option("select[name=tool]", "iperf3")
    hostnames = sorted(lease.assignments.values_list("node__hostname", flat=True))
    nodes = page.locator("[name=nodes]")
    if nodes.first.evaluate("element => element.tagName") == "SELECT":
        nodes.select_option(hostnames)
    else:
        for hostname in hostnames:
            page.check(f"input[name=nodes][value='{hostname}']")
    page.fill("textarea[name=raw_output]", IPERF3_JSON.read_text())
    screenshot("evidence-form")

    page.click("main [type=submit]")
    verdict = page.locator("#verdict")
    verdict.wait_for()
    # iperf3 measured about 205 Mbit/s on a lease contracted for 100 Gbit/s.
    text = verdict.inner_text()
    assert "fail" in text.lower() and "204.7 Mbit/s" in text
    screenshot("evidence-verdict")


def test_provider_fleet_lists_the_breached_lease_first(page, log_in, screenshot):
    # Created first, so the order cannot come from the primary key.
    meeting = active_lease(tenant=TenantFactory(), reference="ZY-MEETING")
    # The last three samples fail: an incident is open now.
    breached = active_lease(
        tenant=TenantFactory(), reference="ZY-BREACHED", failing_hours=(17, 18, 19)
    )
    assert breached.incidents.filter(state="open").exists()

    log_in(StaffFactory())
    page.goto("/provider/")
    rows = page.locator("table#fleet tbody tr")
    assert rows.count() == 2
    assert rows.nth(0).get_attribute("data-lease") == breached.reference
    assert rows.nth(0).get_attribute("data-status") == "breached"
    assert rows.nth(1).get_attribute("data-lease") == meeting.reference
    # 100 %, but its last sample (11-03) is weeks before the pinned clock (11-20): without a
    # measurement within twice the cadence it is not called meeting (portal.selectors).
    assert rows.nth(1).get_attribute("data-status") == "no_data"
    screenshot("fleet")
