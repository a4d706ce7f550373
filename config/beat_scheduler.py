"""Beat's scheduler: django-celery-beat's DatabaseScheduler, sending only while this beat
holds the beat lock (``common.beat_lock``), and telling beat's healthcheck it is alive.

One beat at a time: at each tick the scheduler renews the lock, or tries to take it, before
it looks at the schedule. A beat without it sends nothing, logs once that it is standing
by, and asks again within 5 s; it takes over once the holder's lease (BEAT_LOCK_TTL_S) has
run out or the holder stopped cleanly and released it. On taking over it reads the schedule
afresh from the database, where the previous holder wrote when each entry last ran, so a
due time already sent is not sent again; for that the holder writes an entry's last run
at once after sending it (DatabaseScheduler would otherwise write every 3 minutes). A beat
standing by never advances an entry's last run.

Liveness: the scheduler touches BEAT_LIVENESS_FILE at every tick, holder and standby alike,
and beat's healthcheck (``manage.py readiness --check beat``, common.health.check_beat)
reads the file's age. A tick comes at least every 5 s (django-celery-beat's
DatabaseScheduler looks for schedule changes that often), so a file older than
BEAT_LIVENESS_MAX_AGE_S means a beat that is stuck or gone. The file lives in beat's own
container or host, so the check needs neither the database nor a worker: a worker outage
never gets beat restarted. Whether beat's tasks are actually run (beat, broker, worker and
database together) is the alert GpuleaseBeatHeartbeatMissing's job, from the worker's task
counters."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django_celery_beat.schedulers import DatabaseScheduler

from common import beat_lock

log = logging.getLogger(__name__)


def mark_alive(path: Path | None = None) -> None:
    path = path or settings.BEAT_LIVENESS_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    except OSError:
        log.exception("beat cannot touch its liveness file %s", path)


class SingleBeatScheduler(DatabaseScheduler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.holder = beat_lock.new_holder()
        self.holding = False
        self.standing_by = False
        self.unreachable = False
        super().__init__(*args, **kwargs)
        # Write an entry's last run as soon as it is sent (module docstring).
        self.sync_every_tasks = 1

    def tick(self, *args: Any, **kwargs: Any) -> float:
        mark_alive()
        held = self._hold()
        if held is None:
            return self.max_interval
        if held == beat_lock.TAKEN:
            # What the previous holder sent is in the database, not in this beat's heap.
            self._initial_read = True
            self._heap = None
        return super().tick(*args, **kwargs)

    def reserve(self, entry: Any) -> Any:
        """DatabaseScheduler keeps the entry it just sent, with its old last run, in its
        schedule, and a heap rebuilt from that schedule (after any change to the periodic
        tasks table) sends the entry a second time at once (django-celery-beat issue 558;
        seen here on every takeover). The schedule keeps the advanced entry instead."""
        new_entry = super().reserve(entry)
        if self._schedule is not None and new_entry.name in self._schedule:
            self._schedule[new_entry.name] = new_entry
        return new_entry

    def _hold(self) -> str | None:
        try:
            close_old_connections()
            held = beat_lock.hold(self.holder)
            self.unreachable = False
        except DatabaseError:
            # Nothing is sent until the lock is renewed: another beat may hold it by then.
            if not self.unreachable:  # once an outage, not at every tick
                log.exception("beat %s cannot reach the database for the beat lock", self.holder)
            self.holding, self.unreachable = False, True
            return None
        if held is None:
            if self.holding:
                self.sync()  # the last runs of what it did send
            if not self.standing_by:
                lock = self._current()
                log.warning(
                    "beat %s is standing by: the beat lock is held by %s until %s",
                    self.holder,
                    lock.holder if lock else "?",
                    lock.expires_at.isoformat() if lock else "?",
                )
            self.holding, self.standing_by = False, True
            return None
        if held == beat_lock.TAKEN:
            log.warning(
                "beat %s holds the beat lock and schedules (lease %s s)",
                self.holder,
                settings.BEAT_LOCK_TTL_S,
            )
        self.holding, self.standing_by = True, False
        return held

    @staticmethod
    def _current() -> beat_lock.BeatLock | None:
        try:
            return beat_lock.current()
        except DatabaseError:
            return None

    def close(self) -> None:
        super().close()
        if self.holding:
            try:
                beat_lock.release(self.holder)
            except DatabaseError:
                log.exception("beat %s could not release the beat lock", self.holder)
