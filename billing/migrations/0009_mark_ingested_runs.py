"""Runs the ingest cursor has already passed are marked ingested (benchmarks 0009 gave
runs an ``ingested_at``): from now on ingest reads the runs not marked, whatever order
they committed in, instead of those past the cursor."""

from django.db import migrations
from django.db.models import Q
from django.utils import timezone


def mark_read(apps, schema_editor):  # type: ignore[no-untyped-def]
    ProbeRun = apps.get_model("benchmarks", "ProbeRun")
    IngestCursor = apps.get_model("billing", "IngestCursor")
    cursor = IngestCursor.objects.filter(name="runs").first()
    if cursor is None or cursor.finished_at is None:
        return
    ProbeRun.objects.filter(finished_at__isnull=False, ingested_at__isnull=True).filter(
        Q(finished_at__lt=cursor.finished_at)
        | Q(finished_at=cursor.finished_at, pk__lte=cursor.run_id)
    ).update(ingested_at=timezone.now())


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0008_credit_note_kind"),
        ("benchmarks", "0009_run_ingested_at"),
    ]

    operations = [migrations.RunPython(mark_read, migrations.RunPython.noop)]
