from celery import shared_task
from django.utils import timezone

from common.models import Heartbeat


@shared_task(name="common.ping")
def ping(token: str) -> str:
    """Round trip used by health checks and tests to prove a worker is consuming."""
    return f"pong:{token}"


@shared_task(name="common.beat_heartbeat", ignore_result=True)
def beat_heartbeat() -> None:
    """Sent by beat every minute and run by a worker: a recent row means beat, the broker,
    a worker and the database all work (``/readyz`` reads its age)."""
    Heartbeat.objects.update_or_create(name=Heartbeat.BEAT, defaults={"at": timezone.now()})
