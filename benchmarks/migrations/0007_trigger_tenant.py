# Run-now asked for by the tenant is told apart from the provider's own (manual).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0006_run_not_passed_index"),
    ]

    operations = [
        migrations.AlterField(
            model_name="proberun",
            name="trigger",
            field=models.CharField(
                choices=[
                    ("schedule", "schedule"),
                    ("manual", "run now"),
                    ("tenant", "run now by the tenant"),
                    ("acceptance", "acceptance"),
                ],
                default="schedule",
                max_length=16,
                verbose_name="trigger",
            ),
        ),
    ]
