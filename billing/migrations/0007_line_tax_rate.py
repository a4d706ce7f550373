"""Tax per line: every invoice line carries its VAT rate; the invoice's own rate is the
one its lines share, or empty when they differ. Existing lines get the rate they were
taxed at: their invoice's (one rate per invoice until now), so stored totals, documents
and credit notes on them stay as they were."""

from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def fill_line_rates(apps, schema_editor):  # type: ignore[no-untyped-def]
    Invoice = apps.get_model("billing", "Invoice")
    InvoiceLine = apps.get_model("billing", "InvoiceLine")
    rate = Invoice.objects.filter(pk=OuterRef("invoice_id")).values("tax_rate_percent")[:1]
    InvoiceLine.objects.filter(tax_rate_percent__isnull=True).update(
        tax_rate_percent=Subquery(rate)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0006_chain_checkpoints"),
    ]

    operations = [
        migrations.AlterField(
            model_name="invoice",
            name="tax_rate_percent",
            field=models.DecimalField(
                blank=True,
                decimal_places=2,
                help_text=(
                    "The rate every line carries, when they share one; empty when the lines "
                    "have different rates (tax is per rate group)."
                ),
                max_digits=5,
                null=True,
                verbose_name="tax rate (percent)",
            ),
        ),
        migrations.AddField(
            model_name="invoiceline",
            name="tax_rate_percent",
            field=models.DecimalField(
                decimal_places=2, max_digits=5, null=True, verbose_name="tax rate (percent)"
            ),
        ),
        migrations.RunPython(fill_line_rates, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="invoiceline",
            name="tax_rate_percent",
            field=models.DecimalField(
                decimal_places=2,
                help_text="The VAT rate of the line's price component, from its terms version.",
                max_digits=5,
                verbose_name="tax rate (percent)",
            ),
        ),
    ]
