"""Beat schedule for billing: ingest finished runs every minute; draft the previous
month's invoices on the 1st of each month at 01:30 Asia/Shanghai."""

from django.db import migrations


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.update_or_create(
        name="gpulease: ingest finished probe runs",
        defaults={"task": "billing.ingest", "interval": every_minute, "enabled": True},
    )
    month_start, _ = CrontabSchedule.objects.get_or_create(
        minute="30", hour="1", day_of_month="1", month_of_year="*", day_of_week="*",
        timezone="Asia/Shanghai",
    )
    PeriodicTask.objects.update_or_create(
        name="gpulease: draft last month's invoices",
        defaults={"task": "billing.draft_previous_month", "crontab": month_start,
                  "enabled": True},
    )


def remove(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(
        name__in=["gpulease: ingest finished probe runs", "gpulease: draft last month's invoices"]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("billing", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create, remove)]
