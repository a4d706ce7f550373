"""Row locks: the one way this project takes them.

A locked row here is a mutex for the writers of what it heads (a lease's chain, a tenant's
invoices, the ingest cursor...), and no primary key ever changes. So every lock is
``FOR NO KEY UPDATE``, never a plain ``FOR UPDATE``: the latter also blocks the key-share
lock that another transaction's foreign keys to the row take at its commit, and an ingest
holding a run while the chain appender held its lease and waited for that run deadlocked
on it (``tests/billing/test_ingest.py`` replays it). Writers still take turns: NO KEY
UPDATE conflicts with itself. Where one transaction locks many rows that another may
lock too (runs: ingest marks them read, the chain appender links them), both lock them
first in primary-key order (``lock_in_key_order``): whatever order their UPDATEs then
visit the rows in, neither can hold one the other needs while it waits for one the other
holds. SQLite ignores row locks.

One exception: ``intake_lock`` serializes writers of rows that do not exist yet (there is
no row to lock before the first of them inserts it). It is a PostgreSQL advisory lock
held to the end of the transaction; SQLite needs none (settings: every transaction there
takes the database's write lock when it begins)."""

import hashlib
from typing import Any, TypeVar

from django.db import connection, models

M = TypeVar("M", bound=models.Model)


def locking(rows: "models.QuerySet[M] | models.Manager[M]", **options: Any) -> "models.QuerySet[M]":
    """``rows`` locked until the transaction ends (``options``: skip_locked, of, ...)."""
    return rows.select_for_update(no_key=True, **options)


def lock_in_key_order(rows: "models.QuerySet[M]") -> None:
    """Lock ``rows`` now, one after another in primary-key order (module docstring)."""
    list(locking(rows.order_by("pk")).values_list("pk", flat=True))


def intake_lock(name: str) -> None:
    """Wait for, then hold until the transaction ends, the lock named ``name`` (module
    docstring): call it first in the transaction, inside ``transaction.atomic()``."""
    if connection.vendor != "postgresql":
        return
    key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key])
