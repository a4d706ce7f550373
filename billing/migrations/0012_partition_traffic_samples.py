"""Traffic samples become a table partitioned by month of their slot on PostgreSQL
(common.partitions); disputes and incidents keep their runs without database foreign
keys, since runs are partitioned (benchmarks 0010)."""

from django.db import migrations, models

from common import partitions


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
        partitions.by_month("billing_trafficsample", "slot_at"),
    ]
