"""The data migration that writes the events of invoices issued before events were
recorded (billing 0016): from their timestamps, no actor, "recorded before events". The
invoices are made with today's services, billing's migrations since 0014 are unapplied
(the events table dropped) and applied again."""

from datetime import date
from decimal import Decimal as D

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from billing import services
from billing.models import InvoiceEvent
from tests.billing.test_invoice_lifecycle import leased, october_draft
from tests.factories import at

BEFORE = [("billing", "0014_metering_gaps")]
ISSUED = at("2026-11-02 09:00")


def replay_migrations() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_backfill_writes_the_events_the_timestamps_tell():
    paid = services.issue_invoice(invoice=october_draft(leased("zhiyuan")[0]), now=ISSUED)
    note = services.create_credit_note(
        invoice=paid,
        reason="Rent overstated.",
        corrections=[services.Correction(1, D("10.00"))],
        now=at("2026-11-03 10:00"),
    )
    # Paid on the issue day, booked a week later: stored as that day's first instant,
    # before the issue's; the backfill records it at the issue instant.
    services.mark_paid(invoice=paid, paid_on=date(2026, 11, 2), now=at("2026-11-10 12:00"))
    voided = services.issue_invoice(invoice=october_draft(leased("lingxi")[0]), now=ISSUED)
    services.void_invoice(invoice=voided, reason="Wrong buyer.", now=at("2026-11-04 08:00"))
    drafted = october_draft(leased("kunpeng")[0])

    replay_migrations()

    def life(invoice):  # type: ignore[no-untyped-def]
        return [
            (e.kind, e.from_state, e.to_state, e.at, e.actor_id, e.reason, e.credit_note_id)
            for e in InvoiceEvent.objects.filter(invoice=invoice).order_by("at", "id")
        ]

    before = "recorded before events"
    assert life(paid) == [
        ("issued", "draft", "issued", ISSUED, None, before, None),
        ("paid", "issued", "paid", ISSUED, None, before, None),
        ("credited", "paid", "paid", at("2026-11-03 10:00"), None, before, note.pk),
    ]
    assert life(voided) == [
        ("issued", "draft", "issued", ISSUED, None, before, None),
        ("voided", "issued", "void", at("2026-11-04 08:00"), None, before, None),
    ]
    assert life(drafted) == []
