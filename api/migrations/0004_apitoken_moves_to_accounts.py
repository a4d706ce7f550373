"""api's ApiToken is now accounts.ApiToken (accounts 0001), on the same table
``api_apitoken``: it leaves api's state; nothing in the database changes."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0003_staff_permissions'),
        ('accounts', '0001_move_membership_and_tokens'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name='ApiToken',
                ),
            ],
            database_operations=[],
        ),
    ]
