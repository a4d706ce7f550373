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
from gpulease_verify.money import to_fen

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


def _live(row: Mapping[str, Any]) -> bool:
    return row.get("invoice_status") != VOID


def _kept(row: Mapping[str, Any]) -> Decimal:
    """What a redemption still pays: its amount less what credit notes gave back."""
    return Decimal(row["amount"]) - sum(
        (Decimal(b["amount"]) for b in row.get("returns", [])), ZERO
    )


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
        if not _live(row):
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
        kept = _kept(row)
        if kept < 0:
            problems.append(f"{label}: credit notes gave back more than it used ({taken})")
        used += kept
    reduced = sum((Decimal(r["amount"]) for r in voucher.get("reductions", []) if _live(r)), ZERO)
    if used + reduced > amount:
        problems.append(
            f"{name}: its redemptions add up to {used}, more than its amount {amount}"
            if reduced == 0
            else f"{name}: its redemptions ({used}) and reductions ({reduced}) add up to "
            f"{used + reduced}, more than its amount {amount}"
        )
    return problems


def _left_before(voucher: Mapping[str, Any], at: datetime) -> Decimal:
    """What the voucher had left unused just before ``at``: a reduction found at an issue
    comes before that issue's redemptions."""
    left = Decimal(voucher["amount"])
    for row in voucher.get("redemptions", []):
        if _live(row) and parse_instant(row["at"]) < at:
            left -= Decimal(row["amount"])
            left += sum(
                (
                    Decimal(b["amount"])
                    for b in row.get("returns", [])
                    if parse_instant(b["at"]) < at
                ),
                ZERO,
            )
    for row in voucher.get("reductions", []):
        if _live(row) and parse_instant(row["at"]) < at:
            left -= Decimal(row["amount"])
    return left


def _month(
    issued: list[Mapping[str, Any]], invoice_number: str | None
) -> tuple[Decimal, list[str], bool]:
    # long: one replay in time order; supplements and reductions share its running total
    """Replay the month's vouchers in time order: the original(s) the month's invoice
    issued, the supplements and reductions late results made (each stating what the
    month's vouchers gave before and the voucher the credit was recomputed to). Returns
    (what they give in all, problems, whether any late change is among them)."""
    problems: list[str] = []
    live = [
        v for v in issued if v.get("voided_at") is None and v.get("source_invoice_status") != VOID
    ]
    events: list[tuple[datetime, int, str, Any]] = []
    for voucher in live:
        events.append((parse_instant(voucher["issued_at"]), 0, "issue", voucher))
        batches: dict[str, list[Mapping[str, Any]]] = {}
        for row in voucher.get("reductions", []):
            if _live(row):
                batches.setdefault(row["invoice_number"], []).append(row)
        for number, rows in batches.items():
            events.append((parse_instant(rows[0]["at"]), 1, number, (voucher, rows)))
    events.sort(key=lambda e: (e[0], e[1]))
    # Reductions found by one invoice's issue, over every voucher of the month.
    grouped: list[tuple[datetime, str, list[tuple[Mapping[str, Any], Mapping[str, Any]]]]] = []
    for at, order, kind, item in events:
        if order == 0:
            grouped.append((at, "issue", [(item, item)]))
            continue
        voucher, rows = item
        if grouped and grouped[-1][1] == kind and grouped[-1][0] == at:
            grouped[-1][2].extend((voucher, row) for row in rows)
        else:
            grouped.append((at, kind, [(voucher, row) for row in rows]))
    net = ZERO
    late = False
    for at, kind, items in grouped:
        if kind == "issue":
            voucher = items[0][0]
            name = f"voucher {voucher['number']}"
            amount = Decimal(voucher["amount"])
            if voucher.get("source_invoice_number") != invoice_number:
                late = True
                stated = voucher.get("adjustment") or {}
                before = Decimal(stated.get("given_before") or "0")
                recomputed = Decimal(stated.get("recomputed") or "0")
                if before != net:
                    problems.append(
                        f"{name}: issued as if the month's vouchers gave {before}, they gave {net}"
                    )
                if amount != recomputed - before:
                    problems.append(
                        f"{name} amount: the bundle says {amount}, its month's credit was "
                        f"recomputed from {before} to {recomputed}: a supplement of "
                        f"{recomputed - before}"
                    )
                if voucher.get("issued_at") != voucher.get("source_invoice_issued_at"):
                    problems.append(
                        f"{name} issued_at: the bundle says {voucher.get('issued_at')}, the "
                        f"invoice that issued it was issued at "
                        f"{voucher.get('source_invoice_issued_at')}"
                    )
            net += amount
            continue
        late = True
        first_voucher, first_row = items[0]
        stated = first_row.get("adjustment") or {}
        before = Decimal(stated.get("given_before") or "0")
        recomputed = Decimal(stated.get("recomputed") or "0")
        taken = sum((Decimal(row["amount"]) for _v, row in items), ZERO)
        excess = sum((Decimal(row["excess"]) for _v, row in items), ZERO)
        label = f"voucher {first_voucher['number']} reduction on invoice {kind}"
        if before != net:
            problems.append(
                f"{label}: made as if the month's vouchers gave {before}, they gave {net}"
            )
        if taken + excess != before - recomputed:
            problems.append(
                f"{label}: {taken} taken off and {excess} not recovered, but the month's "
                f"credit was recomputed from {before} to {recomputed}: {before - recomputed}"
            )
        for voucher, row in items:
            left = _left_before(voucher, at)
            amount = Decimal(row["amount"])
            if amount > left:
                problems.append(
                    f"voucher {voucher['number']} reduction on invoice {kind}: takes off "
                    f"{amount}, only {left} was left unused"
                )
        if excess > 0:
            for voucher, row in items:
                unused = _left_before(voucher, at) - Decimal(row["amount"])
                if unused > 0:
                    problems.append(
                        f"voucher {voucher['number']} reduction on invoice {kind}: {excess} "
                        f"recorded as not recovered while {unused} was left unused"
                    )
        net -= taken + excess
    return net, problems, late


def _returns(row: Mapping[str, Any], invoice: Mapping[str, Any], name: str) -> list[str]:
    """Each credit note of the invoice gives the redemption back its share of what the
    notes credited so far, less what the notes before it gave (``returned``)."""
    problems = []
    total = Decimal(invoice.get("invoice_total") or "0")
    redeemed = Decimal(row["amount"])
    stated = {b["credit_note_number"]: Decimal(b["amount"]) for b in row.get("returns", [])}
    credited = ZERO
    back_before = ZERO
    for note in sorted(invoice.get("credit_notes", []), key=lambda n: n["issued_at"]):
        credited -= Decimal(note["total"])
        due = returned(redeemed, credited, total) - back_before
        given = stated.pop(note["number"], ZERO)
        if given != due:
            problems.append(
                f"{name}: credit note {note['number']} gives back {given} of the {redeemed} "
                f"the invoice used; its share of {credited} credited of {total} is {due}"
            )
        back_before += due
    for number, amount in stated.items():
        problems.append(f"{name}: {amount} given back by credit note {number}, not in the bundle")
    return problems


def money_text(value: Decimal) -> str:
    return str(to_fen(value))


def returned(redeemed: Decimal, credited: Decimal, total: Decimal) -> Decimal:
    """What a redemption of ``redeemed`` on an invoice of ``total`` gets back once its credit
    notes have credited ``credited`` in all (tax included, every note so far): the
    voucher's share of the credited part, redeemed x credited / total, half-up to 0.01,
    never more than it redeemed. Each note gives back what this says after it less what
    the notes before it gave, so a full reversal gives back exactly what was redeemed."""
    if total <= 0 or credited <= 0:
        return ZERO
    return to_fen(redeemed * min(credited, total) / total)


def expected_amount(credit_amount: Decimal) -> Decimal:
    """The voucher a credit gives: the credit (negative) with the sign turned."""
    return -credit_amount


def check(
    bundle: Mapping[str, Any],
    credit_amount: Decimal | None,
    terms: Mapping[str, Any] | None,
) -> tuple[list[str], list[str]]:
    # long: the checks of one bundle's vouchers in the order an auditor reads them, one list
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
    net, month_problems, late = _month(issued, invoice.get("number"))
    if mode == VOUCHER and wanted is not None:
        if not issued:
            problems.append(
                f"vouchers: the credit of {credit_amount} is due as one voucher of {wanted}, "
                f"the invoice issued 0"
            )
    elif issued and not late:
        problems.append(
            f"vouchers: the invoice issued {len(issued)} voucher(s) for the lease, but "
            + ("its terms give the credit as a line" if mode == LINE else "no credit is due")
        )
    for voucher in issued:
        name = f"voucher {voucher['number']}"
        original = voucher.get("source_invoice_number") == invoice.get("number")
        if original and not late and wanted is not None and Decimal(voucher["amount"]) != wanted:
            problems.append(
                f"{name} amount: the bundle says {voucher['amount']}, the credit recomputed "
                f"is {credit_amount}: a voucher of {wanted}"
            )
        if original and voucher.get("issued_at") != invoice.get("issued_at"):
            problems.append(
                f"{name} issued_at: the bundle says {voucher.get('issued_at')}, its invoice "
                f"was issued at {invoice.get('issued_at')}"
            )
        problems += _ledger(voucher, zone, name)
    problems += month_problems
    if late and billed and mode == VOUCHER and net != (wanted or ZERO):
        problems.append(
            f"vouchers: the month's vouchers give {net} in all, the credit recomputed is "
            f"{credit_amount}: {wanted or ZERO}"
        )
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
        problems += _returns(row, invoice, name)
        if invoice.get("status") != VOID:
            on_invoice += Decimal(row["amount"])
    total = invoice.get("invoice_total")
    if total is not None and on_invoice > max(Decimal(total), ZERO):
        problems.append(
            f"vouchers: the invoice applies {on_invoice} of vouchers, more than its total {total}"
        )
    numbers = ", ".join(v["number"] for v in issued) or "none"
    adjusted = f"; late results adjusted them to {net} in all" if late else ""
    return problems, [
        f"vouchers: {len(issued)} issued ({numbers}), {len(applied)} applied ({on_invoice}): "
        f"amounts from the credit, expiry from the validity, redemptions within both"
        f"{adjusted}"
    ]


__all__ = ["LINE", "VOUCHER", "check", "credit_mode", "expected_amount", "expiry", "is_open"]
