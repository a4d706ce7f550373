"""VAT per price component: node rent gets its own rate (``rent_tax_rate_percent``),
``tax_rate_percent`` stays the network service's. Existing versions get the rate they were
billed at (their ``tax_rate_percent``), so nothing already billed or hashed changes; new
versions default to 13% for rent."""

import django.core.validators
from decimal import Decimal

from django.db import migrations, models
from django.db.models import F


def copy_service_rate(apps, schema_editor):  # type: ignore[no-untyped-def]
    LeaseTerms = apps.get_model("leases", "LeaseTerms")
    LeaseTerms.objects.update(rent_tax_rate_percent=F("tax_rate_percent"))


class Migration(migrations.Migration):
    dependencies = [
        ("leases", "0009_link_existing_terms"),
    ]

    operations = [
        migrations.AlterField(
            model_name="leaseterms",
            name="tax_rate_percent",
            field=models.DecimalField(
                decimal_places=2,
                default=Decimal("6"),
                help_text=(
                    "Network fee, traffic, 95th percentile and SLA credits; value-added "
                    "telecom services are typically 6%."
                ),
                max_digits=5,
                validators=[
                    django.core.validators.MinValueValidator(Decimal("0")),
                    django.core.validators.MaxValueValidator(Decimal("100")),
                ],
                verbose_name="VAT rate of the network service (percent)",
            ),
        ),
        migrations.AddField(
            model_name="leaseterms",
            name="rent_tax_rate_percent",
            field=models.DecimalField(
                decimal_places=2,
                default=Decimal("13"),
                help_text="Renting GPU servers out is typically taxed at 13%.",
                max_digits=5,
                validators=[
                    django.core.validators.MinValueValidator(Decimal("0")),
                    django.core.validators.MaxValueValidator(Decimal("100")),
                ],
                verbose_name="VAT rate of the node rent (percent)",
            ),
        ),
        migrations.RunPython(copy_service_rate, migrations.RunPython.noop),
    ]
