# Rejudgements: a run judged again by the terms a retroactive, acknowledged amendment put
# in force at its slot; a link of the lease's hash chain of its own (billing.rerate).

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('benchmarks', '0007_trigger_tenant'),
        ('leases', '0009_link_existing_terms'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Rejudgement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('verdict', models.CharField(choices=[('pass', 'pass'), ('fail', 'fail'), ('none', 'no verdict')], max_length=8, verbose_name='verdict')),
                ('rule', models.CharField(blank=True, max_length=255, verbose_name='rule')),
                ('verdict_reason', models.TextField(blank=True, verbose_name='verdict reason')),
                ('judged_at', models.DateTimeField(verbose_name='judged at')),
                ('chain_index', models.PositiveIntegerField(blank=True, null=True, verbose_name='chain index')),
                ('prev_hash', models.CharField(blank=True, max_length=64, verbose_name='previous link hash')),
                ('link_hash', models.CharField(blank=True, max_length=64, verbose_name='link hash')),
                ('judged_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='re-rated by')),
                ('lease', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rejudgements', to='leases.lease', verbose_name='lease')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='rejudgements', to='benchmarks.proberun', verbose_name='probe run')),
                ('terms', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='rejudgements', to='leases.leaseterms', verbose_name='terms judged by')),
            ],
            options={
                'verbose_name': 'rejudgement',
                'verbose_name_plural': 'rejudgements',
                'ordering': ['lease', 'chain_index'],
                'constraints': [models.UniqueConstraint(fields=('lease', 'chain_index'), name='one_rejudgement_per_chain_index', violation_error_message="This lease's chain already has a rejudgement at this index."), models.UniqueConstraint(fields=('run', 'terms'), name='one_rejudgement_per_run_and_terms', violation_error_message='This run was already judged again by these terms.')],
            },
        ),
    ]
