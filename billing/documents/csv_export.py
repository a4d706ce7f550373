"""The invoice as CSV: one row per line with its tax rate and tax, then a row per tax
rate and the subtotal, tax and total. UTF-8 with a BOM, so that spreadsheet programs read
the Chinese text. Figures are numbers; text that a spreadsheet would read as a formula is
quoted (``cells``)."""

from __future__ import annotations

from decimal import Decimal
from typing import TextIO

from django.utils.translation import gettext as _

from billing.documents import cells
from billing.documents.rows import Document

BOM = "\ufeff"


def write(document: Document, stream: TextIO) -> None:
    """Write the document built in the language that is active now."""
    stream.write(BOM)
    writer = cells.CsvWriter(stream)
    writer.writerow(
        [
            _("position"),
            _("lease"),
            _("kind"),
            _("description"),
            _("quantity"),
            _("unit"),
            _("unit price (¥)"),
            _("amount (¥)"),
            _("tax rate (percent)"),
            _("tax (¥)"),
            _("amount incl. tax (¥)"),
        ]
    )
    for row in document.rows:
        writer.writerow(
            [
                row.position,
                row.lease,
                row.kind,
                row.description,
                "" if row.quantity is None else Decimal(f"{row.quantity.normalize():f}"),
                row.unit,
                "" if row.unit_price is None else row.unit_price,
                row.amount,
                row.tax_rate_percent,
                row.tax,
                row.amount_with_tax,
            ]
        )
    for group in document.by_rate:
        label = _("at %(rate)s%% tax") % {"rate": f"{group.tax_rate_percent.normalize():f}"}
        writer.writerow(
            [
                "",
                "",
                "",
                label,
                "",
                "",
                "",
                group.amount,
                group.tax_rate_percent,
                group.tax,
                group.amount_with_tax,
            ]
        )
    # Each total under its own column: subtotal under amount, tax under tax, total last.
    blank = [""] * 7
    writer.writerow(["", "", "", _("subtotal (¥)"), *blank[:3], document.subtotal, "", "", ""])
    writer.writerow(["", "", "", _("tax (¥)"), *blank[:3], "", "", document.tax, ""])
    writer.writerow(["", "", "", _("total (¥)"), *blank[:3], "", "", "", document.total])
