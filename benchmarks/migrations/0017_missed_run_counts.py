# A site's missed runs counted as they are marked, so that archiving a month does not lower
# gpulease_site_missed_runs_total. Each site starts from the missed runs in the database
# now, so the series goes on from the figure Prometheus last saw.

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Count


def count_the_missed_runs_held(apps, schema_editor):
    ProbeRun = apps.get_model("benchmarks", "ProbeRun")
    MissedRunCount = apps.get_model("benchmarks", "MissedRunCount")
    rows = (
        ProbeRun.objects.filter(state="missed")
        .values_list("site_id")
        .annotate(n=Count("pk"))
        .order_by()
    )
    MissedRunCount.objects.bulk_create(
        [MissedRunCount(site_id=site_id, total=n) for site_id, n in rows]
    )


class Migration(migrations.Migration):

    dependencies = [
        ('benchmarks', '0016_pending_witness'),
        ('leases', '0014_terms_health_rules'),
    ]

    operations = [
        migrations.CreateModel(
            name='MissedRunCount',
            fields=[
                ('site', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='missed_run_count', serialize=False, to='leases.site', verbose_name='site')),
                ('total', models.BigIntegerField(default=0, verbose_name='runs marked missed')),
            ],
            options={
                'verbose_name': 'missed run count',
                'verbose_name_plural': 'missed run counts',
            },
        ),
        migrations.RunPython(count_the_missed_runs_held, migrations.RunPython.noop),
    ]
