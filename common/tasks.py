from typing import Any

from celery import current_app, shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from common.models import Heartbeat


def send(name: str, *args: Any, **options: Any) -> Any:
    """Send the Celery task ``name``. A service that enqueues its own app's task sends it
    by name, so it never imports the tasks module that imports it (tasks -> services, one
    way). Where the task is registered in this process it is applied as the task object
    would be (its options, eager mode in tests); otherwise sent by name, with the same
    routes."""
    task = current_app.tasks.get(name)
    if task is not None:
        return task.apply_async(args=list(args), **options)
    return current_app.send_task(name, args=list(args), **options)


def send_after_commit(name: str, *args: Any, **options: Any) -> None:
    """``send`` once the current transaction commits (never for a rolled-back one)."""
    transaction.on_commit(lambda: send(name, *args, **options))


@shared_task(name="common.ping")
def ping(token: str) -> str:
    """Round trip used by health checks and tests to prove a worker is consuming."""
    return f"pong:{token}"


@shared_task(name="common.beat_heartbeat", ignore_result=True)
def beat_heartbeat() -> None:
    """Sent by beat every minute and run by a worker: a recent row means beat, the broker,
    a worker and the database all work. The worker's task counter for it
    (gpulease_celery_tasks_total) is what the alert GpuleaseBeatHeartbeatMissing watches;
    web's /readyz does not look at it."""
    Heartbeat.objects.update_or_create(name=Heartbeat.BEAT, defaults={"at": timezone.now()})


@shared_task(name="common.ensure_partitions", ignore_result=True)
def ensure_partitions() -> list[str]:
    """Daily: this month's and the next months' partitions exist before a row needs them."""
    from common import partitions

    return partitions.ensure(now=timezone.now(), ahead=settings.PARTITIONS_AHEAD)


@shared_task(name="common.archive_partitions", ignore_result=True)
def archive_partitions() -> list[str]:
    """Daily: months past the retention leave the database as archive files."""
    from common import archives

    return archives.archive_due()
