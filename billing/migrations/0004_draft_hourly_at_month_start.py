"""Once created the beat schedule; it now lives in code (config/beat.py), so this
migration does nothing and stays only for the migration graph."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("billing", "0003_evidence_and_disputes")]
    operations: list = []
