# An alert is an occurrence, (fingerprint, startsAt): the same alert firing again after it
# resolved is a new row (monitoring.alertmanager).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('monitoring', '0001_initial'),
    ]

    operations = [
        migrations.AlterField(
            model_name='externalalert',
            name='fingerprint',
            field=models.CharField(max_length=64, verbose_name='fingerprint'),
        ),
        migrations.AddConstraint(
            model_name='externalalert',
            constraint=models.UniqueConstraint(fields=('fingerprint', 'starts_at'), name='one_alert_per_occurrence'),
        ),
    ]
