"""Events for the invoices issued, paid, voided or credited before events were recorded:
from their own timestamps, with no actor and the reason "recorded before events". A
payment back-dated to its issue day (paid_at before issued_at) is recorded at the issue
instant, so that the events stay in order."""

from django.db import migrations

BEFORE = "recorded before events"


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    Invoice = apps.get_model("billing", "Invoice")
    InvoiceEvent = apps.get_model("billing", "InvoiceEvent")
    rows = []
    billed = Invoice.objects.exclude(status="draft").filter(issued_at__isnull=False)
    for invoice in billed.filter(events__isnull=True).prefetch_related("credit_notes"):
        notes = sorted(invoice.credit_notes.all(), key=lambda note: (note.issued_at, note.pk))
        rows.append(
            InvoiceEvent(
                invoice=invoice,
                kind="issued",
                from_state="draft",
                to_state="issued",
                at=invoice.issued_at,
                reason=BEFORE,
            )
        )
        state = "issued"
        later = []
        if invoice.status == "paid" and invoice.paid_at is not None:
            later.append((max(invoice.paid_at, invoice.issued_at), "paid", None))
        if invoice.status == "void" and invoice.voided_at is not None:
            later.append((max(invoice.voided_at, invoice.issued_at), "voided", None))
        later += [(note.issued_at, "credited", note) for note in notes]
        for at, kind, note in sorted(later, key=lambda item: (item[0], item[1] != "credited")):
            to = {"paid": "paid", "voided": "void"}.get(kind, state)
            rows.append(
                InvoiceEvent(
                    invoice=invoice,
                    kind=kind,
                    from_state=state,
                    to_state=to,
                    at=at,
                    reason=BEFORE,
                    credit_note=note,
                )
            )
            state = to
    InvoiceEvent.objects.bulk_create(rows)


class Migration(migrations.Migration):
    dependencies = [("billing", "0015_invoice_events")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
