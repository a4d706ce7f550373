"""How an invoice reads outside the app: the JSON-ready summary the ``bill`` command prints
and writes, and the sentence shown when someone asks to change an issued invoice."""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext as _

from billing.invoicing.computed import iso
from billing.models import Invoice


def issued_message(invoice: Invoice) -> str:
    """The sentence a caller shows when asked to change an issued invoice."""
    return _(
        "Invoice %(invoice)s is %(status)s; it cannot change. Later results go on the next "
        "invoice as adjustments; a correction is a credit note."
    ) % {"invoice": invoice.label, "status": invoice.get_status_display()}


def invoice_summary(invoice: Invoice) -> dict[str, Any]:
    """The invoice as one JSON-ready dict (Decimals as strings, times ISO UTC). Every line
    gives its tax rate; ``tax_groups`` gives the subtotal, tax and total per rate (tax
    rounded once per group), which add up to the invoice's ``tax``; ``tax_rate_percent`` is
    the rate all lines share, or None when they differ."""
    lines = list(invoice.lines.select_related("lease").order_by("position"))
    return {
        "id": invoice.pk,
        "tenant": invoice.tenant.slug,
        "tenant_name": invoice.tenant.name,
        "period": invoice.period,
        "period_start": iso(invoice.period_start),
        "period_end": iso(invoice.period_end),
        "time_zone": invoice.tenant.time_zone,
        "status": invoice.status,
        "number": invoice.number,
        "issued_at": iso(invoice.issued_at),
        "issue_date": invoice.issue_date.isoformat() if invoice.issue_date else None,
        "due_date": invoice.due_date.isoformat() if invoice.due_date else None,
        "seller": invoice.seller,
        "buyer": invoice.buyer,
        "forced_reason": invoice.forced_reason,
        "metering_gaps": invoice.metering_gaps,
        "void_reason": invoice.void_reason,
        "currency": invoice.currency,
        "lines": [
            {
                "position": line.position,
                "lease": line.lease.reference if line.lease else None,
                "kind": line.kind,
                "description": line.description,
                "quantity": str(line.quantity),
                "unit": line.unit,
                "unit_price": str(line.unit_price),
                "amount": str(line.amount),
                "tax_rate_percent": str(line.tax_rate_percent),
                "detail": line.detail,
            }
            for line in lines
        ],
        "subtotal": str(invoice.subtotal),
        "tax_rate_percent": (
            None if invoice.tax_rate_percent is None else str(invoice.tax_rate_percent)
        ),
        "tax_groups": [
            {
                "tax_rate_percent": str(group.tax_rate_percent),
                "subtotal": str(group.subtotal),
                "tax": str(group.tax),
                "total": str(group.total),
            }
            for group in invoice.tax_groups
        ],
        "tax": str(invoice.tax),
        "total": str(invoice.total),
        "network_cost_share": (
            None if invoice.network_cost_share is None else str(invoice.network_cost_share)
        ),
    }
