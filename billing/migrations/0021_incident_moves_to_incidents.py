"""billing's Incident is now incidents.Incident (incidents 0001), on the same table: the
dispute's foreign key points there in state, and billing's own Incident leaves its state.
Nothing in the database changes (the column, its constraint and the table stay)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('billing', '0020_degraded_minutes'),
        ('incidents', '0001_move_incident_from_billing'),
        # The alerts' incidents point at incidents.Incident before billing's leaves state.
        ('monitoring', '0003_incidents_move_to_incidents'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='dispute',
                    name='incident',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='disputes', to='incidents.incident', verbose_name='disputed incident'),
                ),
                migrations.DeleteModel(
                    name='Incident',
                ),
            ],
            database_operations=[],
        ),
    ]
