"""Every billing document in the bundle: the invoice's credit notes (红字发票) and its
lifecycle events, derived again by the verifier from the invoice lines the bundle carries;
a forged figure is named, in the database or re-signed with the provider's own key.

The November lease of ``tests.billing.test_audit.month``, issued on 1 December 02:00 (Shanghai)
as GL-2026-000001: line 1 node rent 90,000.00, line 2 network fee 6,000.00, line 3 SLA
credit -3,000.00, all at 6% VAT.

Credit note GL-CN-2026-000001 takes 333.33 off the network fee: -333.33, tax
-333.33 x 6% = -19.9998 -> -20.00, total -353.33."""

import copy
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal as D
from typing import Any

import pytest

from billing import audit, services
from billing.models import CreditNote, Invoice
from tests.billing.test_audit import AFTER_NOVEMBER, month, signed  # noqa: F401
from tests.factories import StaffFactory, at

pytestmark = pytest.mark.django_db

Bundle = dict[str, Any]
CREDITED_AT = at("2026-12-03 10:00")
PAID_AT = at("2026-12-05 09:30")


def mismatches(doc: dict[str, Any]) -> list[str]:
    return audit.verify(doc, audit.published_key_info()["public_key_pem"])


def credited_and_paid(lease):  # type: ignore[no-untyped-def]
    """Issued by a staff member, 333.33 credited off the network fee by the same, then
    marked paid by a command (no actor)."""
    staff = StaffFactory(username="finance-wang")
    invoice = Invoice.objects.get(tenant=lease.tenant, period="2026-11")
    invoice = services.issue_invoice(invoice=invoice, actor=staff, now=AFTER_NOVEMBER)
    note = services.create_credit_note(
        invoice=invoice,
        reason="Network fee overstated: two days of maintenance billed.",
        corrections=[services.Correction(2, D("333.33"))],
        actor=staff,
        now=CREDITED_AT,
    )
    services.mark_paid(invoice=invoice, now=PAID_AT)
    return invoice, note


def test_the_credit_note_and_the_invoice_life_are_in_the_bundle_and_agree(month):  # noqa: F811
    _invoice, note = credited_and_paid(month)
    assert (note.number, note.subtotal, note.tax, note.total) == (
        "GL-CN-2026-000001",
        D("-333.33"),
        D("-20.00"),
        D("-353.33"),
    )
    doc = signed(month)
    found, said = audit.verify_report(doc, audit.published_key_info()["public_key_pem"])
    assert found == []
    stated = doc["bundle"]["invoice"]
    assert (stated["number"], stated["status"]) == ("GL-2026-000001", "paid")
    [carried] = stated["credit_notes"]
    assert {k: carried[k] for k in ("number", "invoice_number", "subtotal", "tax", "total")} == {
        "number": "GL-CN-2026-000001",
        "invoice_number": "GL-2026-000001",
        "subtotal": "-333.33",
        "tax": "-20.00",
        "total": "-353.33",
    }
    assert carried["lines"] == [
        {
            "position": 1,
            "original_position": 2,
            "lease": month.reference,
            "kind": "network_fee",
            "description": carried["lines"][0]["description"],
            "amount": "-333.33",
            "tax_rate_percent": "6.00",
        }
    ]
    assert [
        (e["kind"], e["from_state"], e["to_state"], e["actor"], e["at"], e["credit_note"])
        for e in stated["events"]
    ] == [
        ("issued", "draft", "issued", "finance-wang", "2026-11-30T18:00:00.000000Z", None),
        (
            "credited",
            "issued",
            "issued",
            "finance-wang",
            "2026-12-03T02:00:00.000000Z",
            "GL-CN-2026-000001",
        ),
        ("paid", "issued", "paid", None, "2026-12-05T01:30:00.000000Z", None),
    ]
    assert stated["events"][1]["reason"] == note.reason
    assert (
        "credit notes: 1 (GL-CN-2026-000001) derived again from invoice GL-2026-000001's "
        "lines: amounts within what was left, tax per rate, totals"
    ) in said
    assert "invoice events: 3 in order, from draft to paid (issued, credited, paid)" in said


def test_a_credit_notes_total_forged_in_the_database_is_named(month):  # noqa: F811
    _invoice, note = credited_and_paid(month)
    CreditNote.objects.filter(pk=note.pk).update(total=D("-35.33"))  # an insider's UPDATE
    assert mismatches(signed(month)) == [
        "credit note GL-CN-2026-000001 total: the bundle says -35.33, its lines give -353.33 "
        "(subtotal -333.33, tax per rate: -20.00 on -333.33 at 6.00%)"
    ]


# --- a bundle edited and re-signed with the provider's key ------------------------------


def note_of(b: Bundle, index: int = 0) -> dict[str, Any]:
    return b["invoice"]["credit_notes"][index]


def total_forged(b: Bundle) -> None:
    note_of(b)["total"] = "-35.33"


def tax_forged(b: Bundle) -> None:
    note_of(b)["tax"] = "-2.00"
    note_of(b)["total"] = "-335.33"


def more_than_the_line(b: Bundle) -> None:
    """6,000.01 off a 6,000.00 line, the totals made to agree: -6,000.01, tax -360.00
    (360.0006), total -6,360.01."""
    note_of(b)["lines"][0]["amount"] = "-6000.01"
    note_of(b).update(subtotal="-6000.01", tax="-360.00", total="-6360.01")


def rate_lowered(b: Bundle) -> None:
    """The line at 3% and the totals made to agree (-333.33 x 3% = -9.9999 -> -10.00)."""
    note_of(b)["lines"][0]["tax_rate_percent"] = "3.00"
    note_of(b).update(tax="-10.00", total="-343.33")


def wrong_line(b: Bundle) -> None:
    note_of(b)["lines"][0]["original_position"] = 9


def credited_event_dropped(b: Bundle) -> None:
    b["invoice"]["events"].pop(1)


def paid_after_void(b: Bundle) -> None:
    b["invoice"]["events"].insert(
        2,
        {
            "at": "2026-12-04T00:00:00.000000Z",
            "kind": "voided",
            "from_state": "issued",
            "to_state": "void",
            "actor": None,
            "reason": "Wrong buyer.",
            "credit_note": None,
        },
    )


def paid_before_issued(b: Bundle) -> None:
    events = b["invoice"]["events"]
    events.insert(0, events.pop())


FORGERIES: list[tuple[str, Callable[[Bundle], None], str]] = [
    (
        "total",
        total_forged,
        "credit note GL-CN-2026-000001 total: the bundle says -35.33, its lines give -353.33",
    ),
    (
        "tax",
        tax_forged,
        "credit note GL-CN-2026-000001 tax: the bundle says -2.00, its lines give -20.00",
    ),
    (
        "more than the line",
        more_than_the_line,
        "credit note GL-CN-2026-000001 line 1 amount: the bundle says -6000.01, but a "
        "correction of invoice line 2 (network_fee, 6000.00, 6000.00 left to credit) takes "
        "off between 0.01 and 6000.00, of the opposite sign",
    ),
    (
        "rate",
        rate_lowered,
        "credit note GL-CN-2026-000001 line 1 tax rate percent: the bundle says 3.00, invoice "
        "line 2 is taxed at 6.00",
    ),
    (
        "wrong line",
        wrong_line,
        "credit note GL-CN-2026-000001 line 1 corrects invoice line 9, which the invoice "
        "does not have",
    ),
    (
        "credited event dropped",
        credited_event_dropped,
        "credit note GL-CN-2026-000001: 0 credited event(s) name it, not one",
    ),
    (
        "paid after void",
        paid_after_void,
        "invoice event 4 (paid at 2026-12-05T01:30:00.000000Z): the invoice was voided before "
        "it; nothing follows a void",
    ),
    (
        "paid before issued",
        paid_before_issued,
        "invoice event 1 (paid at 2026-12-05T01:30:00.000000Z): from issued, but the events "
        "before left it draft",
    ),
]


@pytest.mark.parametrize(("name", "forge", "said"), FORGERIES, ids=[f[0] for f in FORGERIES])
def test_a_forged_credit_note_or_event_re_signed_is_named(month, name, forge, said):  # noqa: F811
    credited_and_paid(month)
    doc = signed(month)
    assert mismatches(doc) == []
    bundle = copy.deepcopy(doc["bundle"])
    forge(bundle)
    found = mismatches(audit.sign_bundle(bundle))
    assert not any("signature" in m for m in found), found
    assert any(m.startswith(said) for m in found), "\n".join(found)


def test_a_full_reversal_takes_off_exactly_what_is_left_of_every_line(month):  # noqa: F811
    """After the 333.33: rent -90,000.00, fee -5,666.67, the SLA credit back +3,000.00;
    -92,666.67, tax -5,560.0002 -> -5,560.00, total -98,226.67."""
    invoice, _note = credited_and_paid(month)
    reversal = services.create_credit_note(
        invoice=invoice, reason="Billed to the wrong buyer.", now=PAID_AT + timedelta(days=1)
    )
    assert reversal.full_reversal
    assert [line.amount for line in reversal.lines.order_by("position")] == [
        D("-90000.00"),
        D("-5666.67"),
        D("3000.00"),
    ]
    assert (reversal.subtotal, reversal.tax, reversal.total) == (
        D("-92666.67"),
        D("-5560.00"),
        D("-98226.67"),
    )
    doc = signed(month)
    assert mismatches(doc) == []
    bundle = copy.deepcopy(doc["bundle"])
    note_of(bundle, 1)["lines"][1]["amount"] = "-5666.66"  # a fen kept, totals made to agree
    note_of(bundle, 1).update(subtotal="-92666.66", tax="-5560.00", total="-98226.66")
    assert mismatches(audit.sign_bundle(bundle)) == [
        "credit note GL-CN-2026-000002 line 2 amount: the bundle says -5666.66, a full "
        "reversal of invoice line 2 (network_fee, 6000.00, 5666.67 left to credit) takes "
        "off -5666.67"
    ]
