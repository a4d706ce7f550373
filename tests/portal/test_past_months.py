"""Any past month of a lease (?period=YYYY-MM on the lease page and the SLA page): the
month's SLA report and incidents, previous/next links, and SLA history rows leading to
each month's report, incidents and invoice. Figures are counted by hand from the runs."""

from datetime import timedelta
from decimal import Decimal

import pytest

from accounts.choices import Role
from billing.choices import InvoiceStatus
from billing.ingest import ingest_all
from billing.models import Invoice
from leases import services
from leases.choices import LeaseStatus
from tests.factories import MembershipFactory, NodeFactory, TenantFactory, at, make_lease, make_run
from tests.portal.support import client_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def member():
    return MembershipFactory(role=Role.VIEWER)


@pytest.fixture
def lease(member):
    """Active from 2026-10-01 (Shanghai). October: 20 hourly samples from the 5th, 17
    passing at 98 Gbit/s and 3 failing in a row at 40 Gbit/s (one incident): 85.000 %.
    November: 5 samples passing at 97 Gbit/s: 100.000 %."""
    lease = make_lease(
        tenant=member.tenant,
        reference="ZY-2026-501",
        starts_at=at("2026-10-01 00:00"),
        nodes=NodeFactory.create_batch(2),
    )
    lease = services.transition_lease(lease=lease, to=LeaseStatus.ACTIVE, at=at("2026-10-01"))
    for hour in range(20):
        failing = hour in (5, 6, 7)
        make_run(
            lease,
            slot=at("2026-10-05 00:00") + timedelta(hours=hour),
            verdict="fail" if failing else "pass",
            measured_bps=(40 if failing else 98) * 10**9,
        )
    for hour in range(5):
        make_run(
            lease, slot=at("2026-11-10 00:00") + timedelta(hours=hour), measured_bps=97 * 10**9
        )
    ingest_all(notify=False)
    return lease


def page(client, url, **query):  # type: ignore[no-untyped-def]
    response = client.get(url, query)
    assert response.status_code == 200, (url, query, response.status_code)
    return response.content.decode()


def test_the_lease_page_shows_a_past_months_report_and_incidents(member, lease):
    client = client_for(member.user)
    october = page(client, f"/leases/{lease.pk}/", period="2026-10")
    assert "SLA report for 2026-10" in october
    assert "85.000 %" in october  # 17 of 20
    assert "17 passed, 3 failed, 0 unknown" in october
    assert "Incidents in 2026-10" in october
    assert "40 Gbit/s" in october  # the incident's worst figure
    # Previous/next: September ended when the lease began, so only November is offered.
    assert 'href="?period=2026-11#report"' in october
    assert "?period=2026-09" not in october
    november = page(client, f"/leases/{lease.pk}/", period="2026-11")
    assert "SLA report for 2026-11" in november and "100.000 %" in november
    assert "5 passed, 0 failed, 0 unknown" in november
    assert "No incident was open in 2026-11." in november
    assert 'href="?period=2026-10#report"' in november
    assert "?period=2026-12" not in november  # December has not begun (clock: 2026-11-20)


def test_the_current_month_is_the_default(member, lease):
    html = page(client_for(member.user), f"/leases/{lease.pk}/")
    assert "SLA report for 2026-11" in html and "100.000 %" in html
    # Without ?period= the incidents list is the recent ones, October's among them.
    assert "40 Gbit/s" in html and "Incidents in" not in html


def test_sla_history_rows_lead_to_report_incidents_and_invoice(member, lease):
    invoice = Invoice.objects.create(
        tenant=member.tenant,
        period="2026-10",
        period_start=at("2026-10-01 00:00"),
        period_end=at("2026-11-01 00:00"),
        tax_rate_percent=Decimal("6.00"),
    )
    # A voided invoice is no longer the month's.
    Invoice.objects.create(
        tenant=member.tenant,
        period="2026-11",
        period_start=at("2026-11-01 00:00"),
        period_end=at("2026-12-01 00:00"),
        tax_rate_percent=Decimal("6.00"),
        status=InvoiceStatus.VOID,
    )
    html = page(client_for(member.user), f"/leases/{lease.pk}/sla/")
    assert html.count('<tr class="month">') == 2
    for period in ("2026-11", "2026-10"):
        assert f'href="/leases/{lease.pk}/sla/?period={period}"' in html
        assert f'href="/leases/{lease.pk}/?period={period}#incidents"' in html
    assert html.count('class="invoice"') == 1  # only October has an invoice
    assert f'href="/invoices/{invoice.pk}/"' in html
    # A viewer may not audit: no bundle downloads.
    assert "/audit/" not in html


def test_the_sla_page_shows_a_past_month(member, lease):
    html = page(client_for(member.user), f"/leases/{lease.pk}/sla/", period="2026-10")
    assert "SLA report for 2026-10" in html and "85.000 %" in html
    assert 'href="?period=2026-11"' in html and "?period=2026-09" not in html
    assert f'href="/leases/{lease.pk}/?period=2026-10#incidents"' in html


def test_a_month_before_the_lease_is_empty_but_honest(member, lease):
    client = client_for(member.user)
    for url in (f"/leases/{lease.pk}/", f"/leases/{lease.pk}/sla/"):
        html = page(client, url, period="2026-08")
        assert "SLA report for 2026-08" in html
        assert (
            "The lease started on 2026-10-01, after 2026-08: there is nothing to report for "
            "that month." in html
        )
        assert "0 passed, 0 failed, 0 unknown" in html
        assert "85.000 %" not in html.split("Month by month")[0]


def test_another_tenants_lease_is_404_for_any_month(lease):
    outsider = client_for(MembershipFactory(tenant=TenantFactory()).user)
    for url in (f"/leases/{lease.pk}/", f"/leases/{lease.pk}/sla/"):
        assert outsider.get(url, {"period": "2026-10"}).status_code == 404
        # Not even a bad month tells an outsider that the lease exists.
        assert outsider.get(url, {"period": "2026-13"}).status_code == 404
