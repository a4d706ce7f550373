"""Monthly range partitions of the big time-series tables, on PostgreSQL (issue 16).

Runs, telemetry port intervals and traffic samples are each one table partitioned by
RANGE on their time column, one partition per UTC month (``<table>_p2026_12``), plus a
default partition that catches rows outside every month made so far. Beat creates the
months ahead (``ensure``); a month that arrives in the default partition first is moved
into its own partition when that is made, so nothing is ever refused or lost.

Plain SQL rather than pg_partman or django-postgres-extra: pg_partman is an extension that
a managed PostgreSQL may not offer and that runs its own background worker, and
django-postgres-extra asks for its own database backend and model base class. Three tables
cut by month, detached and archived whole (``common.archives``), are a few statements of
transactional DDL that this module holds in one place.

A partitioned table's unique keys must hold its partition column, so the primary key is
``(id, <column>)`` and a unique key without the column gets it (``one_run_per_chain_index``
is unique per lease, index and slot; the chain's linking holds the lease's row lock, and
the verifier rejects a repeated index anyway). No other table can hold a foreign key to a
partitioned table's ``id`` for the same reason: those references (rejudgements, evidence,
incidents' runs, runs' nodes) are kept by Django, as ``db_constraint=False`` says.

SQLite (``make run``) keeps plain tables: every function here does nothing there."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, migrations, transaction
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.utils import timezone

from gpulease_verify.periods import MAX_YEAR, MIN_YEAR, Period

UTC = "UTC"


@dataclass(frozen=True)
class Table:
    name: str
    column: str
    # Rows of another table that belong to this table's rows: they leave with an archived
    # month and come back with it. (table, its column holding this table's id)
    companions: tuple[tuple[str, str], ...] = ()
    # Shared rows this table's rows name by a key (raw outputs by SHA-256): an archive
    # carries a copy and they stay; a restore adds those missing. (table, key, columns)
    shared: tuple[tuple[str, str, tuple[str, ...]], ...] = ()


TABLES: tuple[Table, ...] = (
    Table(
        "benchmarks_proberun",
        "slot_at",
        (("benchmarks_proberun_nodes", "proberun_id"),),
        (("benchmarks_rawoutput", "sha256", ("raw_sha256", "stderr_sha256")),),
    ),
    Table("telemetry_portsample", "at"),
    Table("billing_trafficsample", "slot_at"),
)
BY_NAME = {table.name: table for table in TABLES}


def supported() -> bool:
    return connection.vendor == "postgresql"


def partition_name(table: str, month: Period) -> str:
    return f"{table}_p{month.year:04d}_{month.month:02d}"


def default_name(table: str) -> str:
    return f"{table}_default"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


def _bounds(month: Period) -> tuple[datetime, datetime]:
    return month.bounds(UTC)


# -- converting a plain table (migrations) -------------------------------------------------


def convert(schema_editor: BaseDatabaseSchemaEditor, table: str, column: str, now: datetime):
    """Turn ``table`` into a table partitioned by month on ``column``, keeping its rows, its
    indexes, its constraints and its id sequence; foreign keys that pointed at it are
    dropped (Django keeps those references). For a migration: nothing on SQLite."""
    if schema_editor.connection.vendor != "postgresql":
        return
    old = f"{table}__unpartitioned"
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            """SELECT c.conname, c.contype, pg_get_constraintdef(c.oid),
                      array(SELECT a.attname FROM unnest(c.conkey) k
                            JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k)
               FROM pg_constraint c WHERE c.conrelid = %s::regclass
                 AND c.contype IN ('p', 'u', 'f') ORDER BY c.contype, c.conname""",
            [table],
        )
        constraints = cursor.fetchall()
        cursor.execute(
            """SELECT pg_get_indexdef(i.indexrelid), i.indisunique
               FROM pg_index i WHERE i.indrelid = %s::regclass
                 AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)""",
            [table],
        )
        indexes = cursor.fetchall()
        cursor.execute(f"SELECT min({_q(column)}) FROM {_q(table)}")
        (earliest,) = cursor.fetchone()
        cursor.execute(f"ALTER TABLE {_q(table)} RENAME TO {_q(old)}")
        cursor.execute(
            f"CREATE TABLE {_q(table)} (LIKE {_q(old)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
            f" INCLUDING STORAGE) PARTITION BY RANGE ({_q(column)})"
        )
        cursor.execute(f"CREATE TABLE {_q(default_name(table))} PARTITION OF {_q(table)} DEFAULT")
        first = Period.containing(earliest or now, UTC)
        for month in Period.span(first, Period.containing(now, UTC).shift(3)):
            create(cursor, table, month)
        cursor.execute(f"INSERT INTO {_q(table)} SELECT * FROM {_q(old)}")
        cursor.execute(f"DROP TABLE {_q(old)} CASCADE")
        sequence = f"{table}_id_seq"
        cursor.execute(f"CREATE SEQUENCE {_q(sequence)} OWNED BY {_q(table)}.id")
        cursor.execute(
            f"SELECT setval(%s, coalesce((SELECT max(id) FROM {_q(table)}), 0) + 1, false)",
            [sequence],
        )
        cursor.execute(
            f"ALTER TABLE {_q(table)} ALTER COLUMN id SET DEFAULT nextval(%s::regclass)",
            [sequence],
        )
        for name, kind, definition, columns in constraints:
            if kind == "p":
                definition = f"PRIMARY KEY ({', '.join(_q(c) for c in [*columns, column])})"
            elif kind == "u" and column not in columns:
                definition = f"UNIQUE ({', '.join(_q(c) for c in [*columns, column])})"
            cursor.execute(f"ALTER TABLE {_q(table)} ADD CONSTRAINT {_q(name)} {definition}")
        for definition, unique in indexes:
            if unique and not re.search(rf"\b{column}\b", definition):
                raise ValueError(f"{table}: a unique index without {column}: {definition}")
            cursor.execute(definition)


def unconvert(schema_editor: BaseDatabaseSchemaEditor, table: str, column: str):
    """The reverse of ``convert`` for a migration rolled back: not supported, by design."""
    if schema_editor.connection.vendor == "postgresql":
        raise NotImplementedError(f"{table} stays partitioned; restore a backup to go back")


def by_month(table: str, column: str) -> migrations.RunPython:
    """The migration operation that partitions ``table`` by month of ``column``
    (``convert``), and undoes it (``unconvert``)."""
    return migrations.RunPython(
        lambda _apps, editor: convert(editor, table, column, timezone.now()),
        lambda _apps, editor: unconvert(editor, table, column),
    )


# -- months ahead ----------------------------------------------------------------------------


def create(cursor, table: str, month: Period) -> bool:
    """Make ``month``'s partition of ``table`` if it is not there, moving into it any rows
    the default partition caught for that month. True when it was made."""
    name = partition_name(table, month)
    cursor.execute("SELECT to_regclass(%s)", [name])
    if cursor.fetchone()[0] is not None:
        return False
    lo, hi = _bounds(month)
    column = _partition_column(cursor, table)
    cursor.execute(
        f"SELECT EXISTS (SELECT 1 FROM {_q(default_name(table))}"
        f" WHERE {_q(column)} >= %s AND {_q(column)} < %s)",
        [lo, hi],
    )
    if not cursor.fetchone()[0]:
        cursor.execute(
            f"CREATE TABLE {_q(name)} PARTITION OF {_q(table)} FOR VALUES FROM (%s) TO (%s)",
            [lo, hi],
        )
        return True
    fill(cursor, table, month)
    return True


def fill(cursor, table: str, month: Period, load: Callable[[str], object] | None = None) -> str:
    """Make ``month``'s partition of ``table`` as a table of its own, ``load`` it (an
    archive's rows) if given, move into it the rows the default partition caught for that
    month, and attach it: the one way rows of a month come back out of the default. Its
    name."""
    name = partition_name(table, month)
    column = _partition_column(cursor, table)
    lo, hi = _bounds(month)
    cursor.execute(
        f"CREATE TABLE {_q(name)} (LIKE {_q(table)} INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
    )
    if load is not None:
        load(name)
    cursor.execute(
        f"WITH moved AS (DELETE FROM {_q(default_name(table))}"
        f" WHERE {_q(column)} >= %s AND {_q(column)} < %s RETURNING *)"
        f" INSERT INTO {_q(name)} SELECT * FROM moved",
        [lo, hi],
    )
    attach(cursor, table, name, month)
    return name


def attach(cursor, table: str, name: str, month: Period) -> None:
    lo, hi = _bounds(month)
    cursor.execute(
        f"ALTER TABLE {_q(table)} ATTACH PARTITION {_q(name)} FOR VALUES FROM (%s) TO (%s)",
        [lo, hi],
    )


def _partition_column(cursor, table: str) -> str:
    if table in BY_NAME:
        return BY_NAME[table].column
    cursor.execute(
        """SELECT a.attname FROM pg_partitioned_table p
           JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = p.partattrs[0]
           WHERE p.partrelid = %s::regclass""",
        [table],
    )
    return cursor.fetchone()[0]


def ensure(*, now: datetime, ahead: int = 3) -> list[str]:
    """Every table's partitions for this UTC month and ``ahead`` months after it, plus any
    month the default partition has caught rows of (a late row, a pinned test clock). The
    names made; archived months are left alone. For beat, daily."""
    if not supported():
        return []
    made: list[str] = []
    current = Period.containing(now, UTC)
    wanted = list(Period.span(current, current.shift(ahead)))
    archived = {str(month) for month in archived_months()}
    with transaction.atomic(), connection.cursor() as cursor:
        for table in TABLES:
            cursor.execute(
                f"SELECT DISTINCT date_trunc('month', {_q(table.column)} AT TIME ZONE 'UTC')"
                f" FROM {_q(default_name(table.name))}"
            )
            caught = [
                Period(day.year, day.month)
                for (day,) in cursor.fetchall()
                if MIN_YEAR <= day.year <= MAX_YEAR
            ]
            for month in sorted({*wanted, *caught}):
                if str(month) in archived and month in caught:
                    continue  # rows of an archived month wait in default for a restore
                if str(month) not in archived and create(cursor, table.name, month):
                    made.append(partition_name(table.name, month))
    return made


# -- what is there ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Partition:
    table: str
    name: str
    month: Period | None  # None: the default partition
    rows: int
    bytes: int


_MONTH = re.compile(r"_p(\d{4})_(\d{2})$")


def partitions(table: str | None = None, *, exact: bool = False) -> list[Partition]:
    """The attached partitions, the default last, with their row counts (planner
    estimates unless ``exact``) and sizes on disk, indexes included."""
    if not supported():
        return []
    found: list[Partition] = []
    with connection.cursor() as cursor:
        for one in [BY_NAME[table]] if table else TABLES:
            cursor.execute(
                """SELECT c.relname, c.reltuples::bigint, pg_total_relation_size(c.oid)
                   FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                   WHERE i.inhparent = %s::regclass""",
                [one.name],
            )
            for name, estimate, size in cursor.fetchall():
                match = _MONTH.search(name)
                month = Period(int(match[1]), int(match[2])) if match else None
                rows = estimate
                if exact or rows < 0:
                    cursor.execute(f"SELECT count(*) FROM {_q(name)}")
                    rows = cursor.fetchone()[0]
                found.append(Partition(one.name, name, month, rows, size))
    return sorted(found, key=lambda p: (p.table, p.month is None, p.month or Period(2000, 1)))


def archived_months() -> list[Period]:
    """Months archived and not restored (``common.models.PartitionArchive``)."""
    from common.models import PartitionArchive

    return [
        Period.parse(month)
        for month in PartitionArchive.objects.filter(restored_at__isnull=True)
        .order_by("month")
        .values_list("month", flat=True)
    ]


__all__ = [
    "TABLES",
    "Partition",
    "Table",
    "archived_months",
    "attach",
    "convert",
    "create",
    "default_name",
    "ensure",
    "partition_name",
    "partitions",
    "supported",
]
