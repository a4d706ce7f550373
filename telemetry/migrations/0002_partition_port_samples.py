"""Telemetry port intervals become a table partitioned by month on PostgreSQL
(common.partitions)."""

from django.db import migrations
from django.utils import timezone

from common import partitions


def forwards(apps, schema_editor):
    partitions.convert(schema_editor, "telemetry_portsample", "at", timezone.now())


def backwards(apps, schema_editor):
    partitions.unconvert(schema_editor, "telemetry_portsample", "at")


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
