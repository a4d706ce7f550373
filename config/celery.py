import os

from celery import Celery
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("gpulease")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def route_task(
    name: str, args: object, kwargs: object, options: object, task: object = None, **kw: object
) -> dict[str, str] | None:
    """Celery's router (settings.CELERY_TASK_ROUTES): every ``billing.*`` task (ingest,
    drafting, checkpoints, incident and checkpoint notifications) goes to BILLING_QUEUE,
    read when the task is sent. Anything else keeps its default: probe batches name their
    site's queue themselves, dispatch, self-check and the heartbeat go to ``celery``."""
    if name.startswith("billing."):
        return {"queue": settings.BILLING_QUEUE}
    return None
