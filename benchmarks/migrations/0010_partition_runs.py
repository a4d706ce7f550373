"""Runs become a table partitioned by month of their slot on PostgreSQL
(common.partitions); the references to them stop being database foreign keys."""

from django.db import migrations, models

from common import partitions


class Migration(migrations.Migration):
    atomic = True
    dependencies = [
        ("benchmarks", "0009_run_ingested_at"),
        # The foreign keys billing made to runs exist before they are dropped here.
        ("billing", "0011_traffic_switch_nodes"),
    ]
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="proberun",
                    name="nodes",
                    field=models.ManyToManyField(
                        db_constraint=False,
                        related_name="probe_runs",
                        to="leases.node",
                        verbose_name="nodes",
                    ),
                ),
                migrations.AlterField(
                    model_name="rejudgement",
                    name="run",
                    field=models.ForeignKey(
                        db_constraint=False,
                        on_delete=models.deletion.CASCADE,
                        related_name="rejudgements",
                        to="benchmarks.proberun",
                        verbose_name="probe run",
                    ),
                ),
            ]
        ),
        partitions.by_month("benchmarks_proberun", "slot_at"),
    ]
