# ruff: noqa: RUF001 (the tax form's Chinese text keeps its full-width punctuation)
"""The 数电票 request payload (issue 32 item 4): an issued invoice with two VAT rates line by
line, a 红字 credit note, the refusals (draft, 专票 without bank details, a line kind
without a tax code, a bad tax ID, totals that do not add up), the schema naming the path,
and the API and portal downloads, tenant-scoped.

Hand-checked figures ("two rates", as in test_invoice_documents): rent 45,000.00 at 13 % ->
5,850.00; network 22,000.00 and SLA credit -2,200.00 at 6 % -> 19,800.00 x 6 % = 1,188.00
(lines 1,320.00 and -132.00); tax 7,038.00, subtotal 64,800.00, total 71,838.00 =
柒万壹仟捌佰叁拾捌元整. Its full reversal: -45,000.00 -> -5,850.00 at 13 %; -22,000.00 and
+2,200.00 at 6 % -> -19,800.00 -> -1,188.00 (lines -1,320.00, +132.00); total -71,838.00.
"""

from decimal import Decimal as D

import pytest

from billing import services
from billing.choices import CreditNoteKind, InvoiceStatus, LineKind
from billing.documents import einvoice
from billing.models import Invoice, InvoiceLine
from leases.choices import InvoiceType
from tests.factories import TenantFactory, at

pytestmark = pytest.mark.django_db

SELLER = {
    "legal_name": "深圳示例智算科技有限公司",
    "tax_id": "91440300MA5F00001A",
    "address": "深圳市南山区科技园示例路 1 号",
    "phone": "0755-00000000",
    "bank": "示例银行深圳分行",
    "account": "0000 0000 0000 0000",
}
BUYER = {
    "legal_name": "北京小米科技有限责任公司",
    "tax_id": "91110108551385082Q",
    "address": "北京市海淀区示例路 33 号",
    "phone": "010-60606666",
    "bank": "招商银行北京分行",
    "account": "1109 0000 2222",
}


def two_rates(tenant, *, buyer=BUYER, total="71838.00", number="GL-2026-000042"):  # type: ignore[no-untyped-def]
    """The "two rates" invoice, issued as billing.services leaves one."""
    invoice = Invoice.objects.create(
        tenant=tenant,
        period="2026-10",
        period_start=at("2026-10-01 00:00"),
        period_end=at("2026-11-01 00:00"),
        subtotal=D("64800.00"),
        tax=D("7038.00"),
        total=D(total),
    )
    lines = [
        (LineKind.NODE_RENT, "2 nodes A100", "2.000000", "month", "22500.0000", "45000.00", "13"),
        (LineKind.NETWORK_FEE, "100 Gbps", "1.000000", "month", "22000.0000", "22000.00", "6"),
        (LineKind.SLA_CREDIT, "SLA credit", "10.000000", "percent", "-220.0000", "-2200.00", "6"),
    ]
    for position, (kind, text, quantity, unit, price, amount, rate) in enumerate(lines, 1):
        InvoiceLine.objects.create(
            invoice=invoice,
            position=position,
            kind=kind,
            description=text,
            quantity=D(quantity),
            unit=unit,
            unit_price=D(price),
            amount=D(amount),
            tax_rate_percent=D(rate),
        )
    Invoice.objects.filter(pk=invoice.pk).update(
        status=InvoiceStatus.ISSUED,
        number=number,
        issued_at=at("2026-11-02 09:00"),
        issue_date=at("2026-11-02 09:00").date(),
        due_date=at("2026-12-02 09:00").date(),
        seller=SELLER,
        buyer=buyer,
    )
    return Invoice.objects.get(pk=invoice.pk)


@pytest.fixture
def tenant():
    return TenantFactory(slug="xiaomi", name="Xiaomi", tax_id=BUYER["tax_id"])


def test_issued_invoice_with_two_rates_line_by_line(tenant):
    payload = einvoice.invoice_payload(two_rates(tenant))
    lines = [
        {key: line[key] for key in ("name", "tax_code", "unit", "quantity", "unit_price")}
        | {"money": (line["amount"], line["rate"], line["tax"], line["discount"])}
        for line in payload["lines"]
    ]
    assert lines == [
        {
            "name": "*信息技术服务*GPU算力服务",
            "tax_code": "3040205000000000000",
            "unit": "月",
            "quantity": "2",
            "unit_price": "22500",
            "money": ("45000.00", "0.13", "5850.00", False),
        },
        {
            "name": "*信息技术服务*网络带宽服务",
            "tax_code": "3040203000000000000",
            "unit": "月",
            "quantity": "1",
            "unit_price": "22000",
            "money": ("22000.00", "0.06", "1320.00", False),
        },
        {
            "name": "*信息技术服务*网络带宽服务",
            "tax_code": "3040203000000000000",
            "unit": "%",
            "quantity": "10",
            "unit_price": "-220",
            "money": ("-2200.00", "0.06", "-132.00", True),  # a 折扣行
        },
    ]
    assert payload["totals"] == {
        "amount": "64800.00",
        "tax": "7038.00",
        "total": "71838.00",
        "total_in_words": "柒万壹仟捌佰叁拾捌元整",
    }
    amounts = sum(D(line["amount"]) for line in payload["lines"])
    taxes = sum(D(line["tax"]) for line in payload["lines"])
    assert (amounts, taxes, amounts + taxes) == (D("64800.00"), D("7038.00"), D("71838.00"))
    assert (payload["invoice_type"], payload["invoice_type_name"]) == (
        "ordinary",
        "数电票（普通发票）",
    )
    assert (payload["red_letter"], payload["original"], payload["number"]) == (
        False,
        None,
        "GL-2026-000042",
    )
    assert payload["seller"]["uscc"] == "91440300MA5F00001A"
    assert payload["buyer"] == {
        "name": "北京小米科技有限责任公司",
        "uscc": "91110108551385082Q",
        "address": "北京市海淀区示例路 33 号",
        "phone": "010-60606666",
        "bank": "招商银行北京分行",
        "account": "1109 0000 2222",
    }
    assert payload["remarks"] == (
        "账期 2026-10（2026-10-01 00:00 至 2026-11-01 00:00 Asia/Shanghai）"
    )


def test_credit_note_is_red_letter_with_negative_amounts(tenant):
    invoice = two_rates(tenant)
    note = services.create_credit_note(invoice=invoice, reason="Issued to the wrong entity.")
    payload = einvoice.credit_note_payload(note)
    assert payload["red_letter"] is True and payload["document"] == "credit_note"
    assert payload["original"] == {
        "number": "GL-2026-000042",
        "issue_date": "2026-11-02",
        "reason_code": "01",
        "reason_name": "开票有误",
        "reason": "Issued to the wrong entity.",
    }
    assert [(line["amount"], line["rate"], line["tax"]) for line in payload["lines"]] == [
        ("-45000.00", "0.13", "-5850.00"),
        ("-22000.00", "0.06", "-1320.00"),
        ("2200.00", "0.06", "132.00"),  # the SLA credit taken back with the rest
    ]
    assert not any(line["discount"] for line in payload["lines"])
    assert payload["totals"] == {
        "amount": "-64800.00",
        "tax": "-7038.00",
        "total": "-71838.00",
        "total_in_words": "负柒万壹仟捌佰叁拾捌元整",
    }
    assert payload["remarks"].startswith(f"红字 {note.number}，对应蓝字发票 GL-2026-000042；")


def test_commercial_credit_is_a_sales_discount(tenant):
    invoice = two_rates(tenant)
    note = services.create_credit_note(
        invoice=invoice,
        reason="SLA goodwill for October.",
        kind=CreditNoteKind.COMMERCIAL,
        corrections=[services.Correction(2, D("1000.00"))],
    )
    payload = einvoice.credit_note_payload(note)
    assert (payload["original"]["reason_code"], payload["original"]["reason_name"]) == (
        "04",
        "销售折让",
    )
    # -1,000.00 at 6 % -> -60.00; total -1,060.00.
    assert payload["totals"]["total"] == "-1060.00"
    assert payload["totals"]["total_in_words"] == "负壹仟零陆拾元整"


def test_draft_is_refused(tenant):
    invoice = two_rates(tenant)
    Invoice.objects.filter(pk=invoice.pk).update(status=InvoiceStatus.DRAFT, number=None)
    with pytest.raises(einvoice.EInvoiceRefused, match=r"Only issued invoices .* is draft"):
        einvoice.invoice_payload(Invoice.objects.get(pk=invoice.pk))


def test_special_invoice_needs_the_buyers_bank_details(tenant):
    tenant.invoice_type = InvoiceType.SPECIAL
    tenant.save()
    invoice = two_rates(tenant, buyer={**BUYER, "bank": "", "account": ""})
    with pytest.raises(einvoice.EInvoiceRefused) as refused:
        einvoice.invoice_payload(invoice)
    assert str(refused.value) == (
        "A special VAT invoice (专票) needs the buyer's address, phone, bank and account as "
        "issued; missing: bank (开户行), account (账号)."
    )
    full = einvoice.invoice_payload(
        two_rates(TenantFactory(invoice_type=InvoiceType.SPECIAL), number="GL-2026-000043")
    )
    assert full["invoice_type_name"] == "数电票（增值税专用发票）"


def test_bad_buyer_tax_id_is_refused_naming_the_check_character(tenant):
    invoice = two_rates(tenant, buyer={**BUYER, "tax_id": "91110108551385082R"})
    with pytest.raises(einvoice.EInvoiceRefused, match=r"wrong check character R;.* give Q"):
        einvoice.invoice_payload(invoice)


def test_line_kind_without_tax_code_is_refused(tenant, settings):
    settings.EINVOICE_TAX_CODES = {
        k: v for k, v in settings.EINVOICE_TAX_CODES.items() if k != "sla_credit"
    }
    with pytest.raises(einvoice.EInvoiceRefused) as refused:
        einvoice.invoice_payload(two_rates(tenant))
    assert str(refused.value).startswith(
        "Line 3 is a SLA credit line, and EINVOICE_TAX_CODES has no 税收分类编码 for 'sla_credit'"
    )


def test_totals_that_do_not_add_up_are_refused(tenant):
    with pytest.raises(einvoice.EInvoiceRefused, match=r"is not its total 71838\.01"):
        einvoice.invoice_payload(two_rates(tenant, total="71838.01"))


def test_schema_violation_names_the_path(tenant):
    payload = einvoice.invoice_payload(two_rates(tenant))
    payload["lines"][1]["tax_code"] = "30402"
    with pytest.raises(einvoice.SchemaViolation) as refused:
        einvoice.validate(payload)
    assert str(refused.value) == (
        "The 数电票 payload does not match einvoice-v1.json at lines/1/tax_code: "
        "'30402' does not match '^[0-9]{19}$'"
    )
    payload = einvoice.invoice_payload(two_rates(TenantFactory(), number="GL-2026-000044"))
    payload["red_letter"] = True
    with pytest.raises(einvoice.SchemaViolation, match=r"at document: 'credit_note' was"):
        einvoice.validate(payload)
