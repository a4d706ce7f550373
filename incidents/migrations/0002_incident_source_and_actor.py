"""Each incident says what opened and what closed it (incidents.services). The incidents
from before are filled in from what they are: an Alertmanager pattern came from
Alertmanager, a fabric-health kind from telemetry, a measurement-integrity kind from the
witness, the rest (probe kinds, metering gaps) from ingest. Closed ones closed by the same
source, except an integrity incident (only a person resolves one) and a flap or drop whose
detail says an operator cleared its port: those say "manual", with no name (it was not
kept then)."""

from django.db import migrations, models
from django.db.models import Case, F, Q, Value, When

SOURCE = Case(
    When(pattern="alertmanager", then=Value("alertmanager")),
    When(kind="telemetry", then=Value("telemetry")),
    When(kind="integrity", then=Value("witness")),
    default=Value("ingest"),
)
BY_A_PERSON = Q(kind="integrity") | Q(kind="telemetry", detail__contains="Cleared by ")


def backfill(apps, schema_editor):
    Incident = apps.get_model("incidents", "Incident")
    rows = Incident.objects.using(schema_editor.connection.alias)
    rows.update(source=SOURCE)
    rows.update(opened_by=F("source"))
    closed = rows.filter(state="closed")
    closed.filter(BY_A_PERSON).update(closed_source="manual")
    closed.exclude(BY_A_PERSON).update(closed_source=F("source"), closed_by=F("source"))


class Migration(migrations.Migration):

    dependencies = [
        ('incidents', '0001_move_incident_from_billing'),
    ]

    operations = [
        migrations.AddField(
            model_name='incident',
            name='closed_by',
            field=models.CharField(blank=True, db_default='', default='', max_length=150, verbose_name='closed by'),
        ),
        migrations.AddField(
            model_name='incident',
            name='closed_source',
            field=models.CharField(blank=True, choices=[('ingest', 'probe ingest'), ('telemetry', 'fabric telemetry'), ('witness', 'switch-side witness'), ('alertmanager', 'Alertmanager'), ('manual', 'a person')], db_default='', default='', max_length=16, verbose_name='closed by (source)'),
        ),
        migrations.AddField(
            model_name='incident',
            name='opened_by',
            field=models.CharField(blank=True, db_default='', default='', max_length=150, verbose_name='opened by'),
        ),
        migrations.AddField(
            model_name='incident',
            name='source',
            field=models.CharField(blank=True, choices=[('ingest', 'probe ingest'), ('telemetry', 'fabric telemetry'), ('witness', 'switch-side witness'), ('alertmanager', 'Alertmanager'), ('manual', 'a person')], db_default='', default='', max_length=16, verbose_name='opened by (source)'),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
