"""The invoice as an XLSX a finance team hands in with a 增值税发票 (VAT invoice) request:
buyer (购买方名称, 纳税人识别号, 地址电话, 开户行及账号) and seller blocks, then one row
per line (项目名称, 规格型号 = the lease reference, 单位, 数量, 单价, 金额, 税率, 税额,
价税合计), then totals per tax rate and in all. Figures are numeric cells with number
formats (amounts 2 decimals, quantities 6, rates as percentages), never text; text that a
spreadsheet would read as a formula stays text (``cells``).

The field names are those of the tax form, so they stay in Chinese; in English each
label leads with its English name.
"""

from __future__ import annotations

import io
from decimal import Decimal

from django.utils.translation import get_language, override
from django.utils.translation import gettext as _
from openpyxl import Workbook
from openpyxl.styles import Alignment, Font, PatternFill
from openpyxl.utils import get_column_letter

from billing.documents import cells
from billing.documents.rows import Document, invoice_document
from billing.models import Invoice

CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
MONEY = "#,##0.00"
PRICE = "#,##0.00##"
QUANTITY = "0.000000"
RATE = "0.00%"
HUNDRED = Decimal(100)
BOLD = Font(bold=True)
HEAD = PatternFill("solid", fgColor="EEEEEE")
LINE_COLUMNS = 10
WIDTHS = (6, 44, 18, 10, 14, 14, 16, 9, 14, 16)


def _label(chinese: str, english: str) -> str:
    language = get_language() or ""
    return chinese if language.startswith("zh") else f"{english} ({chinese})"


def _joined(*parts: str) -> str:
    return " ".join(part for part in parts if part)


def render(document: Document) -> bytes:
    """The XLSX of a document built in the language that is active now."""
    book = Workbook()
    sheet = book.active
    sheet.title = document.number or f"{document.period} draft"
    title = _label("增值税发票开票申请", _("VAT invoice request"))
    cells.append(sheet, [title])
    sheet["A1"].font = Font(bold=True, size=14)
    head = [
        (_label("发票号码", _("invoice number")), document.number or _("none until issued")),
        (_label("状态", _("status")), document.status_label),
        (_label("账期", _("period")), document.period),
        (_label("开票日期", _("issue date")), document.issue_date),
        (_label("付款期限", _("due date")), document.due_date),
    ]
    for side, party in (("购买方", document.buyer), ("销售方", document.seller)):
        english = _("buyer") if side == "购买方" else _("seller")
        head += [
            (_label(f"{side}名称", f"{english}: {_('legal name')}"), party["legal_name"]),
            (_label("纳税人识别号", f"{english}: {_('tax ID')}"), party["tax_id"]),
            (
                _label("地址电话", f"{english}: {_('address and phone')}"),
                _joined(party["address"], party["phone"]),
            ),
            (
                _label("开户行及账号", f"{english}: {_('bank and account')}"),
                _joined(party["bank"], party["account"]),
            ),
        ]
    for label, value in head:
        cells.append(sheet, [label, value])
        sheet.cell(sheet.max_row, 1).font = BOLD
        if hasattr(value, "isoformat"):
            sheet.cell(sheet.max_row, 2).number_format = "yyyy-mm-dd"
    for note in document.notes:
        cells.append(sheet, [note])
    cells.append(sheet, [])

    cells.append(
        sheet,
        [
            _label("序号", "#"),
            _label("项目名称", _("item")),
            _label("规格型号", _("lease")),
            _label("单位", _("unit")),
            _label("数量", _("quantity")),
            _label("单价", _("unit price (¥)")),
            _label("金额", _("amount (¥)")),
            _label("税率", _("tax rate")),
            _label("税额", _("tax (¥)")),
            _label("价税合计", _("amount incl. tax (¥)")),
        ],
    )
    header_row = sheet.max_row
    for column in range(1, LINE_COLUMNS + 1):
        cell = sheet.cell(header_row, column)
        cell.font, cell.fill = BOLD, HEAD
        cell.alignment = Alignment(wrap_text=True, vertical="top")
    for row in document.rows:
        cells.append(
            sheet,
            [
                row.position,
                f"{row.kind}: {row.description}",
                row.lease,
                row.unit,
                row.quantity,
                row.unit_price,
                row.amount,
                row.tax_rate_percent / HUNDRED,
                row.tax,
                row.amount_with_tax,
            ],
        )
        _formats(sheet, sheet.max_row, quantity=True)
        sheet.cell(sheet.max_row, 2).alignment = Alignment(wrap_text=True, vertical="top")
    for group in document.by_rate:
        cells.append(
            sheet,
            [
                None,
                _label("小计", _("subtotal at this rate")),
                *[None] * 4,
                group.amount,
                group.tax_rate_percent / HUNDRED,
                group.tax,
                group.amount_with_tax,
            ],
        )
        _formats(sheet, sheet.max_row)
    cells.append(
        sheet,
        [
            None,
            _label("合计", _("total")),
            *[None] * 4,
            document.subtotal,
            None,
            document.tax,
            document.total,
        ],
    )
    _formats(sheet, sheet.max_row)
    for column in range(1, LINE_COLUMNS + 1):
        sheet.cell(sheet.max_row, column).font = BOLD
    if document.network_cost_share is not None:
        cells.append(
            sheet, [_label("网络成本占比", _("network cost share")), document.network_cost_share]
        )
        sheet.cell(sheet.max_row, 2).number_format = RATE
    for column, width in enumerate(WIDTHS, start=1):
        sheet.column_dimensions[get_column_letter(column)].width = width
    sheet.freeze_panes = sheet.cell(header_row + 1, 1)
    buffer = io.BytesIO()
    book.save(buffer)
    return buffer.getvalue()


def _formats(sheet, row: int, *, quantity: bool = False) -> None:  # type: ignore[no-untyped-def]
    formats = {6: PRICE, 7: MONEY, 8: RATE, 9: MONEY, 10: MONEY}
    if quantity:
        formats[5] = QUANTITY
    for column, number_format in formats.items():
        sheet.cell(row, column).number_format = number_format


def invoice_xlsx(invoice: Invoice, language: str) -> bytes:
    with override(language):
        return render(invoice_document(invoice))
