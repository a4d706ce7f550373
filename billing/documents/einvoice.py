# ruff: noqa: RUF001 (the tax form's Chinese text keeps its full-width punctuation)
"""The 数电票 (全面数字化电子发票) request payload of an issued invoice, or the 红字 one of
a credit note: a JSON object a provider's invoicing system (or its tax service provider)
turns into the electronic invoice. gpulease never submits it to the tax platform.

It reads the same rows as the other exports (``rows``): each line's amount is the stored
one and its tax the line's share of its rate group's tax, so the lines add up to the
stored subtotal, tax and total to the fen; the payload is refused if they do not. Both
parties are the identities the document froze when it was issued; the invoice type
(专票/普票) is the tenant's setting. Each line's 税收分类编码 comes from
``settings.EINVOICE_TAX_CODES`` by the line's kind. Every payload is validated against
``schemas/einvoice-v1.json`` before it leaves. Vouchers (代金券) the invoice used are no
line: they are listed as ``payment_deductions`` and named in the remarks, the amounts and
tax unchanged.
"""

from __future__ import annotations

import json
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from django.conf import settings
from django.utils.translation import override

from billing.choices import BILLED_INVOICE_STATUSES, CreditNoteKind, InvoiceStatus, LineKind
from billing.documents.capital import capital_amount
from billing.documents.rows import Document, Row, credit_note_document, invoice_document
from billing.models import CreditNote, Invoice
from leases.choices import InvoiceType
from leases.uscc import check_uscc

SCHEMA_PATH = Path(__file__).parent / "schemas" / "einvoice-v1.json"
SCHEMA_ID = "gpulease-einvoice-v1"
HUNDRED = Decimal(100)
ZERO = Decimal("0.00")
REMARKS_MAX = 230
TYPE_NAMES = {
    InvoiceType.SPECIAL: "数电票（增值税专用发票）",
    InvoiceType.ORDINARY: "数电票（普通发票）",
}
# 冲红原因 of a 红字 数电票. gpulease infers only two (``red_letter_reason``): a commercial
# credit (an SLA credit or goodwill) is a 销售折让, a correction a 开票有误. 销货退回 and
# 服务中止 are in the schema for whoever edits a payload by hand.
RED_LETTER_REASONS = {
    "01": "开票有误",
    "02": "销货退回",
    "03": "服务中止",
    "04": "销售折让",
}
# A voucher (代金券, billing.vouchers) is paid with, after tax: it is no line and no 折扣.
VOUCHER_NOTE = "代金券抵扣：付款时扣减，不属于发票金额，不减少计税依据"
# What a 专票 needs of each party beyond name and tax ID, with the names the tax form uses.
SPECIAL_FIELDS = {
    "address": "address (地址)",
    "phone": "phone (电话)",
    "bank": "bank (开户行)",
    "account": "account (账号)",
}


class EInvoiceRefused(Exception):
    """The document cannot be a 数电票 request as it stands; ``str`` says why."""


class SchemaViolation(EInvoiceRefused):
    """The payload does not match einvoice-v1.json; the message names the path."""


@cache
def _validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def validate(payload: dict[str, Any]) -> None:
    """Raise SchemaViolation naming the first failing path (``lines/0/tax_code``)."""
    errors = sorted(_validator().iter_errors(payload), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = "/".join(str(part) for part in error.absolute_path) or "(the payload itself)"
        raise SchemaViolation(
            f"The 数电票 payload does not match {SCHEMA_PATH.name} at {where}: {error.message}"
        )


def _money(amount: Decimal) -> str:
    return f"{amount.quantize(Decimal('0.01')):f}"


def _plain(value: Decimal | None) -> str | None:
    return None if value is None else f"{value.normalize():f}"


def _rate(percent: Decimal) -> str:
    return f"{(percent / HUNDRED).normalize():f}"


def _party(side: str, party: dict[str, str], invoice_type: str) -> dict[str, str]:
    name = party.get("legal_name", "")
    if not name:
        raise EInvoiceRefused(f"The {side}'s legal name is missing.")
    uscc = party.get("tax_id", "")
    if not uscc:
        raise EInvoiceRefused(f"The {side} has no tax ID (统一社会信用代码).")
    try:
        check_uscc(uscc)
    except ValueError as exc:
        raise EInvoiceRefused(f"The {side}'s tax ID is not a 统一社会信用代码: {exc}") from None
    if invoice_type == InvoiceType.SPECIAL:
        missing = [label for key, label in SPECIAL_FIELDS.items() if not party.get(key)]
        if missing:
            raise EInvoiceRefused(
                f"A special VAT invoice (专票) needs the {side}'s address, phone, bank and "
                f"account as issued; missing: {', '.join(missing)}."
            )
    return {
        "name": name,
        "uscc": uscc,
        "address": party.get("address", ""),
        "phone": party.get("phone", ""),
        "bank": party.get("bank", ""),
        "account": party.get("account", ""),
    }


def _line(row: Row, *, red_letter: bool) -> dict[str, Any]:
    entry = settings.EINVOICE_TAX_CODES.get(row.line_kind)
    if not entry:
        raise EInvoiceRefused(
            f"Line {row.position} is a {LineKind(row.line_kind).label} line, and "
            f"EINVOICE_TAX_CODES has no 税收分类编码 for {row.line_kind!r}; add one (confirmed "
            "by the provider's tax advisor) before exporting."
        )
    return {
        "position": row.position,
        "name": f"*{entry['short_name']}*{entry['name']}",
        "tax_code": entry["code"],
        "spec": row.lease,
        "unit": row.unit,
        "quantity": _plain(row.quantity),
        "unit_price": _plain(row.unit_price),
        "amount": _money(row.amount),
        "rate": _rate(row.tax_rate_percent),
        "tax": _money(row.tax),
        "discount": not red_letter and row.amount < 0,
    }


def _add_up(document: Document) -> None:
    """The lines against the stored totals, to the fen."""
    amount = sum((row.amount for row in document.rows), ZERO)
    tax = sum((row.tax for row in document.rows), ZERO)
    if (amount, tax) != (document.subtotal, document.tax) or not document.check():
        raise EInvoiceRefused(
            f"{document.number}: its lines add up to {amount} + {tax} tax, but it states "
            f"{document.subtotal} + {document.tax}; it cannot be a 数电票 as it stands."
        )
    if document.subtotal + document.tax != document.total:
        raise EInvoiceRefused(
            f"{document.number}: {document.subtotal} + {document.tax} is not its total "
            f"{document.total}."
        )


def _remarks(document: Document, head: str) -> str:
    leases = sorted({row.lease for row in document.rows if row.lease})
    period = (
        f"账期 {document.period}（{document.period_start:%Y-%m-%d %H:%M} 至 "
        f"{document.period_end:%Y-%m-%d %H:%M} {document.zone}）"
    )
    parts = [head, period] if head else [period]
    if leases:
        shown = leases
        while len("；".join([*parts, "租约 " + "、".join(shown)])) > REMARKS_MAX and shown:
            shown = shown[:-1]
        more = f" 等 {len(leases)} 个" if len(shown) < len(leases) else ""
        parts.append("租约 " + "、".join(shown) + more)
    return "；".join(parts)[:REMARKS_MAX]


def _payload(
    document: Document, invoice_type: str, original: dict[str, str] | None, head: str
) -> dict[str, Any]:
    _add_up(document)
    red_letter = original is not None
    payload = {
        "schema": SCHEMA_ID,
        "document": document.kind,
        "number": document.number,
        "issue_date": document.issue_date.isoformat() if document.issue_date else "",
        "invoice_type": str(invoice_type),
        "invoice_type_name": TYPE_NAMES[InvoiceType(invoice_type)],
        "red_letter": red_letter,
        "original": original,
        "currency": document.currency,
        "seller": _party("seller", document.seller, invoice_type),
        "buyer": _party("buyer", document.buyer, invoice_type),
        "lines": [_line(row, red_letter=red_letter) for row in document.rows],
        "totals": {
            "amount": _money(document.subtotal),
            "tax": _money(document.tax),
            "total": _money(document.total),
            "total_in_words": capital_amount(document.total),
        },
        "remarks": _remarks(document, head),
    }
    validate(payload)
    return payload


def invoice_payload(invoice: Invoice) -> dict[str, Any]:
    """The 数电票 request of an issued (or paid) invoice; EInvoiceRefused otherwise."""
    if invoice.status not in BILLED_INVOICE_STATUSES:
        state = InvoiceStatus(invoice.status).label
        raise EInvoiceRefused(
            f"Only issued invoices have a 数电票 payload; {invoice.label} is {state}."
        )
    with override("zh-hans"):
        document = invoice_document(invoice)
    used = [r for r in invoice.voucher_redemptions.select_related("voucher").order_by("at", "pk")]
    head = "；".join(
        f"代金券 {r.voucher.number} 抵扣 {_money(r.amount)} 元（付款抵扣，不减少计税金额）"
        for r in used
    )
    payload = _payload(document, invoice.tenant.invoice_type, None, head)
    if used:
        payload["payment_deductions"] = [
            {
                "kind": "voucher",
                "number": r.voucher.number,
                "amount": _money(r.amount),
                "note": VOUCHER_NOTE,
            }
            for r in used
        ]
        validate(payload)
    return payload


def red_letter_reason(note: CreditNote) -> str:
    """The 冲红原因 code: 04 销售折让 for a commercial credit (an SLA credit or goodwill
    granted on a delivered service: its price is reduced); 01 开票有误 for a correction of
    a wrong figure, a full reversal included. A credit note never takes back part of an SLA
    credit line (that would add money), so corrections are never 折让."""
    return "04" if note.kind == CreditNoteKind.COMMERCIAL else "01"


def credit_note_payload(note: CreditNote) -> dict[str, Any]:
    """The 红字 数电票 request of a credit note: negative amounts, against its invoice."""
    if note.total >= 0:
        raise EInvoiceRefused(
            f"Credit note {note.number} adds {note.total} to its invoice; a 红字 数电票 only "
            "takes amounts off. Bill the difference on a new invoice instead."
        )
    invoice = note.invoice
    code = red_letter_reason(note)
    original = {
        "number": invoice.number or "",
        "issue_date": invoice.issue_date.isoformat() if invoice.issue_date else "",
        "reason_code": code,
        "reason_name": RED_LETTER_REASONS[code],
        "reason": note.reason,
    }
    with override("zh-hans"):
        document = credit_note_document(note)
    head = f"红字 {note.number}，对应蓝字发票 {invoice.number}"
    return _payload(document, note.tenant.invoice_type, original, head)


def filename(payload: dict[str, Any]) -> str:
    prefix = "credit-note" if payload["document"] == "credit_note" else "invoice"
    return f"{prefix}-{payload['number']}-einvoice.json"


def as_json(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, ensure_ascii=False, indent=2).encode("utf-8")
