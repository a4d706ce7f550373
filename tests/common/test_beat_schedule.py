"""The beat schedule lives in code (config/beat.py); beat's DatabaseScheduler puts it into
its tables, where the admin shows it, and every task it names exists."""

import pytest
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from config.beat import SCHEDULE
from config.celery import app

pytestmark = pytest.mark.django_db(transaction=True)  # beat closes its connection


def test_migrations_store_no_schedule_and_beat_installs_the_one_in_code():
    assert not PeriodicTask.objects.filter(name__startswith="gpulease: ").exists()
    DatabaseScheduler(app=app)
    stored = {
        task.name: task for task in PeriodicTask.objects.filter(name__startswith="gpulease: ")
    }
    assert {name: task.task for name, task in stored.items()} == {
        "gpulease: beat heartbeat": "common.beat_heartbeat",
        "gpulease: dispatch due probes": "benchmarks.dispatch",
        "gpulease: poll fabric telemetry": "telemetry.poll",
        "gpulease: probe results self-check": "benchmarks.self_check",
        "gpulease: ingest finished probe runs": "billing.ingest",
        "gpulease: draft last month's invoices": "billing.draft_previous_month",
        "gpulease: sign last month's chain checkpoints": "billing.close_chain_checkpoints",
        "gpulease: create partitions ahead": "common.ensure_partitions",
        "gpulease: archive partitions past retention": "common.archive_partitions",
    }
    assert stored["gpulease: dispatch due probes"].interval.every == 60
    assert stored["gpulease: poll fabric telemetry"].interval.every == 15
    draft = stored["gpulease: draft last month's invoices"].crontab
    assert (draft.minute, draft.hour, draft.day_of_month) == ("30", "*", "1,2")
    # after the month's invoices and checkpoints: an archive carries the signed checkpoints
    archive = stored["gpulease: archive partitions past retention"].crontab
    assert (archive.minute, archive.hour, archive.day_of_month) == ("20", "2", "3")


def test_every_scheduled_task_is_registered():
    app.loader.import_default_modules()
    assert {entry["task"] for entry in SCHEDULE.values()} <= set(app.tasks)
