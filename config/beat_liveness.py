"""Beat's own liveness: its scheduler touches BEAT_LIVENESS_FILE at every tick, and beat's
healthcheck (``manage.py readiness --check beat``, config.health.check_beat) reads the
file's age. A tick comes at least every 5 s (django-celery-beat's DatabaseScheduler looks
for schedule changes that often), so a file older than BEAT_LIVENESS_MAX_AGE_S means a beat
that is stuck or gone. The file lives in beat's own container or host, so the check needs
neither the database nor a worker: a worker outage never gets beat restarted.

Whether beat's tasks are actually run (beat, broker, worker and database together) is the
alert GpuleaseBeatHeartbeatMissing's job, from the worker's task counters."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django_celery_beat.schedulers import DatabaseScheduler

log = logging.getLogger(__name__)


def mark_alive(path: Path | None = None) -> None:
    path = path or settings.BEAT_LIVENESS_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        log.exception("beat cannot touch its liveness file %s", path)


class LivenessScheduler(DatabaseScheduler):
    def tick(self, *args: Any, **kwargs: Any) -> float:
        interval = super().tick(*args, **kwargs)
        mark_alive()
        return interval
