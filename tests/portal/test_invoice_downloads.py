"""Downloading an invoice as PDF and XLSX: from the portal (/invoices/<id>.pdf, .xlsx)
and the API (GET /api/v1/invoices/{id}/pdf/, /xlsx/), scoped like the invoice itself,
in the request's language. The October invoice: rent 45,000.00 + network 22,000.00 at
6 % = 67,000.00 + 4,020.00 = 71,020.00 (tests/portal/support.py)."""

import io

import pytest
from django.test import Client
from openpyxl import load_workbook
from pypdf import PdfReader
from rest_framework.test import APIClient

from api import tokens
from billing.models import Invoice
from leases.choices import Role
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    StaffFactory,
    TenantFactory,
    at,
    make_lease,
)
from tests.portal.support import active, client_for, october_invoice

pytestmark = pytest.mark.django_db

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


@pytest.fixture
def member():
    tenant = TenantFactory(slug="zhiyuan", name="Zhiyuan")
    return MembershipFactory(tenant=tenant, role=Role.VIEWER)


@pytest.fixture
def invoice(member):
    lease = active(make_lease(tenant=member.tenant, reference="ZY-2026-101", nodes=[NodeFactory()]))
    return october_invoice(tenant=member.tenant, lease=lease)


def text_of(body: bytes) -> str:
    return "\n".join(page.extract_text() for page in PdfReader(io.BytesIO(body)).pages)


def test_the_detail_page_links_the_downloads(member, invoice):
    html = client_for(member.user).get(f"/invoices/{invoice.pk}/").content.decode()
    for suffix in ("pdf", "xlsx", "csv"):
        assert f'href="/invoices/{invoice.pk}.{suffix}"' in html


def test_an_english_draft_pdf(member, invoice):
    response = client_for(member.user, "en").get(f"/invoices/{invoice.pk}.pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == (
        'attachment; filename="invoice-zhiyuan-2026-10-draft.pdf"'
    )
    text = text_of(response.content)
    assert "DRAFT" in text and "Invoice" in text and "ZY-2026-101" in text
    assert "45,000.00" in text and "4,020.00" in text and "71,020.00" in text


def test_a_chinese_issued_pdf_carries_its_number(member, invoice):
    Invoice.objects.filter(pk=invoice.pk).update(
        status="issued", number="GL-2026-000001", issue_date=at("2026-11-02 09:00").date()
    )
    response = client_for(member.user, "zh-hans").get(f"/invoices/{invoice.pk}.pdf")
    assert response["Content-Disposition"] == 'attachment; filename="invoice-GL-2026-000001.pdf"'
    text = text_of(response.content)
    assert "发票" in text and "GL-2026-000001" in text and "节点租金" in text
    assert "DRAFT" not in text


def test_the_xlsx_download(member, invoice):
    response = client_for(member.user, "zh-hans").get(f"/invoices/{invoice.pk}.xlsx")
    assert response.status_code == 200
    assert response["Content-Type"] == XLSX
    assert response["Content-Disposition"].endswith('filename="invoice-zhiyuan-2026-10-draft.xlsx"')
    sheet = load_workbook(io.BytesIO(response.content)).active
    total = next(row for row in sheet.iter_rows() if row[1].value == "合计")
    assert (total[6].value, total[8].value, total[9].value) == (67000, 4020, 71020)


@pytest.mark.parametrize("suffix", ["pdf", "xlsx", "csv"])
def test_another_tenants_invoice_is_404_and_anonymous_users_log_in(invoice, suffix):
    outsider = client_for(MembershipFactory(tenant=TenantFactory()).user)
    assert outsider.get(f"/invoices/{invoice.pk}.{suffix}").status_code == 404
    anonymous = Client().get(f"/invoices/{invoice.pk}.{suffix}")
    assert anonymous.status_code == 302
    assert anonymous["Location"] == f"/accounts/login/?next=/invoices/{invoice.pk}.{suffix}"
    assert client_for(StaffFactory()).get(f"/invoices/{invoice.pk}.{suffix}").status_code == 200


# --- API --------------------------------------------------------------------------------


def api_client(user, language: str = "en") -> APIClient:  # type: ignore[no-untyped-def]
    client = APIClient(HTTP_ACCEPT_LANGUAGE=language)
    client.force_authenticate(user)
    return client


def test_the_api_answers_the_pdf_and_xlsx_in_the_request_language(member, invoice):
    pdf = api_client(member.user, "zh-hans").get(f"/api/v1/invoices/{invoice.pk}/pdf/")
    assert pdf.status_code == 200 and pdf["Content-Type"] == "application/pdf"
    assert pdf["Content-Disposition"] == 'attachment; filename="invoice-zhiyuan-2026-10-draft.pdf"'
    assert "草稿" in text_of(pdf.content) and "账期" in text_of(pdf.content)
    sheet = api_client(member.user).get(f"/api/v1/invoices/{invoice.pk}/xlsx/", HTTP_ACCEPT=XLSX)
    assert sheet.status_code == 200 and sheet["Content-Type"] == XLSX
    assert load_workbook(io.BytesIO(sheet.content)).active["A1"].value == (
        "VAT invoice request (增值税发票开票申请)"
    )


def test_the_api_downloads_need_the_read_scope_and_the_tenant(member, invoice):
    token = tokens.issue_token(user=member.user, scopes=["read"], name="finance").secret
    reader = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    reader.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert reader.get(f"/api/v1/invoices/{invoice.pk}/pdf/").status_code == 200
    outsider = api_client(MembershipFactory(tenant=TenantFactory()).user)
    missing = outsider.get(f"/api/v1/invoices/{invoice.pk}/pdf/", HTTP_ACCEPT="application/pdf")
    assert missing.status_code == 404
    assert missing["Content-Type"].startswith("application/json")  # errors stay JSON
    assert APIClient().get(f"/api/v1/invoices/{invoice.pk}/xlsx/").status_code == 401
