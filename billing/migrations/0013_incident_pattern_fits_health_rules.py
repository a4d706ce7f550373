"""An incident's pattern holds the fabric health rule that opened it: "ib_fatal_counters"
and "ib_link_error_recovery" are longer than the 16 characters it had, so PostgreSQL
refused the telemetry cycle's incident (SQLite does not check lengths)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0012_partition_traffic_samples"),
    ]

    operations = [
        migrations.AlterField(
            model_name="incident",
            name="pattern",
            field=models.CharField(max_length=32, verbose_name="pattern"),
        ),
    ]
