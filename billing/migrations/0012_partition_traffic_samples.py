"""Traffic samples become a table partitioned by month of their slot on PostgreSQL
(common.partitions); disputes and incidents keep their runs without database foreign
keys, since runs are partitioned (benchmarks 0010)."""

from django.db import migrations, models
from django.utils import timezone

from common import partitions


def forwards(apps, schema_editor):
    partitions.convert(schema_editor, "billing_trafficsample", "slot_at", timezone.now())


def backwards(apps, schema_editor):
    partitions.unconvert(schema_editor, "billing_trafficsample", "slot_at")


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0011_traffic_switch_nodes"),
        ("benchmarks", "0010_partition_runs"),
    ]
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="dispute",
                    name="probe_run",
                    field=models.ForeignKey(
                        blank=True,
                        db_constraint=False,
                        null=True,
                        on_delete=models.deletion.PROTECT,
                        related_name="disputes",
                        to="benchmarks.proberun",
                        verbose_name="disputed probe run",
                    ),
                ),
                migrations.AlterField(
                    model_name="incident",
                    name="runs",
                    field=models.ManyToManyField(
                        db_constraint=False,
                        related_name="incidents",
                        to="benchmarks.proberun",
                        verbose_name="evidence runs",
                    ),
                ),
            ]
        ),
        migrations.RunPython(forwards, backwards),
    ]
