"""Telemetry port intervals become a table partitioned by month on PostgreSQL
(common.partitions)."""

from django.db import migrations

from common import partitions


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0001_initial")]
    operations = [partitions.by_month("telemetry_portsample", "at")]
