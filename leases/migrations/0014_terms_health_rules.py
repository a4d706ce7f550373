"""Terms versions name the fabric health rule set that judges them. Every version that
exists already was written (and hashed) under set 1 and keeps it; new versions default to
set 2 (gpulease_verify.health.RULE_SETS)."""

from django.db import migrations, models

FIELD = dict(
    choices=[
        (1, "1: flaps as down-then-up cycles within 10 minutes"),
        (2, "2: gpud's flaps, drops and sticky windows, speed downgrades, saturated counters"),
    ],
    help_text=(
        "Which set of fabric health rules judges this version's telemetry "
        "(gpulease_verify.health.RULE_SETS)."
    ),
    verbose_name="fabric health rule set",
)


class Migration(migrations.Migration):

    dependencies = [
        ('leases', '0013_confirm_failures'),
    ]

    operations = [
        # Existing versions: set 1.
        migrations.AddField(
            model_name="leaseterms",
            name="health_rules",
            field=models.PositiveSmallIntegerField(default=1, **FIELD),
        ),
        # New versions: set 2.
        migrations.AlterField(
            model_name="leaseterms",
            name="health_rules",
            field=models.PositiveSmallIntegerField(default=2, **FIELD),
        ),
    ]
