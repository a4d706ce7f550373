"""The invoice (and credit note) as a PDF, rendered on the server with reportlab.

Chinese text is set in WenQuanYi Zen Hei, a TrueType font that Debian's fonts-wqy-zenhei
installs, embedded in the PDF (only the glyphs used), so the invoice looks the same in
every reader and is archivable; a reader needs no Asian font pack of its own. (Noto CJK,
which the portal's pages use, is CFF-based OpenType, which reportlab cannot embed.) Without
the font file the PDF is refused with an error that names the package. Text that Latin-1
covers (numbers, amounts, English labels) is set in Helvetica. Drafts carry a
large diagonal "DRAFT / 草稿", voided invoices "VOID / 作废", on every page. The lines
table wraps long text inside its cells and repeats its header row on every page; the
totals, with the credit notes netted and the amount due (``billing.balance``), stay
together on one page; every page is numbered "page n of N".
"""

from __future__ import annotations

import io
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from django.utils.translation import gettext as _
from django.utils.translation import override, pgettext
from reportlab.lib import colors
from reportlab.lib.enums import TA_RIGHT
from reportlab.lib.pagesizes import A4, landscape
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont
from reportlab.pdfgen import canvas as pdf_canvas
from reportlab.platypus import (
    KeepTogether,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from billing.documents.rows import Document, credit_note_document, invoice_document, rate_label
from billing.models import CreditNote, Invoice

CJK_FONT = "WenQuanYiZenHei"  # the font's PostScript name, as the PDF names it
CJK_FONT_FILE = Path("/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc")
CJK_FONT_INDEX = 0  # the .ttc's first face: Zen Hei (then Mono, Sharp)
CJK_FONT_PACKAGE = "fonts-wqy-zenhei"
LATIN_FONT = "Helvetica"
LATIN_BOLD = "Helvetica-Bold"
PAGE = landscape(A4)
MARGIN = 12 * mm
GRID = colors.HexColor("#999999")
HEAD = colors.HexColor("#eeeeee")
# Each line's columns, in points; they add up to the page's width inside the margins.
LINE_WIDTHS = (22, 70, 70, 196, 62, 42, 62, 66, 38, 58, 70)


class MissingFont(RuntimeError):
    """The TrueType CJK font is not installed: no PDF rather than one without its Chinese."""


@cache
def _register(path: Path) -> None:
    pdfmetrics.registerFont(TTFont(CJK_FONT, str(path), subfontIndex=CJK_FONT_INDEX))


def _fonts() -> None:
    if not CJK_FONT_FILE.is_file():
        raise MissingFont(
            f"invoice PDFs embed the TrueType CJK font {CJK_FONT_FILE}, which is missing: "
            f"install Debian's {CJK_FONT_PACKAGE} (apt-get install {CJK_FONT_PACKAGE})"
        )
    _register(CJK_FONT_FILE)


def _latin(text: str) -> bool:
    try:
        text.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def _style(text: str, size: float, *, bold: bool = False, right: bool = False) -> ParagraphStyle:
    latin = _latin(text)
    return ParagraphStyle(
        "cell",
        fontName=(LATIN_BOLD if bold else LATIN_FONT) if latin else CJK_FONT,
        fontSize=size,
        leading=size * 1.25,
        alignment=TA_RIGHT if right else 0,
        wordWrap=None if latin else "CJK",
    )


def _p(text: Any, size: float = 8, **style: bool) -> Paragraph:
    text = "" if text is None else str(text)
    return Paragraph(escape(text), _style(text, size, **style))


def _money(amount: Decimal) -> str:
    return f"{amount:,.2f}"


def _quantity(value: Decimal | None) -> str:
    return "" if value is None else f"{value.normalize():f}"


def _date(value: Any) -> str:
    return value.isoformat() if value else "-"


def _grid(data: list[list[Any]], widths: tuple[float, ...], *, header: bool) -> Table:
    table = Table(data, colWidths=widths, repeatRows=1 if header else 0)
    style = [
        ("GRID", (0, 0), (-1, -1), 0.4, GRID),
        ("VALIGN", (0, 0), (-1, -1), "TOP"),
        ("LEFTPADDING", (0, 0), (-1, -1), 3),
        ("RIGHTPADDING", (0, 0), (-1, -1), 3),
    ]
    if header:
        style.append(("BACKGROUND", (0, 0), (-1, 0), HEAD))
    table.setStyle(TableStyle(style))
    return table


def _title(document: Document) -> str:
    if document.kind == "credit_note":
        return pgettext("document title", "Credit note")
    return pgettext("document title", "Invoice")


def _head(document: Document) -> list[list[Any]]:
    pairs = [
        (_("number"), document.number or _("none until issued")),
        (_("status"), document.status_label),
        (
            _("period"),
            f"{document.period} ({document.period_start:%Y-%m-%d %H:%M} \N{EN DASH} "
            f"{document.period_end:%Y-%m-%d %H:%M} {document.zone})",
        ),
        (_("issue date"), _date(document.issue_date)),
    ]
    if document.kind == "credit_note":
        pairs += [(_("original invoice"), document.original_number), (_("reason"), document.reason)]
    else:
        pairs.append((_("due date"), _date(document.due_date)))
    return [[_p(label, 9, bold=True), _p(value, 9)] for label, value in pairs]


def _parties(document: Document) -> list[list[Any]]:
    labels = (
        ("legal_name", _("legal name")),
        ("tax_id", _("tax ID")),
        ("address", _("address")),
        ("phone", _("phone")),
        ("bank", _("bank")),
        ("account", _("account")),
    )
    data = [["", _p(_("seller"), 9, bold=True), _p(_("buyer"), 9, bold=True)]]
    data += [
        [_p(label, 8, bold=True), _p(document.seller[key]), _p(document.buyer[key])]
        for key, label in labels
    ]
    return data


def _lines(document: Document) -> list[list[Any]]:
    header = [
        "#",
        _("lease"),
        _("kind"),
        _("description"),
        _("quantity"),
        _("unit"),
        _("unit price (¥)"),
        _("amount (¥)"),
        _("tax rate"),
        _("tax (¥)"),
        _("amount incl. tax (¥)"),
    ]
    data = [[_p(text, 7.5, bold=True) for text in header]]
    for row in document.rows:
        data.append(
            [
                _p(row.position),
                _p(row.lease),
                _p(row.kind),
                _p(row.description),
                _p(_quantity(row.quantity), right=True),
                _p(row.unit),
                _p("" if row.unit_price is None else f"{row.unit_price:,}", right=True),
                _p(_money(row.amount), right=True),
                _p(rate_label(row.tax_rate_percent), right=True),
                _p(_money(row.tax), right=True),
                _p(_money(row.amount_with_tax), right=True),
            ]
        )
    return data


def _totals(document: Document) -> list[list[Any]]:
    data = [
        [
            _p(_("tax rate"), bold=True),
            _p(_("amount (¥)"), bold=True, right=True),
            _p(_("tax (¥)"), bold=True, right=True),
            _p(_("amount incl. tax (¥)"), bold=True, right=True),
        ]
    ]
    for group in document.by_rate:
        data.append(
            [
                _p(rate_label(group.tax_rate_percent)),
                _p(_money(group.amount), right=True),
                _p(_money(group.tax), right=True),
                _p(_money(group.amount_with_tax), right=True),
            ]
        )
    data.append(
        [
            _p(_("total"), bold=True),
            _p(_money(document.subtotal), bold=True, right=True),
            _p(_money(document.tax), bold=True, right=True),
            _p(_money(document.total), bold=True, right=True),
        ]
    )
    return data + _balance_rows(document)


def _balance_rows(document: Document) -> list[list[Any]]:
    """Under an invoice's totals: its credit notes netted, and what is due or owed back."""
    owed = document.balance
    if owed is None:
        return []
    rows: list[tuple[str, Decimal]] = []
    if owed.credited:
        rows += [
            (_("credit notes (¥)"), owed.credit_notes_total),
            (_("total after credit notes (¥)"), owed.net),
        ]
    if owed.vouchers:
        rows.append((_("vouchers applied, after tax (¥)"), -owed.vouchers))
    if owed.due is not None:
        rows.append((_("amount due (¥)"), owed.due))
    if owed.refund:
        rows.append((_("refund due to you (¥)"), owed.refund))
    data = [
        [_p(label, bold=True), "", "", _p(_money(amount), bold=True, right=True)]
        for label, amount in rows
    ]
    data.append([_p(_("payment status"), bold=True), "", "", _p(owed.status_label, right=True)])
    return data


def _stamp(document: Document) -> tuple[str, str] | None:
    if document.is_draft:
        return ("DRAFT", "草稿")
    if document.is_void:
        return ("VOID", "作废")
    return None


def _page(document: Document):  # type: ignore[no-untyped-def]
    stamp = _stamp(document)

    def draw(canvas: Any, template: Any) -> None:
        canvas.saveState()
        width, height = PAGE
        if stamp:
            canvas.setFillColor(colors.Color(0.8, 0.1, 0.1, alpha=0.18))
            canvas.translate(width / 2, height / 2)
            canvas.rotate(30)
            canvas.setFont(LATIN_BOLD, 110)
            canvas.drawCentredString(0, 10, stamp[0])
            canvas.setFont(CJK_FONT, 90)
            canvas.drawCentredString(0, -90, stamp[1])
            canvas.rotate(-30)
            canvas.translate(-width / 2, -height / 2)
        canvas.setFillColor(colors.black)
        canvas.restoreState()

    return draw


def _numbered(document: Document) -> type[pdf_canvas.Canvas]:
    """A canvas that holds its pages until the end, so each can say "page n of N"."""
    label = document.number or document.period

    class Numbered(pdf_canvas.Canvas):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._pages: list[dict[str, Any]] = []

        def showPage(self) -> None:
            self._pages.append(dict(self.__dict__))
            self._startPage()

        def save(self) -> None:
            total = len(self._pages)
            for state in self._pages:
                self.__dict__.update(state)
                footer = _("%(document)s · page %(page)s of %(pages)s") % {
                    "document": label,
                    "page": self._pageNumber,
                    "pages": total,
                }
                self.setFont(LATIN_FONT if _latin(footer) else CJK_FONT, 7)
                self.drawRightString(PAGE[0] - MARGIN, MARGIN / 2, footer)
                super().showPage()
            super().save()

    return Numbered


def render(document: Document) -> bytes:
    """The PDF of a document built in the language that is active now."""
    _fonts()
    buffer = io.BytesIO()
    title = _title(document)
    pdf = SimpleDocTemplate(
        buffer,
        pagesize=PAGE,
        leftMargin=MARGIN,
        rightMargin=MARGIN,
        topMargin=MARGIN,
        bottomMargin=MARGIN,
        title=f"{title} {document.number or document.period}",
        author=document.seller["legal_name"],
    )
    story: list[Any] = [
        _p(title, 18, bold=True),
        Spacer(1, 4 * mm),
        _grid(_head(document), (110, 400), header=False),
        Spacer(1, 4 * mm),
        _grid(_parties(document), (90, 300, 300), header=True),
        Spacer(1, 5 * mm),
        _grid(_lines(document), LINE_WIDTHS, header=True),
        Spacer(1, 4 * mm),
    ]
    closing: list[Any] = [
        _grid(_totals(document), (110, 110, 110, 130), header=True),
        Spacer(1, 3 * mm),
    ]
    if document.network_cost_share is not None:
        share = f"{(document.network_cost_share * 100).quantize(Decimal('0.01'))}%"
        closing.append(_p(f"{_('network cost share')}: {share}", 8))
    for note in document.notes:
        closing.append(_p(note, 8))
    story.append(KeepTogether(closing))
    draw = _page(document)
    pdf.build(story, onFirstPage=draw, onLaterPages=draw, canvasmaker=_numbered(document))
    return buffer.getvalue()


def invoice_pdf(invoice: Invoice, language: str) -> bytes:
    with override(language):
        return render(invoice_document(invoice))


def credit_note_pdf(note: CreditNote, language: str) -> bytes:
    with override(language):
        return render(credit_note_document(note))
