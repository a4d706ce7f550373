"""One beat schedules at a time: the beat lock.

Two beats started by mistake (a second container, a failover pair, a unit started on two
hosts) would each send every periodic task. So the beat that sends holds a lock: one
database row (``common.models.BeatLock``; the database is what every beat already shares,
SQLite under ``make run`` as PostgreSQL in production), whose lease it renews at each tick
for BEAT_LOCK_TTL_S. Another beat stands by, sending nothing, and takes the lock over once
the lease has run out (its holder died or hangs) or its holder released it (stopped
cleanly). Leases are timed by the database's clock, so beats on hosts whose clocks
disagree still agree on when one expires.

A holder stuck in one tick for longer than the TTL may send at most that tick's task after
another beat took over; a tick lasts well under a second unless the database or broker
hangs (the scheduler's ticks are at most 5 s apart, and the TTL is at least 10 s)."""

from __future__ import annotations

import os
import socket
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import DurationField, Value
from django.db.models.functions import Now

from common.models import BeatLock

NAME = "beat"


def new_holder() -> str:
    """This process's name on the lock: host and pid say which beat it is, and the random
    part keeps a restarted beat (pid 1 again in a container) from being taken for the one
    that died."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _expiry() -> Now:
    ttl = timedelta(seconds=settings.BEAT_LOCK_TTL_S)
    return Now() + Value(ttl, output_field=DurationField())  # type: ignore[return-value]


RENEWED, TAKEN = "renewed", "taken"


def hold(holder: str) -> str | None:
    """Renew the lock for ``holder`` (RENEWED: it held it without a break) or take it
    (TAKEN: it was free, expired, or ``holder``'s own lease had run out, so another beat
    may have sent in between); None while another holds an unexpired lease. Each
    statement is atomic: of two beats asking at once, the database lets one through."""
    if BeatLock.objects.filter(name=NAME, holder=holder, expires_at__gte=Now()).update(
        expires_at=_expiry()
    ):
        return RENEWED
    if BeatLock.objects.filter(name=NAME, expires_at__lt=Now()).update(
        holder=holder, acquired_at=Now(), expires_at=_expiry()
    ):
        return TAKEN
    try:
        with transaction.atomic():
            BeatLock.objects.create(
                name=NAME, holder=holder, acquired_at=Now(), expires_at=_expiry()
            )
    except IntegrityError:
        return None  # another beat made the row first: it holds the lock
    return TAKEN


def release(holder: str) -> None:
    """Give the lock up at once (a beat that stops cleanly), if ``holder`` has it."""
    BeatLock.objects.filter(name=NAME, holder=holder).update(expires_at=Now())


def current() -> BeatLock | None:
    return BeatLock.objects.filter(name=NAME).first()
