"""Webhook secrets in Standard Webhooks' form, whsec_<base64 of the key>. A secret from before
(64 hex characters, used as text) becomes whsec_ + the base64 of that text's bytes: the key
is unchanged, so a receiver still checking X-Gpulease-Signature with its old secret keeps
verifying, and the whsec_ form verifies the new webhook-signature with the same key."""

import base64

from django.db import migrations, models

import leases.models.tenants

PREFIX = "whsec_"


def to_standard(apps, schema_editor):
    Tenant = apps.get_model("leases", "Tenant")
    for tenant in Tenant.objects.exclude(webhook_secret__startswith=PREFIX).only("webhook_secret"):
        key = tenant.webhook_secret.encode("utf-8")
        tenant.webhook_secret = PREFIX + base64.b64encode(key).decode("ascii")
        tenant.save(update_fields=["webhook_secret"])


def to_text(apps, schema_editor):
    """Back to the old form where the key is text that fits (every converted secret)."""
    Tenant = apps.get_model("leases", "Tenant")
    for tenant in Tenant.objects.filter(webhook_secret__startswith=PREFIX).only("webhook_secret"):
        key = base64.b64decode(tenant.webhook_secret[len(PREFIX) :])
        try:
            text = key.decode("utf-8")
        except UnicodeDecodeError:
            text = key.hex()[:64]  # a new random key has no text form: a new secret
        tenant.webhook_secret = text[:64]
        tenant.save(update_fields=["webhook_secret"])


class Migration(migrations.Migration):
    dependencies = [
        ("leases", "0014_terms_health_rules"),
    ]

    operations = [
        migrations.AlterField(
            model_name="tenant",
            name="webhook_secret",
            field=models.CharField(
                default=leases.models.tenants.new_webhook_secret,
                help_text=(
                    "Standard Webhooks secret (whsec_...): the key of the webhook-signature "
                    "header. Give it to the tenant; a receiver verifies with it."
                ),
                max_length=100,
                validators=[leases.models.tenants.validate_webhook_secret],
                verbose_name="webhook signing secret",
            ),
        ),
        migrations.RunPython(to_standard, to_text),
    ]
