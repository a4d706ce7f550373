# A lease event for re-rating a window under corrected terms (billing.rerate).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('leases', '0010_terms_rent_tax_rate'),
    ]

    operations = [
        migrations.AlterField(
            model_name='leaseevent',
            name='action',
            field=models.CharField(choices=[('created', 'created'), ('activated', 'activated'), ('ended', 'ended'), ('cancelled', 'cancelled'), ('amended', 'terms amended'), ('amendment_proposed', 'retroactive amendment proposed'), ('node_assigned', 'node assigned'), ('node_released', 'node released'), ('rerated', 're-rated under corrected terms')], max_length=32, verbose_name='action'),
        ),
    ]
