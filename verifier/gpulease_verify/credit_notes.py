"""The invoice's credit notes (红字发票) and lifecycle events, from an audit bundle alone.

A credit note corrects lines of the invoice it references (``billing.services``
``create_credit_note``): each of its lines names the invoice line it corrects by position
(the bundle's ``lines`` for this lease, ``other_lines`` for the others) and is derived from
it:

- kind, lease and VAT rate: the corrected line's;
- amount: of the opposite sign to the corrected line, at least 0.01 and at most what the
  earlier credit notes (in issue order) left of it; a full reversal (``full_reversal``)
  takes off exactly what is left, of every line with something left;
- subtotal, tax and total: from its lines, tax per rate group rounded half-up once per
  group (``invoice_totals_by_rate``, as an invoice); the subtotal takes money off.

The amount of a partial correction is the operator's decision (the reason says why); what
is checked is that it fits the line. A rerate, a rejudgement or an accepted dispute never
makes a credit note: they become adjustment lines on the next open invoice, checked with
the invoice lines.

Lifecycle events: draft → issued → paid, issued → void, credited (a credit note, the status
unchanged) while issued or paid; each from the state the one before left, in the order
recorded, none after a void, the last leaving the invoice's status; the issued event at the
invoice's ``issued_at``, a voided one at its ``voided_at``; every credit note of the bundle
named by exactly one credited event at its ``issued_at``, and no credited event naming a
note the bundle lacks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from gpulease_verify.canonical import parse_instant
from gpulease_verify.charges import invoice_totals_by_rate

ZERO = Decimal("0.00")
FIGURES = ("subtotal", "tax", "total")
# (kind, from, to): the steps an invoice takes.
STEPS = {
    ("issued", "draft", "issued"),
    ("paid", "issued", "paid"),
    ("voided", "issued", "void"),
    ("credited", "issued", "issued"),
    ("credited", "paid", "paid"),
}


def _originals(bundle: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """The invoice's lines by position: kind, lease, amount, rate."""
    invoice = bundle["invoice"]
    reference = bundle["lease"]["reference"]
    found = {
        int(line["position"]): {**line, "lease": reference} for line in invoice.get("lines", [])
    }
    for line in invoice.get("other_lines", []):
        found[int(line["position"])] = dict(line)
    return found


def _sign(amount: Decimal) -> int:
    return (amount > 0) - (amount < 0)


def check_notes(bundle: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Every credit note of the bundle's invoice, line by line and in its totals."""
    invoice = bundle["invoice"]
    notes = invoice.get("credit_notes", [])
    originals = _originals(bundle)
    credited: dict[int, Decimal] = defaultdict(lambda: ZERO)
    problems: list[str] = []
    issued_at = invoice.get("issued_at")
    ordered = sorted(notes, key=lambda note: (parse_instant(note["issued_at"]), note["number"]))
    for note in ordered:
        name = f"credit note {note['number']}"
        if note.get("invoice_number") != invoice.get("number"):
            problems.append(
                f"{name} references invoice {note.get('invoice_number')}, the bundle's invoice "
                f"is {invoice.get('number')}"
            )
        if issued_at is None or parse_instant(note["issued_at"]) < parse_instant(issued_at):
            problems.append(
                f"{name} is dated {note['issued_at']}, before its invoice was issued "
                f"({issued_at or 'never'})"
            )
        problems += _note_lines(name, note, originals, credited)
        problems += _note_totals(name, note)
    numbers = ", ".join(note["number"] for note in ordered) or "none"
    return problems, [
        f"credit notes: {len(notes)} ({numbers}) derived again from invoice "
        f"{invoice.get('number')}'s lines: amounts within what was left, tax per rate, totals"
    ]


def _note_lines(
    name: str,
    note: Mapping[str, Any],
    originals: Mapping[int, Mapping[str, Any]],
    credited: dict[int, Decimal],
) -> list[str]:
    problems = []
    full = bool(note.get("full_reversal"))
    named = set()
    for line in note["lines"]:
        label = f"{name} line {line['position']}"
        position = int(line["original_position"])
        original = originals.get(position)
        if original is None:
            problems.append(
                f"{label} corrects invoice line {position}, which the invoice does not have"
            )
            continue
        named.add(position)
        amount, billed = Decimal(line["amount"]), Decimal(original["amount"])
        left = billed + credited[position]
        what = f"invoice line {position} ({original['kind']}, {billed}, {left} left to credit)"
        for field in ("kind", "lease"):
            if line.get(field) != original.get(field):
                problems.append(
                    f"{label} {field}: the bundle says {line.get(field)}, the line it corrects "
                    f"(invoice line {position}) is {original.get(field)}"
                )
        if Decimal(line["tax_rate_percent"]) != Decimal(original["tax_rate_percent"]):
            problems.append(
                f"{label} tax rate percent: the bundle says {line['tax_rate_percent']}, "
                f"invoice line {position} is taxed at {original['tax_rate_percent']}"
            )
        if full and amount != -left:
            problems.append(
                f"{label} amount: the bundle says {amount}, a full reversal of {what} takes "
                f"off {-left}"
            )
        elif not full and not (_sign(amount) == -_sign(billed) != 0 and abs(amount) <= abs(left)):
            problems.append(
                f"{label} amount: the bundle says {amount}, but a correction of {what} takes "
                f"off between 0.01 and {abs(left)}, of the opposite sign"
            )
        credited[position] += amount
    if full:
        for position, original in sorted(originals.items()):
            rest = Decimal(original["amount"]) + credited[position]
            if position not in named and rest != 0:
                problems.append(
                    f"{name} is a full reversal but leaves {rest} of invoice line {position} "
                    f"({original['kind']}) uncredited"
                )
    return problems


def _note_totals(name: str, note: Mapping[str, Any]) -> list[str]:
    totals = invoice_totals_by_rate(
        [(Decimal(line["amount"]), Decimal(line["tax_rate_percent"])) for line in note["lines"]]
    )
    groups = ", ".join(
        f"{group.tax} on {group.subtotal} at {group.tax_rate_percent}%" for group in totals.groups
    )
    problems = []
    for figure in FIGURES:
        recomputed = getattr(totals, figure)
        if Decimal(note[figure]) != recomputed:
            problems.append(
                f"{name} {figure}: the bundle says {note[figure]}, its lines give {recomputed} "
                f"(subtotal {totals.subtotal}, tax per rate: {groups or 'none'})"
            )
    if totals.subtotal >= 0:
        problems.append(f"{name} takes no money off: its lines add up to {totals.subtotal}")
    return problems


def check_events(bundle: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The invoice's lifecycle events in order, against its status, dates and notes."""
    invoice = bundle["invoice"]
    events: Sequence[Mapping[str, Any]] = invoice.get("events", [])
    status, number = invoice.get("status"), invoice.get("number")
    problems: list[str] = []
    state, before = "draft", None
    for index, event in enumerate(events, start=1):
        kind, start, end = event["kind"], event["from_state"], event["to_state"]
        label = f"invoice event {index} ({kind} at {event['at']})"
        at = parse_instant(event["at"])
        if state == "void":
            problems.append(f"{label}: the invoice was voided before it; nothing follows a void")
        elif (kind, start, end) not in STEPS:
            problems.append(f"{label}: {start} → {end} is not a step an invoice takes")
        elif start != state:
            problems.append(f"{label}: from {start}, but the events before left it {state}")
        if before is not None and at < before:
            problems.append(f"{label}: recorded before the event before it ({before.isoformat()})")
        for key, field in (("issued", "issued_at"), ("voided", "voided_at")):
            stated = invoice.get(field)
            if kind == key and (stated is None or parse_instant(stated) != at):
                problems.append(f"{label}: the invoice says it was {key} at {stated}")
        state, before = end, max(at, before) if before is not None else at
    if events and state != status:
        problems.append(f"invoice events: they leave invoice {number} {state}, it is {status}")
    if not events and status not in (None, "draft"):
        problems.append(f"invoice {number} is {status}, but the bundle carries no event of it")
    problems += _credited(invoice, events)
    return problems, [
        f"invoice events: {len(events)} in order, from draft to {status}"
        + (f" ({', '.join(str(event['kind']) for event in events)})" if events else "")
    ]


def _credited(invoice: Mapping[str, Any], events: Sequence[Mapping[str, Any]]) -> list[str]:
    notes = {note["number"]: note for note in invoice.get("credit_notes", [])}
    named = Counter(event.get("credit_note") for event in events if event["kind"] == "credited")
    problems = []
    for number in notes:
        if named[number] != 1:
            problems.append(
                f"credit note {number}: {named[number]} credited event(s) name it, not one"
            )
    for event in events:
        number = event.get("credit_note")
        if event["kind"] == "credited" and number not in notes:
            problems.append(
                f"invoice event credited at {event['at']} names credit note {number}, which "
                "the bundle does not carry"
            )
        elif event["kind"] == "credited" and parse_instant(event["at"]) != parse_instant(
            notes[number]["issued_at"]
        ):
            problems.append(
                f"invoice event credited at {event['at']}: credit note {number} was issued "
                f"at {notes[number]['issued_at']}"
            )
        elif event["kind"] != "credited" and number is not None:
            problems.append(
                f"invoice event {event['kind']} at {event['at']} names credit note {number}"
            )
    return problems


def check(bundle: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(mismatches, notes) of the invoice's credit notes and events; nothing for a bundle
    without an invoice, or from before the bundle carried them."""
    invoice = bundle.get("invoice") or {}
    if invoice.get("source") != "invoice" or "events" not in invoice:
        return [], []
    problems, notes = check_notes(bundle)
    more, said = check_events(bundle)
    return problems + more, notes + said


__all__ = ["check", "check_events", "check_notes"]
