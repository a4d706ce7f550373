"""Draft last month's invoices every hour of the 1st and 2nd (UTC), so each tenant is
drafted once its own zone has closed the month (the task skips a month already drafted)."""

from django.db import migrations

TASK = "gpulease: draft last month's invoices"


def hourly(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    schedule, _ = CrontabSchedule.objects.get_or_create(
        minute="30", hour="*", day_of_month="1,2", month_of_year="*", day_of_week="*",
        timezone="UTC",
    )
    PeriodicTask.objects.filter(name=TASK).update(crontab=schedule)


def monthly(apps, schema_editor):
    CrontabSchedule = apps.get_model("django_celery_beat", "CrontabSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    schedule, _ = CrontabSchedule.objects.get_or_create(
        minute="30", hour="1", day_of_month="1", month_of_year="*", day_of_week="*",
        timezone="Asia/Shanghai",
    )
    PeriodicTask.objects.filter(name=TASK).update(crontab=schedule)


class Migration(migrations.Migration):
    dependencies = [("billing", "0003_evidence_and_disputes")]

    operations = [migrations.RunPython(hourly, monthly)]
