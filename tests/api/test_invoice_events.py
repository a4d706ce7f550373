"""Invoice lifecycle events (who, when, from, to, why) through every door: the API's
actions and its invoice detail, the admin's actions and inline, and `manage.py bill`.
The clock stands at 2 December 2026 09:00 in Shanghai."""

from decimal import Decimal as D
from io import StringIO

import pytest
import time_machine
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from accounts.choices import Role
from billing import services
from billing.models import InvoiceEvent
from tests.factories import at

pytestmark = pytest.mark.django_db

DECEMBER_2 = at("2026-12-02 09:00")


@pytest.fixture(autouse=True)
def _clock():
    with time_machine.travel(DECEMBER_2, tick=False):
        yield


def url(name: str, invoice) -> str:  # type: ignore[no-untyped-def]
    return reverse(f"api:invoice-{name}", kwargs={"pk": invoice.pk})


def test_the_api_records_who_issued_credited_and_paid_and_the_tenant_reads_it(world, client_for):
    invoice = world.alpha.invoice
    staff = client_for(world.staff)
    issued = staff.post(url("issue", invoice), {"force": True, "reason": "Close."}, format="json")
    assert issued.status_code == 200
    note = staff.post(
        url("credit-notes", invoice),
        {"reason": "Rent overstated.", "lines": [{"position": 1, "amount": "100.00"}]},
        format="json",
    ).json()
    with time_machine.travel(at("2026-12-04 15:00"), tick=False):
        assert staff.post(url("mark-paid", invoice), {}, format="json").status_code == 200

    viewer = client_for(world.alpha.members[Role.VIEWER])
    events = viewer.get(url("detail", invoice)).json()["events"]
    assert events == [
        {
            "at": "2026-12-02T09:00:00+08:00",
            "kind": "issued",
            "from_state": "draft",
            "to_state": "issued",
            "actor": "provider",
            "reason": "Close.",
            "credit_note": None,
        },
        {
            "at": "2026-12-02T09:00:00+08:00",
            "kind": "credited",
            "from_state": "issued",
            "to_state": "issued",
            "actor": "provider",
            "reason": "Rent overstated.",
            "credit_note": note["number"],
        },
        {
            "at": "2026-12-04T15:00:00+08:00",
            "kind": "paid",
            "from_state": "issued",
            "to_state": "paid",
            "actor": "provider",
            "reason": "",
            "credit_note": None,
        },
    ]
    assert note["full_reversal"] is False
    assert (note["subtotal"], note["tax"], note["total"]) == ("-100.00", "-6.00", "-106.00")
    other = client_for(world.beta.members[Role.VIEWER])
    assert other.get(url("detail", invoice)).status_code == 404
    listed = other.get(reverse("api:invoice-list")).json()["results"]
    assert [row["events"] for row in listed] == [[]]  # beta's draft: no event, none of alpha's


def test_a_refused_step_writes_no_event_and_events_are_never_edited(world, client_for):
    invoice = world.alpha.invoice
    staff = client_for(world.staff)
    assert staff.post(url("mark-paid", invoice), {}, format="json").status_code == 409
    assert not InvoiceEvent.objects.exists()
    services.issue_invoice(invoice=invoice, force=True, reason="Close.")
    event = InvoiceEvent.objects.get()
    assert event.actor is None  # a shell or a command: nobody
    event.reason = "rewritten"
    with pytest.raises(ValidationError, match="can never be edited"):
        event.save()
    with pytest.raises(ValidationError, match="can never be edited"):
        event.delete()


def test_the_admin_records_who_voided_and_shows_the_events(world):
    invoice = services.issue_invoice(invoice=world.alpha.invoice, force=True, reason="Close.")
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(world.staff)
    changelist = reverse("admin:billing_invoice_changelist")
    done = client.post(
        changelist,
        {"action": "void", "_selected_action": [invoice.pk], "reason": "Wrong buyer."},
        follow=True,
    )
    assert "1 invoice voided." in done.content.decode()
    voided = InvoiceEvent.objects.get(invoice=invoice, kind="voided")
    assert (voided.from_state, voided.to_state, voided.actor, voided.reason, voided.at) == (
        "issued",
        "void",
        world.staff,
        "Wrong buyer.",
        DECEMBER_2,
    )
    page = client.get(reverse("admin:billing_invoice_change", args=[invoice.pk])).content.decode()
    assert "invoice events" in page.lower()
    assert "Wrong buyer." in page and "provider" in page


def test_bill_issue_records_the_issue_with_no_actor(world):
    call_command("bill", "--period", "2026-11", "--tenant", "alpha", "--issue", stdout=StringIO())
    event = InvoiceEvent.objects.get(invoice=world.alpha.invoice)
    assert (event.kind, event.actor, event.reason, event.at) == ("issued", None, "", DECEMBER_2)
    world.alpha.invoice.refresh_from_db()
    assert world.alpha.invoice.total > D("0")
