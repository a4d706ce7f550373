import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client

from billing.ingest import ingest_all
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    StaffFactory,
    TenantFactory,
    at,
    make_lease,
    make_run,
)
from tests.portal.support import active, client_for, october_invoice

pytestmark = pytest.mark.django_db


@pytest.fixture
def member():
    return MembershipFactory()


@pytest.fixture
def lease(member):
    lease = active(
        make_lease(
            tenant=member.tenant,
            reference="ZY-2026-101",
            nodes=NodeFactory.create_batch(2, gpu_count=8),
            network_fee_per_month=Decimal("22000.00"),
        )
    )
    # 20 hourly samples: 17 pass at 98 Gbit/s, 3 fail in a row at 40 Gbit/s (an incident).
    start = at("2026-11-03 00:00")
    for hour in range(20):
        bps = 40 * 10**9 if hour in (5, 6, 7) else 98 * 10**9
        make_run(
            lease,
            slot=start + timedelta(hours=hour),
            verdict="fail" if hour in (5, 6, 7) else "pass",
            measured_bps=bps,
        )
    ingest_all(notify=False)
    return lease


@pytest.fixture
def other_lease():
    return active(make_lease(reference="LX-2026-900", nodes=[NodeFactory()]))


def test_overview_shows_status_contract_latest_measurement_and_compliance(member, lease):
    response = client_for(member.user).get("/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "ZY-2026-101" in html
    assert "100 Gbit/s" in html  # contracted
    assert "98 Gbit/s" in html  # latest measured
    assert "85.000 %" in html  # 17 / 20 this month so far
    # The incident closed, but was opened this month: degraded, not breached.
    assert 'data-status="degraded"' in html
    assert "2026-11-03 19:00 (Asia/Shanghai)" in html  # 19:00 slot + 20 s, in the tenant's zone


def test_overview_reads_one_query_per_model_kind(member, lease, django_assert_num_queries):
    client = client_for(member.user)
    client.get("/")  # warm the session
    # session, user, the user's tenants for the access line (monitoring.middleware), then
    # lease_overview's leases, terms, the pairs' latest runs, open incidents and the lease
    # months' terms, assignments and rollups (billing.lease_month.current_months), which the
    # rows and the month header share
    with django_assert_num_queries(10) as few:
        client.get("/")
    for index in range(3):
        make_lease(tenant=member.tenant, reference=f"ZY-EXTRA-{index}")
    with django_assert_num_queries(len(few.captured_queries)):
        client.get("/")


def test_overview_shows_only_the_users_tenant_but_staff_see_everything(member, lease, other_lease):
    html = client_for(member.user).get("/").content.decode()
    assert "LX-2026-900" not in html
    staff_html = client_for(StaffFactory()).get("/").content.decode()
    assert "LX-2026-900" in staff_html and "ZY-2026-101" in staff_html


def test_lease_detail_has_the_chart_incidents_with_evidence_and_the_sla_report(member, lease):
    response = client_for(member.user).get(f"/leases/{lease.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "<svg" in html and "<polyline" in html and "stroke-dasharray" in html
    assert "threshold 95% 95 Gbit/s" in html
    assert "80.000 %" not in html
    assert "85.000 %" in html  # throughput compliance
    incident = lease.incidents.get()
    run_ids = sorted(incident.runs.values_list("pk", flat=True))
    assert len(run_ids) == 3
    # The list links to the incident's page, which links to each run's raw output.
    assert f'href="/leases/{lease.pk}/incidents/{incident.pk}/"' in html
    incident_page = client_for(member.user).get(f"/leases/{lease.pk}/incidents/{incident.pk}/")
    for run_id in run_ids:
        assert f'href="/api/v1/probe-runs/{run_id}/raw/"' in incident_page.content.decode()
    assert "40 Gbit/s" in html  # worst bandwidth of the incident
    assert "GPU-hours" in html and "¥" in html
    # 85% is below every default tier: 50% of ¥22,000.00, capped at 50%.
    assert "¥-11,000.00" in html


def test_sla_history_lists_each_month_with_compliance_and_credit(member, lease):
    response = client_for(member.user).get(f"/leases/{lease.pk}/sla/")
    assert response.status_code == 200
    html = response.content.decode()
    assert html.count('<tr class="month">') == 1
    assert "2026-11" in html and "85.000 %" in html and "¥-11,000.00" in html


@pytest.fixture
def invoice(member, lease):
    return october_invoice(tenant=member.tenant, lease=lease)


def test_invoice_list_detail_and_csv(member, invoice):
    client = client_for(member.user)
    listing = client.get("/invoices/").content.decode()
    assert "2026-10" in listing and "¥71,020.00" in listing
    detail = client.get(f"/invoices/{invoice.pk}/")
    assert detail.status_code == 200
    html = detail.content.decode()
    assert html.count('<tr class="line">') == 2
    assert "¥45,000.00" in html and "¥4,020.00" in html and "¥71,020.00" in html
    download = client.get(f"/invoices/{invoice.pk}.csv")
    assert download.status_code == 200
    assert download["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(download.content.decode("utf-8-sig"))))
    assert rows[1][:4] == ["1", "ZY-2026-101", "node rent", "2 nodes"]
    assert rows[2][7:] == ["22000.00", "6.00", "1320.00", "23320.00"]
    assert rows[-1][3:] == ["total (¥)", "", "", "", "", "", "", "71020.00"]


def test_another_tenants_lease_and_invoice_are_404(lease, invoice, other_lease):
    outsider = client_for(MembershipFactory(tenant=TenantFactory()).user)
    for url in (
        f"/leases/{lease.pk}/",
        f"/leases/{lease.pk}/sla/",
        f"/invoices/{invoice.pk}/",
        f"/invoices/{invoice.pk}.csv",
    ):
        assert outsider.get(url).status_code == 404, url
    assert "ZY-2026-101" not in outsider.get("/").content.decode()
    assert "2026-10" not in outsider.get("/invoices/").content.decode()


def test_staff_see_every_tenants_pages(lease, invoice):
    staff = client_for(StaffFactory())
    for url in (f"/leases/{lease.pk}/", f"/leases/{lease.pk}/sla/", f"/invoices/{invoice.pk}/"):
        assert staff.get(url).status_code == 200, url


@pytest.mark.parametrize(
    "path", ["/", "/leases/1/", "/leases/1/sla/", "/invoices/", "/invoices/1/"]
)
def test_anonymous_users_are_sent_to_log_in(path):
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={path}"


def test_login_page_renders_and_logs_in(member):
    member.user.set_password("pw-for-tests")
    member.user.save()
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    assert client.get("/accounts/login/").status_code == 200
    response = client.post(
        "/accounts/login/", {"username": member.user.username, "password": "pw-for-tests"}
    )
    assert response.status_code == 302 and response["Location"] == "/"


def test_chinese_when_the_browser_asks_for_it(member, lease):
    html = client_for(member.user, language="zh-hans").get("/").content.decode()
    assert '<html lang="zh-hans"' in html
    assert "租用" in html


def test_the_language_switch_sets_english(member, lease):
    client = client_for(member.user, language="zh-hans")
    response = client.post("/i18n/setlang/", {"language": "en", "next": "/"})
    assert response.status_code == 302
    html = client.get("/").content.decode()
    assert '<html lang="en"' in html and "Leases" in html
