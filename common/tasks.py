from celery import shared_task
from django.conf import settings
from django.utils import timezone

from common.models import Heartbeat


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
