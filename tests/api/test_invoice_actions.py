"""The invoice actions of the API (issue, void, credit notes: provider staff only), the
tenant's read of its credit notes, and `manage.py bill --issue`."""

from decimal import Decimal as D
from io import StringIO

import pytest
import time_machine
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from accounts.choices import Role
from billing import services
from billing.choices import InvoiceStatus
from billing.models import CreditNote
from tests.factories import at

pytestmark = pytest.mark.django_db

DECEMBER_2 = at("2026-12-02 09:00")


@pytest.fixture(autouse=True)
def _clock():
    with time_machine.travel(DECEMBER_2, tick=False):
        yield


def url(name: str, invoice) -> str:  # type: ignore[no-untyped-def]
    return reverse(f"api:invoice-{name}", kwargs={"pk": invoice.pk})


def test_staff_issue_waits_for_ingest_then_forces_with_a_reason(world, client_for):
    alpha = world.alpha
    staff = client_for(world.staff)
    refused = staff.post(url("issue", alpha.invoice), {}, format="json")
    # The side's three November runs finished but were never ingested.
    assert refused.status_code == 409
    assert refused.json()["error"]["message"] == (
        "Invoice alpha 2026-11 cannot be issued yet: 3 finished probe runs of alpha "
        "2026-11's period are not ingested yet. Wait, or force it with a reason."
    )
    no_reason = staff.post(url("issue", alpha.invoice), {"force": True}, format="json")
    assert no_reason.status_code == 400
    assert no_reason.json()["error"]["fields"]["reason"] == [
        "A reason is required to issue an invoice by force."
    ]
    issued = staff.post(
        url("issue", alpha.invoice), {"force": True, "reason": "Close the month."}, format="json"
    )
    assert issued.status_code == 200
    body = issued.json()
    assert (body["status"], body["number"], body["issue_date"], body["due_date"]) == (
        "issued",
        "GL-2026-000001",
        "2026-12-02",
        "2027-01-01",
    )
    assert body["forced_reason"] == "Close the month."
    assert body["buyer"]["legal_name"] == alpha.tenant.name
    again = staff.post(url("issue", alpha.invoice), {}, format="json")
    assert again.status_code == 409
    assert "only a draft can be issued" in again.json()["error"]["message"]


def test_a_tenant_admin_cannot_issue_and_another_tenant_gets_404(world, client_for):
    admin = client_for(world.alpha.members[Role.ADMIN])
    refused = admin.post(url("issue", world.alpha.invoice), {}, format="json")
    assert refused.status_code == 403
    assert refused.json()["error"]["message"] == "Only provider staff may do this."
    beta_admin = client_for(world.beta.members[Role.ADMIN])
    for name, body in (("issue", {}), ("void", {"reason": "x"}), ("credit-notes", {"reason": "x"})):
        assert (
            beta_admin.post(url(name, world.alpha.invoice), body, format="json").status_code == 404
        )
    world.alpha.invoice.refresh_from_db()
    assert world.alpha.invoice.status == InvoiceStatus.DRAFT


def test_credit_notes_and_void_through_the_api_and_the_tenant_reads_them(world, client_for):
    alpha = world.alpha
    invoice = services.issue_invoice(invoice=alpha.invoice, force=True, reason="Close.")
    staff = client_for(world.staff)
    first_line = invoice.lines.order_by("position").first()
    missing_reason = staff.post(url("credit-notes", invoice), {}, format="json")
    assert missing_reason.status_code == 400
    bad = staff.post(
        url("credit-notes", invoice),
        {"reason": "Typo.", "lines": [{"position": 99, "amount": "1.00"}]},
        format="json",
    )
    assert bad.status_code == 400
    assert bad.json()["error"]["fields"]["lines"] == [
        f"Invoice {invoice.number} (alpha 2026-11) has no line 99."
    ]
    made = staff.post(
        url("credit-notes", invoice),
        {"reason": "Rent overstated.", "lines": [{"position": 1, "amount": "100.00"}]},
        format="json",
    )
    assert made.status_code == 201
    note = made.json()
    # -100.00 at the invoice's 6%: tax -6.00, total -106.00.
    assert (note["number"], note["invoice"], note["invoice_number"]) == (
        "GL-CN-2026-000001",
        invoice.pk,
        invoice.number,
    )
    assert (note["subtotal"], note["tax"], note["total"]) == ("-100.00", "-6.00", "-106.00")
    assert note["lines"][0]["original_position"] == first_line.position

    viewer = client_for(alpha.members[Role.VIEWER])
    listed = viewer.get(reverse("api:creditnote-list"))
    assert [row["number"] for row in listed.json()["results"]] == ["GL-CN-2026-000001"]
    detail = reverse("api:creditnote-detail", kwargs={"pk": note["id"]})
    assert viewer.get(detail).status_code == 200
    assert client_for(world.beta.members[Role.VIEWER]).get(detail).status_code == 404
    assert (
        viewer.post(url("credit-notes", invoice), {"reason": "x"}, format="json").status_code == 403
    )
    assert viewer.get(url("detail", invoice)).json()["credit_notes"] == [note["id"]]

    refused = staff.post(url("void", invoice), {"reason": "Wrong buyer."}, format="json")
    assert refused.status_code == 409
    assert "has credit notes; it cannot be voided" in refused.json()["error"]["message"]


def test_void_through_the_api(world, client_for):
    invoice = services.issue_invoice(invoice=world.alpha.invoice, force=True, reason="Close.")
    staff = client_for(world.staff)
    assert staff.post(url("void", invoice), {}, format="json").status_code == 400
    voided = staff.post(url("void", invoice), {"reason": "Wrong buyer."}, format="json")
    assert voided.status_code == 200
    assert (voided.json()["status"], voided.json()["number"]) == ("void", invoice.number)
    assert voided.json()["void_reason"] == "Wrong buyer."


def test_bill_issue_ingests_drafts_and_issues(world):
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="--force needs --reason"):
        call_command("bill", "--period", "2026-11", "--issue", "--force", stdout=out)
    call_command(
        "bill", "--period", "2026-11", "--tenant", "alpha", "--issue", stdout=out, stderr=err
    )
    text = out.getvalue()
    # bill ingests first, so the side's finished runs no longer hold the month back.
    assert err.getvalue() == ""
    assert "Invoice alpha 2026-11 (issued)" in text
    assert "number GL-2026-000001, issued 2026-12-02, due 2027-01-01" in text
    assert f"buyer: {world.alpha.tenant.name}, tax ID 91110108551385082Q" in text
    world.alpha.invoice.refresh_from_db()
    assert world.alpha.invoice.status == InvoiceStatus.ISSUED
    world.beta.invoice.refresh_from_db()
    assert world.beta.invoice.status == InvoiceStatus.DRAFT  # only the named tenant

    out, err = StringIO(), StringIO()
    call_command("bill", "--period", "2026-11", "--issue", stdout=out, stderr=err)
    assert "Invoice GL-2026-000001 (alpha 2026-11) is issued; it cannot change." in err.getvalue()
    assert "number GL-2026-000002" in out.getvalue()  # beta's
    assert CreditNote.objects.count() == 0
    assert world.alpha.invoice.total > D("0")


def test_staff_marks_an_issued_invoice_paid_on_a_day_between_issue_and_today(world, client_for):
    invoice = services.issue_invoice(invoice=world.alpha.invoice, force=True, reason="Close.")
    assert invoice.issue_date.isoformat() == "2026-12-02"
    staff = client_for(world.staff)
    early = staff.post(url("mark-paid", invoice), {"paid_on": "2026-12-01"}, format="json")
    assert early.status_code == 400
    assert early.json()["error"]["fields"] == {
        "paid_on": [
            "Invoice GL-2026-000001 (alpha 2026-11) was issued on 2026-12-02; it cannot be "
            "paid before."
        ]
    }
    late = staff.post(url("mark-paid", invoice), {"paid_on": "2026-12-03"}, format="json")
    assert late.status_code == 400
    assert late.json()["error"]["fields"] == {
        "paid_on": [
            "A payment cannot be dated in the future: today is 2026-12-02 in Asia/Shanghai."
        ]
    }
    # Eight days on, the payment is booked on the 5th: the first instant of that day there.
    with time_machine.travel(at("2026-12-10 15:00"), tick=False):
        paid = staff.post(url("mark-paid", invoice), {"paid_on": "2026-12-05"}, format="json")
    assert paid.status_code == 200
    assert (paid.json()["status"], paid.json()["paid_at"]) == ("paid", "2026-12-05T00:00:00+08:00")
    again = staff.post(url("mark-paid", invoice), {}, format="json")
    assert again.status_code == 409
    assert again.json()["error"]["message"] == (
        "Invoice GL-2026-000001 (alpha 2026-11) is paid; only an issued invoice can be paid."
    )


def test_paid_today_by_default_and_only_by_staff(world, client_for):
    invoice = services.issue_invoice(invoice=world.alpha.invoice, force=True, reason="Close.")
    admin = client_for(world.alpha.members[Role.ADMIN])
    assert admin.post(url("mark-paid", invoice), {}, format="json").status_code == 403
    draft = client_for(world.staff).post(url("mark-paid", world.beta.invoice), {}, format="json")
    assert draft.status_code == 409
    assert "is draft; only an issued invoice can be paid." in draft.json()["error"]["message"]
    paid = client_for(world.staff).post(url("mark-paid", invoice), format="json")
    assert paid.status_code == 200
    assert paid.json()["paid_at"] == "2026-12-02T09:00:00+08:00"  # now


def test_the_admin_marks_invoices_paid_and_refuses_a_draft_in_a_sentence(world):
    invoice = services.issue_invoice(invoice=world.alpha.invoice, force=True, reason="Close.")
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(world.staff)
    changelist = reverse("admin:billing_invoice_changelist")
    chosen = {"action": "mark_paid", "_selected_action": [invoice.pk, world.beta.invoice.pk]}
    asked = client.post(changelist, chosen)
    assert asked.status_code == 200 and "paid_on" in asked.content.decode()
    done = client.post(changelist, {**chosen, "confirm": "yes", "paid_on": ""}, follow=True)
    text = done.content.decode()
    assert "1 invoice marked paid." in text
    assert f"Invoice {world.beta.tenant.slug} 2026-11 is draft; only an issued invoice" in text
    invoice.refresh_from_db()
    assert invoice.status == InvoiceStatus.PAID and invoice.paid_at == DECEMBER_2
