"""An alert's incidents are incidents.Incident now (incidents 0001), on the same table:
state only, the link table monitoring_externalalert_incidents and its columns stay."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('incidents', '0001_move_incident_from_billing'),
        ('monitoring', '0002_alert_occurrences'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='externalalert',
                    name='incidents',
                    field=models.ManyToManyField(blank=True, related_name='external_alerts', to='incidents.incident', verbose_name='incidents'),
                ),
            ],
            database_operations=[],
        ),
    ]
