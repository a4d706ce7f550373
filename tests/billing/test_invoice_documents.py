"""The documents a finance team files (issue 13, item 5): rows and totals per tax rate,
PDF (zh/en, DRAFT and VOID stamps, long text wrapped, header repeated), XLSX for a
增值税发票 request with numeric cells.

PDFs are read back with pypdf (a dev dependency): its text extraction reads reportlab's
Helvetica and, through the ToUnicode map, the Chinese set in the embedded WenQuanYi Zen Hei
subsets (Debian's fonts-wqy-zenhei: without it the PDF tests skip here and fail in CI).

Hand-checked figures:
- "rounding": 6 % on 1,000.05 + 2,000.05 = 3,000.10; exact taxes 60.003 and 120.003, the
  group's 180.006 -> 180.01 (half-up once); per line by cumulative rounding: 60.00, then
  round(180.006) - 60.00 = 120.01.
- "two rates": rent 45,000.00 at 13 % -> 5,850.00; network 22,000.00 and SLA credit
  -2,200.00 at 6 % -> 19,800.00 x 6 % = 1,188.00 (lines 1,320.00 and -132.00); tax
  7,038.00, subtotal 64,800.00, total 71,838.00.
"""

import io
import re
from decimal import Decimal as D

import pytest
from django.utils.translation import override
from openpyxl import load_workbook
from pypdf import PdfReader

from billing.choices import InvoiceStatus, LineKind
from billing.documents import csv_export, pdf, xlsx
from billing.documents.rows import credit_note_document, invoice_document
from billing.models import CreditNote, CreditNoteLine, Invoice, InvoiceLine
from tests.conftest import require
from tests.factories import TenantFactory, at, make_lease

SELLER = {
    "legal_name": "深圳示例智算科技有限公司",
    "tax_id": "91440300MA5F00001X",
    "address": "深圳市南山区科技园示例路 1 号",
    "phone": "0755-00000000",
    "bank": "示例银行深圳分行",
    "account": "0000 0000 0000 0000",
}
BUYER = {
    "legal_name": "智源模型科技(深圳)有限公司",
    "tax_id": "91440300MA5G12345Y",
    "address": "深圳市福田区示例大道 8 号",
    "phone": "0755-12345678",
    "bank": "招商银行深圳分行",
    "account": "7559 0000 1111",
}


def make_invoice(tenant, lines, *, subtotal, tax, total, share=None):  # type: ignore[no-untyped-def]
    """``lines``: (kind, description, amount) at 6 %, or (kind, description, amount, rate)."""
    lines = [(*line, "6.00") if len(line) == 3 else line for line in lines]
    rates = {D(line[3]) for line in lines}
    invoice = Invoice.objects.create(
        tenant=tenant,
        period="2026-10",
        period_start=at("2026-10-01 00:00"),
        period_end=at("2026-11-01 00:00"),
        subtotal=D(subtotal),
        tax=D(tax),
        total=D(total),
        tax_rate_percent=rates.pop() if len(rates) == 1 else None,
        network_cost_share=share,
    )
    for position, (kind, description, amount, rate) in enumerate(lines, start=1):
        InvoiceLine.objects.create(
            tax_rate_percent=D(rate),
            invoice=invoice,
            position=position,
            lease=None,
            kind=kind,
            description=description,
            quantity=D("0.500000"),
            unit="month",
            unit_price=D(amount) * 2,
            amount=D(amount),
        )
    return invoice


def issue(invoice, number="GL-2026-000042", status=InvoiceStatus.ISSUED):  # type: ignore[no-untyped-def]
    """Issued as billing.services would leave it (its writes are tested elsewhere)."""
    Invoice.objects.filter(pk=invoice.pk).update(
        status=status,
        number=number,
        issued_at=at("2026-11-02 09:00"),
        issue_date=at("2026-11-02 09:00").date(),
        due_date=at("2026-12-02 09:00").date(),
        seller=SELLER,
        buyer=BUYER,
    )
    return Invoice.objects.get(pk=invoice.pk)


@pytest.fixture
def tenant():
    return TenantFactory(slug="zhiyuan", name="Zhiyuan", time_zone="Asia/Shanghai")


@pytest.fixture
def rounding(tenant):
    return make_invoice(
        tenant,
        [
            (LineKind.NODE_RENT, "node rent", "1000.05"),
            (LineKind.NETWORK_FEE, "network 100 Gbps", "2000.05"),
        ],
        subtotal="3000.10",
        tax="180.01",
        total="3180.11",
        share=D("0.6667"),
    )


@pytest.fixture
def two_rates(tenant):
    invoice = make_invoice(
        tenant,
        [
            (LineKind.NODE_RENT, "2 nodes A100", "45000.00", "13.00"),
            (LineKind.NETWORK_FEE, "network 100 Gbps RoCE", "22000.00"),
            (LineKind.SLA_CREDIT, "SLA credit, 10 %", "-2200.00"),
        ],
        subtotal="64800.00",
        tax="7038.00",
        total="71838.00",
    )
    return invoice, list(invoice.lines.order_by("position"))


@pytest.fixture
def cjk_font() -> None:
    """The PDF tests need the TrueType CJK font the PDF embeds; CI=true fails without it."""
    require(
        pdf.CJK_FONT_FILE.is_file(),
        f"{pdf.CJK_FONT_FILE} is missing (apt-get install {pdf.CJK_FONT_PACKAGE})",
    )


def pdf_text(body: bytes) -> tuple[int, str]:
    reader = PdfReader(io.BytesIO(body))
    return len(reader.pages), "\n".join(page.extract_text() for page in reader.pages)


# --- rows -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_tax_is_rounded_once_per_group_and_spread_over_lines_to_the_fen(rounding):
    document = invoice_document(rounding)
    assert [row.tax for row in document.rows] == [D("60.00"), D("120.01")]
    assert [row.amount_with_tax for row in document.rows] == [D("1060.05"), D("2120.06")]
    [group] = document.by_rate
    assert (group.tax_rate_percent, group.amount, group.tax) == (D("6"), D("3000.10"), D("180.01"))
    assert document.check()


@pytest.mark.django_db
def test_each_line_is_taxed_at_its_own_rate(two_rates):
    invoice, lines = two_rates
    document = invoice_document(invoice, lines)
    assert [(row.tax_rate_percent, row.tax) for row in document.rows] == [
        (D("13.00"), D("5850.00")),
        (D("6.00"), D("1320.00")),
        (D("6.00"), D("-132.00")),
    ]
    assert [(g.tax_rate_percent, g.amount, g.tax, g.amount_with_tax) for g in document.by_rate] == [
        (D("6.00"), D("19800.00"), D("1188.00"), D("20988.00")),
        (D("13.00"), D("45000.00"), D("5850.00"), D("50850.00")),
    ]
    assert document.check()


@pytest.mark.django_db
def test_a_draft_shows_todays_identities_and_an_issued_one_its_frozen_ones(tenant, rounding):
    tenant.legal_name, tenant.tax_id = "今日名称有限公司", "91440300TODAY0000X"
    tenant.save()
    draft = invoice_document(Invoice.objects.get(pk=rounding.pk))
    assert draft.buyer["legal_name"] == "今日名称有限公司" and not draft.identities_frozen
    assert draft.filename("pdf") == "invoice-zhiyuan-2026-10-draft.pdf"
    issued = invoice_document(issue(rounding))
    assert issued.buyer == BUYER and issued.seller == SELLER and issued.identities_frozen
    assert issued.filename("xlsx") == "invoice-GL-2026-000042.xlsx"
    assert str(issued.issue_date) == "2026-11-02" and str(issued.due_date) == "2026-12-02"
    assert issued.period_start.isoformat() == "2026-10-01T00:00:00+08:00"


@pytest.mark.django_db
def test_csv_lists_rate_tax_and_totals_per_rate(two_rates):
    import csv

    invoice, lines = two_rates
    stream = io.StringIO()
    with override("en"):
        csv_export.write(invoice_document(invoice, lines), stream)
    rows = list(csv.reader(io.StringIO(stream.getvalue().removeprefix("\ufeff"))))
    assert rows[0][8:] == ["tax rate (percent)", "tax (¥)", "amount incl. tax (¥)"]
    assert rows[1][2:] == [
        "node rent", "2 nodes A100", "0.5", "month", "90000.0000", "45000.00", "13.00",
        "5850.00", "50850.00",
    ]  # fmt: skip
    assert rows[4][3:] == ["at 6% tax", "", "", "", "19800.00", "6.00", "1188.00", "20988.00"]
    assert rows[5][3] == "at 13% tax" and rows[5][9] == "5850.00"
    assert rows[-3][7] == "64800.00" and rows[-2][9] == "7038.00" and rows[-1][10] == "71838.00"


# --- PDF --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_an_english_draft_pdf_is_stamped_draft_and_holds_the_figures(cjk_font, rounding):
    pages, text = pdf_text(pdf.invoice_pdf(rounding, "en"))
    assert pages == 1
    assert "DRAFT" in text and "Invoice" in text and "none until issued" in text
    for figure in ("1,000.05", "2,000.05", "60.00", "120.01", "3,000.10", "180.01", "3,180.11"):
        assert figure in text, figure
    assert "network cost share: 66.67%" in text


@pytest.mark.django_db
def test_an_issued_chinese_pdf_has_its_number_parties_and_no_stamp(cjk_font, rounding):
    pages, text = pdf_text(pdf.invoice_pdf(issue(rounding), "zh-hans"))
    assert pages == 1
    assert "GL-2026-000042" in text and "3,180.11" in text
    assert "发票" in text and "购买方" in text and "智源模型科技(深圳)有限公司" in text
    assert "DRAFT" not in text and "草稿" not in text


@pytest.mark.django_db
def test_a_void_invoice_is_stamped_void(cjk_font, rounding):
    _pages, text = pdf_text(pdf.invoice_pdf(issue(rounding, status=InvoiceStatus.VOID), "en"))
    assert "VOID" in text and "作废" in text and "DRAFT" not in text


@pytest.mark.django_db
def test_many_long_lines_wrap_and_run_over_pages_with_the_header_repeated(cjk_font, tenant):
    long = "NCCL all_reduce bus bandwidth shortfall between leaf and spine, " * 6
    invoice = make_invoice(
        tenant,
        [(LineKind.ADJUSTMENT, f"{position} {long}", "10.00") for position in range(1, 41)],
        subtotal="400.00",
        tax="24.00",
        total="424.00",
    )
    pages, text = pdf_text(pdf.invoice_pdf(invoice, "en"))
    assert pages >= 3
    assert text.count("amount incl. tax") >= pages  # header row on every page, plus totals
    assert "424.00" in text


@pytest.mark.django_db
def test_a_credit_note_pdf_is_titled_red_letter_and_references_its_invoice(
    cjk_font, tenant, rounding
):
    invoice = issue(rounding)
    line = invoice.lines.get(position=2)
    note = CreditNote.objects.create(
        tenant=tenant,
        invoice=invoice,
        number="GL-CN-2026-000007",
        reason="network below contract for 3 days",
        issued_at=at("2026-11-20 10:00"),
        issue_date=at("2026-11-20 10:00").date(),
        subtotal=D("-500.00"),
        tax=D("-30.00"),
        total=D("-530.00"),
        seller=SELLER,
        buyer=BUYER,
    )
    CreditNoteLine.objects.create(
        credit_note=note,
        position=1,
        original_line=line,
        kind=line.kind,
        description=line.description,
        amount=D("-500.00"),
        tax_rate_percent=D("6.00"),
    )
    document = credit_note_document(note)
    assert document.filename("pdf") == "credit-note-GL-CN-2026-000007.pdf"
    assert [(row.amount, row.tax) for row in document.rows] == [(D("-500.00"), D("-30.00"))]
    assert document.check()
    _pages, zh = pdf_text(pdf.credit_note_pdf(note, "zh-hans"))
    assert "红字发票" in zh and "GL-2026-000042" in zh and "-530.00" in zh
    _pages, en = pdf_text(pdf.credit_note_pdf(note, "en"))
    assert "Credit note" in en and "GL-CN-2026-000007" in en


SUBSET = re.compile(r"/[A-Z]{6}\+WenQuanYiZenHei-\d+")


def fonts(body: bytes) -> dict[str, dict[str, object]]:
    """Each font the PDF's pages use, by its /BaseFont name: its subtype and whether the
    font program itself is in the file (/FontFile2 is an embedded TrueType program)."""
    found: dict[str, dict[str, object]] = {}
    for page in PdfReader(io.BytesIO(body)).pages:
        for font in page["/Resources"]["/Font"].values():
            font = font.get_object()
            descriptor = font.get("/FontDescriptor")
            descriptor = descriptor.get_object() if descriptor is not None else {}
            found[str(font["/BaseFont"])] = {
                "subtype": str(font["/Subtype"]),
                "embedded": "/FontFile2" in descriptor,
            }
    return found


@pytest.mark.django_db
def test_a_chinese_pdf_embeds_its_cjk_font_and_its_lines_read_back_in_chinese(cjk_font, tenant):
    lease = make_lease(tenant=tenant, reference="ZY-2026-007", starts_at=at("2026-10-01 00:00"))
    invoice = make_invoice(tenant, [], subtotal="3000.10", tax="180.01", total="3180.11")
    segment = {"terms_version": 3, "segment_start": "2026-09-30T16:00:00Z"}
    InvoiceLine.objects.create(
        invoice=invoice,
        position=1,
        lease=lease,
        kind=LineKind.NODE_RENT,
        description="node rent",
        quantity=D("0.5"),
        unit="month",
        unit_price=D("2000.10"),
        amount=D("1000.05"),
        tax_rate_percent=D("6.00"),
        detail={**segment, "segment_end": "2026-10-15T16:00:00Z"},
    )
    InvoiceLine.objects.create(
        invoice=invoice,
        position=2,
        lease=lease,
        kind=LineKind.ADJUSTMENT,
        description="credit for dispute 17",
        quantity=D("1"),
        unit="month",
        unit_price=D("2000.05"),
        amount=D("2000.05"),
        tax_rate_percent=D("6.00"),
        detail={"dispute": 17},
    )
    body = pdf.invoice_pdf(issue(invoice), "zh-hans")
    used = fonts(body)
    cjk = {name: font for name, font in used.items() if SUBSET.fullmatch(name)}
    # reportlab subsets a TrueType font into simple fonts of up to 256 glyphs, each named
    # with a tag and its number ("/AAAAAA+WenQuanYiZenHei-0"), each with its glyphs in the
    # file; these few dozen characters fit in one.
    assert list(cjk) == ["/AAAAAA+WenQuanYiZenHei-0"], used
    assert all(font == {"subtype": "/TrueType", "embedded": True} for font in cjk.values())
    # Nothing else but the standard Helvetica, which every reader has, goes unembedded:
    # no STSong-Light or other font that the reader would have to supply.
    assert {name for name, font in used.items() if not font["embedded"]} <= {
        "/Helvetica",
        "/Helvetica-Bold",
    }
    assert b"WenQuanYiZenHei" in body and b"/FontFile2" in body
    _pages, text = pdf_text(body)

    # The lines' Chinese descriptions (billing.documents.labels), read back from the glyphs;
    # a description wraps inside its cell (a space at the break is dropped), so the text is
    # compared without any white space.
    def flowing(words: str) -> str:
        return re.sub(r"\s+", "", words)

    rent = "节点租金，ZY-2026-007（条款 v3），2026-10-01 00:00 至 2026-10-16 00:00：0.5 月，单价 ¥2000.1"  # noqa: RUF001, E501
    assert flowing(rent) in flowing(text)
    assert flowing("ZY-2026-007 的争议 #17 赔付") in flowing(text)
    assert "3,180.11" in text and "发票" in text and "深圳示例智算科技有限公司" in text


@pytest.mark.django_db
def test_without_the_cjk_font_the_pdf_is_refused_naming_the_package(tenant, rounding, monkeypatch):
    monkeypatch.setattr(pdf, "CJK_FONT_FILE", pdf.CJK_FONT_FILE.parent / "not-installed.ttc")
    with pytest.raises(pdf.MissingFont, match="apt-get install fonts-wqy-zenhei"):
        pdf.invoice_pdf(rounding, "en")


# --- XLSX -------------------------------------------------------------------------------


def cells(body: bytes) -> dict[str, list]:  # type: ignore[type-arg]
    """Each row by its first non-empty text cell (column A, else B)."""
    sheet = load_workbook(io.BytesIO(body)).active
    found = {}
    for row in sheet.iter_rows():
        key = row[0].value if isinstance(row[0].value, str) else row[1].value
        found.setdefault(str(key), list(row))
    return found


@pytest.mark.django_db
def test_xlsx_holds_the_vat_request_fields_and_numeric_figures(two_rates):
    invoice, lines = two_rates
    invoice = issue(invoice)
    with override("zh-hans"):
        body = xlsx.render(invoice_document(invoice, lines))
    rows = cells(body)
    assert rows["购买方名称"][1].value == BUYER["legal_name"]
    assert rows["纳税人识别号"][1].value == BUYER["tax_id"]  # the buyer's comes first
    assert rows["地址电话"][1].value == "深圳市福田区示例大道 8 号 0755-12345678"
    assert rows["开户行及账号"][1].value == "招商银行深圳分行 7559 0000 1111"
    assert rows["发票号码"][1].value == "GL-2026-000042"
    header = [cell.value for cell in rows["序号"]]
    assert header == [
        "序号", "项目名称", "规格型号", "单位", "数量", "单价", "金额", "税率", "税额", "价税合计",
    ]  # fmt: skip
    sheet = load_workbook(io.BytesIO(body)).active
    first = next(row for row in sheet.iter_rows() if row[0].value == 1)
    assert [cell.value for cell in first[4:]] == [0.5, 90000, 45000, 0.13, 5850, 50850]
    assert all(isinstance(cell.value, int | float) for cell in first[4:])
    assert [cell.number_format for cell in first[4:]] == [
        "0.000000", "#,##0.00##", "#,##0.00", "0.00%", "#,##0.00", "#,##0.00",
    ]  # fmt: skip
    subtotals = [row for row in sheet.iter_rows() if row[1].value == "小计"]
    assert [(r[6].value, r[7].value, r[8].value, r[9].value) for r in subtotals] == [
        (19800, 0.06, 1188, 20988),
        (45000, 0.13, 5850, 50850),
    ]
    total = rows["合计"]
    assert (total[6].value, total[8].value, total[9].value) == (64800, 7038, 71838)
    assert total[6].number_format == "#,##0.00"


@pytest.mark.django_db
def test_english_xlsx_labels_lead_with_english_and_keep_the_tax_form_names(rounding):
    rows = cells(xlsx.invoice_xlsx(rounding, "en"))
    assert "buyer: legal name (购买方名称)" in rows
    assert rows["invoice number (发票号码)"][1].value == "none until issued"
    assert "Draft: not an invoice until it is issued." in rows
