"""leases' Membership is now accounts.Membership (accounts 0001), on the same table
``leases_membership``: it leaves leases' state; nothing in the database changes."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('leases', '0026_webhook_secret_overlap'),
        ('accounts', '0001_move_membership_and_tokens'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name='Membership',
                ),
            ],
            database_operations=[],
        ),
    ]
