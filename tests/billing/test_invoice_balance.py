"""What an invoice leaves to pay (billing.balance), and the unit price printed only where
quantity x unit price is the amount (billing.documents.rows.unit_price_of), on the page,
the PDF and the API.

The invoice is ``tests.billing.test_audit.month``'s November, GL-2026-000001: subtotal
90,000.00 + 6,000.00 - 3,000.00 = 93,000.00, 6 % VAT 5,580.00, total 98,580.00."""

import io
import re
from datetime import timedelta
from decimal import Decimal as D
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import translation
from pypdf import PdfReader
from rest_framework.test import APIClient

from accounts.choices import Role
from billing import services
from billing.balance import PaymentStatus, balance
from billing.documents import pdf
from billing.documents.labels import line_text
from billing.documents.rows import invoice_document, unit_price_of
from billing.models import Invoice
from tests.billing.test_audit import AFTER_NOVEMBER, month  # noqa: F401
from tests.factories import MembershipFactory, at
from tests.portal.support import client_for

pytestmark = pytest.mark.django_db

CREDITED_AT = at("2026-12-03 10:00")
PAID_AT = at("2026-12-05 09:30")


def _issued(lease):  # type: ignore[no-untyped-def]
    invoice = Invoice.objects.get(tenant=lease.tenant, period="2026-11")
    return services.issue_invoice(invoice=invoice, now=AFTER_NOVEMBER)


def _credit(invoice, amount, when):  # type: ignore[no-untyped-def]
    return services.create_credit_note(
        invoice=invoice,
        reason="Network fee overstated.",
        corrections=[services.Correction(2, D(amount))],
        now=when,
    )


def test_issued_then_partly_credited_then_paid_then_credited_again(month):  # noqa: F811
    invoice = _issued(month)
    assert invoice.total == D("98580.00")
    owed = balance(invoice, invoice.credit_notes.all())
    assert (owed.status, owed.due, owed.credited) == (PaymentStatus.ISSUED, D("98580.00"), 0)
    # 333.33 off the network fee: tax -333.33 x 6 % = -19.9998 -> -20.00, total -353.33.
    _credit(invoice, "333.33", CREDITED_AT)
    owed = balance(invoice, invoice.credit_notes.all())
    assert owed.status == PaymentStatus.PARTLY_CREDITED
    assert (owed.credited, owed.net, owed.due) == (D("353.33"), D("98226.67"), D("98226.67"))
    # Paid what was due; a later credit of 100.00 (+6.00 tax) is owed back: 106.00.
    invoice = services.mark_paid(invoice=invoice, now=PAID_AT)
    _credit(invoice, "100.00", PAID_AT + timedelta(days=1))
    owed = balance(invoice, invoice.credit_notes.all())
    assert owed.status == PaymentStatus.PAID
    assert (owed.credited, owed.net, owed.due, owed.refund) == (
        D("459.33"),
        D("98120.67"),
        D("0.00"),
        D("106.00"),
    )


def test_a_full_reversal_leaves_nothing_due(month):  # noqa: F811
    invoice = _issued(month)
    services.create_credit_note(invoice=invoice, reason="Wrong buyer.", now=CREDITED_AT)
    owed = balance(invoice, invoice.credit_notes.all())
    assert (owed.status, owed.net, owed.due) == (PaymentStatus.CREDITED, D("0.00"), D("0.00"))


def test_a_draft_owes_nothing_yet_and_a_void_nothing_at_all(month):  # noqa: F811
    draft = Invoice.objects.get(tenant=month.tenant, period="2026-11")
    assert balance(draft, []).due is None
    issued = _issued(month)
    void = services.void_invoice(invoice=issued, reason="wrong buyer", now=CREDITED_AT)
    assert (balance(void, []).status, balance(void, []).due) == (PaymentStatus.VOID, D("0.00"))


@pytest.mark.parametrize(
    ("quantity", "price", "amount", "printed"),
    [
        # A third of a month of one node at 45,000.00: 0.333333 x 45,000 = 14,999.985 ->
        # 14,999.99, but the amount (from the exact seconds) is 15,000.00: no unit price.
        (D("0.333333"), D("45000"), D("15000.00"), None),
        (D("1.000000"), D("45000"), D("45000.00"), D("45000")),
        # 2,345.678 GB at 0.80: 1,876.5424 -> 1,876.54.
        (D("2345.678"), D("0.80"), D("1876.54"), D("0.80")),
        # An SLA credit is 10 % of a 6,000.00 base, -600.00: a percent is no unit price.
        (D("10"), D("6000.00"), D("-600.00"), None),
        (D("1"), D("-12.34"), D("-12.34"), D("-12.34")),  # an adjustment
    ],
)
def test_a_unit_price_is_printed_only_where_it_makes_the_amount(quantity, price, amount, printed):
    line = SimpleNamespace(quantity=quantity, unit_price=price, amount=amount)
    assert unit_price_of(line) == printed


def test_the_page_the_pdf_and_the_api_show_the_amount_due(month):  # noqa: F811
    invoice = _issued(month)
    _credit(invoice, "333.33", CREDITED_AT)
    admin = MembershipFactory(tenant=month.tenant, role=Role.ADMIN).user
    page = client_for(admin).get(f"/invoices/{invoice.pk}/").content.decode()
    assert "issued, partly credited" in page
    assert '<strong class="amount-due">¥98,226.67</strong>' in page
    assert "credit notes (¥)" in page and "¥-353.33" in page
    # The credit note's line names the invoice line it corrects by its position.
    assert '<td data-label="original line">line 2</td>' in page
    chinese = client_for(admin, "zh-hans").get(f"/invoices/{invoice.pk}/").content.decode()
    assert "应付金额" in chinese

    text = "".join(
        page.extract_text() for page in PdfReader(io.BytesIO(pdf.invoice_pdf(invoice, "en"))).pages
    )
    assert "amount due (¥)" in text and "98,226.67" in text
    assert "page 1 of" in text

    api = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    api.force_login(admin)
    body = api.get(f"/api/v1/invoices/{invoice.pk}/").json()
    assert (body["payment_status"], body["amount_due"], body["credited"]) == (
        "partly_credited",
        "98226.67",
        "353.33",
    )
    assert invoice_document(invoice).balance.due == D("98226.67")


NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def _numbers(text: str) -> set[D]:
    return {D(token.replace(",", "")).normalize() for token in NUMBER.findall(text)}


def test_every_line_says_the_same_in_both_languages(month):  # noqa: F811
    """Each figure of a line's stored English description is in its Chinese text too: the
    rent, the network fee and the SLA credit with its base and amount."""
    invoice = _issued(month)
    lines = list(invoice.lines.select_related("lease").order_by("position"))
    assert [line.kind for line in lines] == ["node_rent", "network_fee", "sla_credit"]
    for line in lines:
        with translation.override("zh-hans"):
            chinese = line_text(line)
        assert _numbers(line.description) <= _numbers(chinese), (line.description, chinese)


def test_the_invoice_list_reads_a_constant_number_of_queries(month, django_assert_num_queries):  # noqa: F811
    """Each invoice's balance needs its credit notes: one prefetch for all of them."""
    invoice = _issued(month)
    _credit(invoice, "333.33", CREDITED_AT)
    admin = MembershipFactory(tenant=month.tenant, role=Role.ADMIN).user
    client = client_for(admin)
    client.get("/invoices/")  # warm the session and the caches
    with CaptureQueriesContext(connection) as one:
        client.get("/invoices/")
    _credit(invoice, "10.00", CREDITED_AT + timedelta(hours=1))
    for period in ("2026-09", "2026-10"):
        Invoice.objects.create(
            tenant=month.tenant,
            period=period,
            period_start=invoice.period_start,
            period_end=invoice.period_end,
            currency="CNY",
        )
    with django_assert_num_queries(len(one.captured_queries)):
        page = client.get("/invoices/").content.decode()
    assert page.count('class="num amount-due"') == 3
