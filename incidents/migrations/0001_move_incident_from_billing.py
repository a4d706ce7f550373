"""The Incident model moves from billing to this app (issue 31 item 3). Its table stays
``billing_incident`` (and its runs' ``billing_incident_runs``): only Django's state moves, no
row does. billing 0021 and monitoring 0003 point their foreign keys here in state and
billing drops its own Incident from state.

The content type is renamed from billing.incident to incidents.incident, so its permission
rows (view/change/acknowledge/mitigate_incident) keep their ids and every group and user
that holds them keeps them; only the dotted name turns into ``incidents.*``."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def _move(apps, schema_editor, source: str, destination: str) -> None:
    ContentType = apps.get_model('contenttypes', 'ContentType')
    db = schema_editor.connection.alias
    if ContentType.objects.using(db).filter(app_label=destination, model='incident').exists():
        return
    ContentType.objects.using(db).filter(app_label=source, model='incident').update(
        app_label=destination
    )


def rename_content_type(apps, schema_editor):
    _move(apps, schema_editor, 'billing', 'incidents')


def unrename_content_type(apps, schema_editor):
    _move(apps, schema_editor, 'incidents', 'billing')


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('billing', '0020_degraded_minutes'),
        ('contenttypes', '0002_remove_content_type_name'),
        ('benchmarks', '0019_staff_permissions'),
        ('leases', '0023_tenant_settings_events'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
        migrations.CreateModel(
            name='Incident',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('kind', models.CharField(choices=[('link', 'link check'), ('counters', 'NIC counters'), ('throughput', 'throughput'), ('latency', 'latency'), ('collective', 'collective (NCCL)'), ('telemetry', 'fabric health'), ('integrity', 'measurement integrity'), ('metering_gap', 'metering gap')], max_length=16, verbose_name='kind')),
                ('target', models.CharField(max_length=255, verbose_name='affected nodes or pair')),
                ('pattern', models.CharField(max_length=32, verbose_name='pattern')),
                ('state', models.CharField(choices=[('open', 'open'), ('closed', 'closed')], default='open', max_length=8, verbose_name='state')),
                ('opened_at', models.DateTimeField(verbose_name='started at')),
                ('closed_at', models.DateTimeField(blank=True, null=True, verbose_name='ended at')),
                ('violations', models.PositiveIntegerField(default=0, verbose_name='violating samples')),
                ('worst_bps', models.BigIntegerField(blank=True, null=True, verbose_name='worst bandwidth (bit/s)')),
                ('worst_latency_us', models.FloatField(blank=True, null=True, verbose_name='worst latency (µs)')),
                ('rule', models.CharField(max_length=255, verbose_name='rule')),
                ('detail', models.TextField(blank=True, verbose_name='detail')),
                ('gap_bytes', models.DecimalField(blank=True, decimal_places=0, max_digits=30, null=True, verbose_name='bytes billed by time over the gap')),
                ('acknowledged_at', models.DateTimeField(blank=True, null=True, verbose_name='acknowledged at')),
                ('mitigated_at', models.DateTimeField(blank=True, null=True, verbose_name='mitigated at')),
                ('repair_note', models.TextField(blank=True, db_default='', default='', verbose_name='repair note')),
                ('notified_open_at', models.DateTimeField(blank=True, null=True, verbose_name='opening notified at')),
                ('notified_close_at', models.DateTimeField(blank=True, null=True, verbose_name='closing notified at')),
                ('acknowledged_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='acknowledged by')),
                ('lease', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='incidents', to='leases.lease', verbose_name='lease')),
                ('mitigated_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='mitigated by')),
                ('runs', models.ManyToManyField(db_constraint=False, related_name='incidents', to='benchmarks.proberun', verbose_name='evidence runs')),
                ('terms', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='incidents', to='leases.leaseterms', verbose_name='terms')),
            ],
            options={
                'verbose_name': 'incident',
                'verbose_name_plural': 'incidents',
                'db_table': 'billing_incident',
                'ordering': ['-opened_at'],
                'permissions': [('acknowledge_incident', 'Can acknowledge incidents'), ('mitigate_incident', 'Can mark incidents mitigated')],
                'indexes': [models.Index(fields=['lease', 'opened_at'], name='incident_lease_opened')],
                'constraints': [models.UniqueConstraint(condition=models.Q(('state', 'open')), fields=('lease', 'kind', 'pattern', 'target'), name='one_open_incident_per_target')],
            },
        ),
        ],
            database_operations=[],
        ),
        migrations.RunPython(rename_content_type, unrename_content_type),
    ]
