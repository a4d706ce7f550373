"""Memberships (from leases) and API tokens (from api) move to this app (issue 31 item 5).
Their tables stay ``leases_membership`` and ``api_apitoken``: only Django's state moves, no
row does. leases 0027 and api 0004 drop their own models from state.

The content types are renamed (leases.membership and api.apitoken to accounts.*), so their
permission rows (add/change/delete/view_membership, view_apitoken, issue_any_token,
revoke_any_token, ...) keep their ids and every group and user that holds them keeps them;
only the dotted name turns into ``accounts.*``."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = [('leases', 'membership'), ('api', 'apitoken')]


def _move(apps, schema_editor, forward: bool) -> None:
    ContentType = apps.get_model('contenttypes', 'ContentType')
    types = ContentType.objects.using(schema_editor.connection.alias)
    for app_label, model in MOVED:
        source, destination = (app_label, 'accounts') if forward else ('accounts', app_label)
        if types.filter(app_label=destination, model=model).exists():
            continue
        types.filter(app_label=source, model=model).update(app_label=destination)


def rename_content_types(apps, schema_editor):
    _move(apps, schema_editor, forward=True)


def unrename_content_types(apps, schema_editor):
    _move(apps, schema_editor, forward=False)


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('api', '0003_staff_permissions'),
        ('leases', '0025_repair_objective'),
        ('contenttypes', '0002_remove_content_type_name'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApiToken',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(blank=True, max_length=100, verbose_name='name')),
                        ('prefix', models.CharField(max_length=8, unique=True, verbose_name='prefix')),
                        ('secret_hash', models.CharField(max_length=64, verbose_name='SHA-256 of the token')),
                        ('scopes', models.JSONField(default=list, verbose_name='scopes')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created at')),
                        ('expires_at', models.DateTimeField(blank=True, null=True, verbose_name='expires at')),
                        ('revoked_at', models.DateTimeField(blank=True, null=True, verbose_name='revoked at')),
                        ('last_used_at', models.DateTimeField(blank=True, null=True, verbose_name='last used at')),
                        ('role', models.CharField(blank=True, choices=[('admin', 'tenant admin'), ('viewer', 'viewer'), ('auditor', 'auditor')], max_length=16, verbose_name='role')),
                        ('holder_is_staff', models.BooleanField(default=False, verbose_name='holder was provider staff')),
                        ('issuer', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='issued_api_tokens', to=settings.AUTH_USER_MODEL, verbose_name='issued by')),
                        ('tenant', models.ForeignKey(blank=True, help_text='Empty for a provider staff token.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to='leases.tenant', verbose_name='acts for tenant')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='api_tokens', to=settings.AUTH_USER_MODEL, verbose_name='user')),
                    ],
                    options={
                        'verbose_name': 'API token',
                        'verbose_name_plural': 'API tokens',
                        'db_table': 'api_apitoken',
                        'ordering': ['-created_at', '-id'],
                        'permissions': [('issue_any_token', 'Can issue API tokens held by other provider staff'), ('revoke_any_token', "Can revoke other users' API tokens")],
                    },
                ),
                migrations.CreateModel(
                    name='Membership',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created_at', models.DateTimeField(auto_now_add=True, verbose_name='created at')),
                        ('updated_at', models.DateTimeField(auto_now=True, verbose_name='updated at')),
                        ('role', models.CharField(choices=[('admin', 'tenant admin'), ('viewer', 'viewer'), ('auditor', 'auditor')], default='viewer', max_length=16, verbose_name='role')),
                        ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='leases.tenant', verbose_name='tenant')),
                        ('user', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to=settings.AUTH_USER_MODEL, verbose_name='user')),
                    ],
                    options={
                        'verbose_name': 'membership',
                        'verbose_name_plural': 'memberships',
                        'db_table': 'leases_membership',
                        'constraints': [models.UniqueConstraint(fields=('user', 'tenant'), name='one_membership_per_user_and_tenant', violation_error_message='This user already belongs to this tenant.')],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(rename_content_types, unrename_content_types),
    ]
