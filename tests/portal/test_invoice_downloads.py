"""Downloading an invoice as PDF and XLSX: from the portal (/invoices/<id>.pdf, .xlsx)
and the API (GET /api/v1/invoices/{id}/pdf/, /xlsx/), scoped like the invoice itself,
in the request's language. The October invoice: rent 45,000.00 + network 22,000.00 at
6 % = 67,000.00 + 4,020.00 = 71,020.00 (tests/portal/support.py)."""

import io
from decimal import Decimal as D

import pytest
from django.test import Client
from openpyxl import load_workbook
from pypdf import PdfReader
from rest_framework.test import APIClient

from accounts import services as tokens
from accounts.choices import Role
from billing import invoicing, services
from billing.models import Invoice
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


# --- credit notes -----------------------------------------------------------------------


@pytest.fixture
def credit_note(invoice):
    """2,200.00 off the October network fee (line 2) at its 6 %: -2,200.00 - 132.00 =
    -2,332.00."""
    Invoice.objects.filter(pk=invoice.pk).update(
        status="issued", number="GL-2026-000001", issue_date=at("2026-11-02 09:00").date()
    )
    return services.create_credit_note(
        invoice=invoice,
        reason="Goodwill: network fee for 3 days",
        corrections=[services.Correction(position=2, amount=D("2200.00"))],
        now=at("2026-11-20 10:00"),
    )


def test_the_detail_page_links_each_credit_notes_pdf(member, invoice, credit_note):
    assert (credit_note.subtotal, credit_note.tax, credit_note.total) == (
        D("-2200.00"),
        D("-132.00"),
        D("-2332.00"),
    )
    html = client_for(member.user, "en").get(f"/invoices/{invoice.pk}/").content.decode()
    assert f'href="/credit-notes/{credit_note.pk}.pdf"' in html
    assert f"Download credit note {credit_note.number} (PDF)" in html


def test_a_credit_note_pdf_in_both_languages(member, credit_note):
    response = client_for(member.user, "zh-hans").get(f"/credit-notes/{credit_note.pk}.pdf")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"] == (
        f'attachment; filename="credit-note-{credit_note.number}.pdf"'
    )
    zh = text_of(response.content)
    assert "红字发票" in zh and credit_note.number in zh and "GL-2026-000001" in zh
    assert "-2,200.00" in zh and "-132.00" in zh and "-2,332.00" in zh
    en = text_of(client_for(member.user, "en").get(f"/credit-notes/{credit_note.pk}.pdf").content)
    assert "Credit note" in en and "Goodwill: network fee for 3 days" in en
    assert "DRAFT" not in en


def test_another_tenants_credit_note_is_404_and_anonymous_users_log_in(credit_note):
    path = f"/credit-notes/{credit_note.pk}.pdf"
    outsider = client_for(MembershipFactory(tenant=TenantFactory()).user)
    assert outsider.get(path).status_code == 404
    anonymous = Client().get(path)
    assert (anonymous.status_code, anonymous["Location"]) == (302, f"/accounts/login/?next={path}")
    assert client_for(StaffFactory()).get(path).status_code == 200


def test_the_detail_page_shows_each_lines_rate_and_the_tax_per_rate(member):
    # November: rent 45,000.00 at 13% -> 5,850.00; network fee 6,000.00 at 6% -> 360.00;
    # tax 6,210.00 (one row per rate, then the whole).
    lease = make_lease(
        tenant=member.tenant,
        reference="ZY-2026-102",
        nodes=[NodeFactory()],
        rent_tax_rate_percent=D("13"),
    )
    active(lease)
    draft = invoicing.draft_invoice(tenant=member.tenant, period="2026-11")
    assert draft.tax == D("6210.00")
    html = client_for(member.user, "en").get(f"/invoices/{draft.pk}/").content.decode()
    rows = [row for row in html.split("<tr") if 'class="tax-group"' in row]
    assert len(rows) == 2
    assert "tax at 6.00 % on" in rows[0] and "360.00" in rows[0]
    assert "tax at 13.00 % on" in rows[1] and "5,850.00" in rows[1]
    lines = [row for row in html.split("<tr") if 'class="line"' in row]
    assert ["13.00" in lines[0], "6.00" in lines[1]] == [True, True]


def test_the_printable_page_marks_a_draft_and_shows_the_network_cost_share(member):
    """A real draft for October: one node at the factory's 45,000.00 rent and 6,000.00
    network fee, so the network cost share is 6,000 / 51,000 = 11.76 %."""
    lease = make_lease(
        tenant=member.tenant, nodes=[NodeFactory()], starts_at=at("2026-10-01 00:00")
    )
    active(lease)
    draft = invoicing.draft_invoice(tenant=member.tenant, period="2026-10", now=at("2026-11-01"))
    html = client_for(member.user).get(f"/invoices/{draft.pk}/").content.decode()
    assert 'class="draft-mark"' in html and "DRAFT" in html
    assert "Network cost share: 11.76 %" in html
    chinese = client_for(member.user, language="zh-hans").get(f"/invoices/{draft.pk}/")
    assert "网络成本占比\uff1a11.76 %" in chinese.content.decode()  # a full-width colon
    issued = services.issue_invoice(invoice=draft, now=at("2026-11-02 09:00"))
    html = client_for(member.user).get(f"/invoices/{issued.pk}/").content.decode()
    assert 'class="draft-mark"' not in html and issued.number in html
