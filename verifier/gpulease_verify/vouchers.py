"""Vouchers (代金券): an SLA credit given as a voucher rather than a negative invoice line,
from an audit bundle alone.

Where the terms version whose tiers and cap give a lease's credit (the one in force at the
end of the billed window) says ``credit_mode`` ``voucher``, the month's invoice carries no
SLA credit line: issuing it issues a voucher instead, in the same transaction, with

- amount: the credit recomputed exactly as a line would be, with the sign turned
  (a credit of -1,635.80 is a voucher of 1,635.80);
- issued_at: the invoice's ``issued_at``;
- expires_at: issued_at plus the version's ``voucher_validity_months`` calendar months in
  the tenant's zone, the day clamped to the month's last (31 January + 1 month = 28 or 29
  February), the same time of day (``expiry``).

The tenant's next invoices use it up: each, when issued, applies its open vouchers (not
void, not expired at that instant: a voucher whose ``expires_at`` is the issue instant is
expired) to its payable total after tax, earliest expiry first, never more than the voucher
has left nor more than the invoice's total. A redemption is not a VAT line: the invoice's
subtotal, tax and total stay as its lines give them. A redemption on an invoice voided
since is released: it counts for nothing.

Checked here: each voucher's expiry from its issue and validity; each live redemption
inside [issued_at, expires_at), above zero; the live redemptions of a voucher adding up to
no more than its amount; the redemptions of the bundle's invoice adding up to no more than
its total, each stated on both sides (the invoice's list and the voucher's ledger) alike.
This module reads no database.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from gpulease_verify.canonical import parse_instant

LINE, VOUCHER = "line", "voucher"
ZERO = Decimal("0.00")
VOID = "void"


def expiry(issued_at: datetime, months: int, zone: str) -> datetime:
    """issued_at + ``months`` calendar months in ``zone``, the day clamped to the month."""
    local = issued_at.astimezone(ZoneInfo(zone))
    index = local.month - 1 + months
    year, month = local.year + index // 12, index % 12 + 1
    day = min(local.day, calendar.monthrange(year, month)[1])
    return local.replace(year=year, month=month, day=day)


def is_open(expires_at: datetime, at: datetime) -> bool:
    """Whether a voucher can still be used at ``at``: strictly before its expiry."""
    return at < expires_at


def credit_mode(terms: Mapping[str, Any] | None) -> str:
    """The version's ``credit_mode``; a version from before vouchers: a line."""
    return LINE if terms is None else str(terms.get("credit_mode", LINE))


def _ledger(voucher: Mapping[str, Any], zone: str, name: str) -> list[str]:
    problems = []
    issued = parse_instant(voucher["issued_at"])
    expires = parse_instant(voucher["expires_at"])
    months = int(voucher["validity_months"])
    due = expiry(issued, months, zone)
    if expires != due:
        problems.append(
            f"{name} expires_at: the bundle says {voucher['expires_at']}, {months} month(s) "
            f"from its issue at {voucher['issued_at']} ({zone}) is {due.isoformat()}"
        )
    amount = Decimal(voucher["amount"])
    if amount <= 0:
        problems.append(f"{name} amount: the bundle says {amount}, a voucher is above zero")
    used = ZERO
    for row in voucher.get("redemptions", []):
        if row.get("invoice_status") == VOID:
            continue  # released by the void of the invoice that applied it
        label = f"{name} redemption on invoice {row['invoice_number']}"
        taken, at = Decimal(row["amount"]), parse_instant(row["at"])
        if taken <= 0:
            problems.append(f"{label}: {taken} takes nothing off")
        if not issued <= at < expires:
            problems.append(
                f"{label} at {row['at']}: outside the voucher's validity "
                f"[{voucher['issued_at']}, {voucher['expires_at']})"
            )
        used += taken
    if used > amount:
        problems.append(f"{name}: its redemptions add up to {used}, more than its amount {amount}")
    return problems


def expected_amount(credit_amount: Decimal) -> Decimal:
    """The voucher a credit gives: the credit (negative) with the sign turned."""
    return -credit_amount


def check(
    bundle: Mapping[str, Any],
    credit_amount: Decimal | None,
    terms: Mapping[str, Any] | None,
) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of the vouchers the bundle's invoice issued for its lease and of
    those it applied. ``credit_amount``: the lease's credit as recomputed (negative), or
    None when the month earns none; it is the voucher's amount in voucher mode. ``terms``:
    the version in force at the end of the billed window (its ``credit_mode``)."""
    invoice = bundle.get("invoice") or {}
    zone = bundle["period"]["time_zone"]
    issued = invoice.get("vouchers_issued")
    applied = invoice.get("vouchers_applied")
    if issued is None and applied is None:
        return [], []  # a bundle from before vouchers
    issued, applied = issued or [], applied or []
    problems: list[str] = []
    billed = invoice.get("source") == "invoice" and invoice.get("issued_at") is not None
    wanted = (
        expected_amount(credit_amount)
        if billed and credit_amount is not None and credit_amount != 0
        else None
    )
    mode = credit_mode(terms)
    if mode == VOUCHER and wanted is not None:
        if len(issued) != 1:
            problems.append(
                f"vouchers: the credit of {credit_amount} is due as one voucher of {wanted}, "
                f"the invoice issued {len(issued)}"
            )
    elif issued:
        problems.append(
            f"vouchers: the invoice issued {len(issued)} voucher(s) for the lease, but "
            + ("its terms give the credit as a line" if mode == LINE else "no credit is due")
        )
    for voucher in issued:
        name = f"voucher {voucher['number']}"
        if wanted is not None and Decimal(voucher["amount"]) != wanted:
            problems.append(
                f"{name} amount: the bundle says {voucher['amount']}, the credit recomputed "
                f"is {credit_amount}: a voucher of {wanted}"
            )
        if voucher.get("issued_at") != invoice.get("issued_at"):
            problems.append(
                f"{name} issued_at: the bundle says {voucher.get('issued_at')}, its invoice "
                f"was issued at {invoice.get('issued_at')}"
            )
        problems += _ledger(voucher, zone, name)
    on_invoice = ZERO
    for row in applied:
        voucher = row["voucher"]
        name = f"voucher {voucher['number']}"
        problems += _ledger(voucher, zone, name)
        mine = [
            r
            for r in voucher.get("redemptions", [])
            if r["invoice_number"] == invoice.get("number")
        ]
        if [Decimal(r["amount"]) for r in mine] != [Decimal(row["amount"])]:
            problems.append(
                f"{name}: the invoice applies {row['amount']} of it, its ledger says "
                + (", ".join(str(r["amount"]) for r in mine) or "nothing")
            )
        if invoice.get("status") != VOID:
            on_invoice += Decimal(row["amount"])
    total = invoice.get("invoice_total")
    if total is not None and on_invoice > max(Decimal(total), ZERO):
        problems.append(
            f"vouchers: the invoice applies {on_invoice} of vouchers, more than its total {total}"
        )
    numbers = ", ".join(v["number"] for v in issued) or "none"
    return problems, [
        f"vouchers: {len(issued)} issued ({numbers}), {len(applied)} applied ({on_invoice}): "
        "amounts from the credit, expiry from the validity, redemptions within both"
    ]


__all__ = ["LINE", "VOUCHER", "check", "credit_mode", "expected_amount", "expiry", "is_open"]
