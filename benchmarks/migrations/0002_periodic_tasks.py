"""The beat schedule lives in the database (django-celery-beat), editable in the admin:
the dispatcher every minute, the self-check every five minutes."""

from django.db import migrations

SCHEDULE = [
    ("gpulease: dispatch due probes", "benchmarks.dispatch", 60),
    ("gpulease: probe results self-check", "benchmarks.self_check", 300),
]


def create(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    for name, task, seconds in SCHEDULE:
        interval, _ = IntervalSchedule.objects.get_or_create(every=seconds, period="seconds")
        PeriodicTask.objects.update_or_create(
            name=name, defaults={"task": task, "interval": interval, "enabled": True}
        )


def remove(apps, schema_editor):
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    PeriodicTask.objects.filter(name__in=[name for name, _, _ in SCHEDULE]).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("benchmarks", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create, remove)]
