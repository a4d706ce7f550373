"""Retention that keeps audits verifiable (issue 16): a UTC month of the partitioned tables
(``common.partitions``) leaves the database as one archive file and can come back.

An archive is a tar file, ``gpulease-archive-2025-10.tar``, holding ``manifest.json`` and,
for each partitioned table and the rows that belong to its rows (runs' nodes), the
month's rows as PostgreSQL CSV compressed with zstd. The manifest names every file with its
row count and SHA-256, and carries what an auditor anchors the month to: the chain links of
the month that stay in the database (telemetry batches, rejudgements) and the signed chain
checkpoints of the leases in it. ``gpulease-verify-archive`` checks all of that with no
database (``gpulease_verify.archive``).

Archiving writes the file, reads it back against the database, records it
(``PartitionArchive``) and only then detaches and drops the month's partitions, in one
transaction. Nothing is deleted without its archive on disk and its row. An audit bundle of
an archived period is built from the archive: ``readable`` loads the months it needs into
partitions inside a transaction that is rolled back afterwards."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import os
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import zstandard
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from common import partitions
from common.locks import locking
from common.models import PartitionArchive
from common.progress import counter
from gpulease_verify.archive import FORMAT, ArchiveError, read_manifest
from gpulease_verify.periods import Period
from gpulease_verify.traffic import READING_REACH

log = logging.getLogger(__name__)

UTC = partitions.UTC
CHUNK = 1 << 20


class NotArchivable(Exception):
    """A month that cannot be archived or restored now, with the reason."""


def file_name(month: Period) -> str:
    return f"gpulease-archive-{month}.tar"


def _q(name: str) -> str:
    return connection.ops.quote_name(name)


# -- what the apps add -----------------------------------------------------------------------
# common knows the partitioned tables by name only (common.partitions). What a month's
# manifest names beyond its rows, and the keys an archive is checked against, belong to the
# apps that own them: each registers here from its AppConfig.ready() (leases.apps: the
# leases' references and terms versions; billing.apps: the chain checkpoints and the
# provider's published keys).


@dataclass(frozen=True)
class ArchivedMonth:
    """What a manifest part reads: the month, a cursor in the archiving transaction (the
    month's rows are still there), the month's runs partition (quoted) and the ids of the
    leases with runs or traffic samples in the month."""

    month: Period
    cursor: Any
    runs: str
    lease_ids: list[int]


ManifestPart = Callable[[ArchivedMonth], dict[str, Any]]
_manifest_parts: list[ManifestPart] = []
_published_keys: list[Callable[[], list[dict[str, Any]]]] = []


def add_manifest_part(part: ManifestPart) -> None:
    """Add ``part``'s keys to every manifest (once, however often an app is made ready)."""
    if part not in _manifest_parts:
        _manifest_parts.append(part)


def set_published_keys(source: Callable[[], list[dict[str, Any]]]) -> None:
    """Where ``published_keys`` reads the provider's keys from."""
    _published_keys[:] = [source]


def published_keys() -> list[dict[str, Any]]:
    """The provider's published audit keys, as its key endpoint lists them: what
    ``partitions check`` trusts an archive's checkpoints to be signed with."""
    if not _published_keys:
        raise RuntimeError("no app registered the provider's published keys (billing.apps)")
    return _published_keys[0]()


# -- export ----------------------------------------------------------------------------------


def _export(cursor, query: str, target: Path) -> dict[str, Any]:
    """COPY ``query`` as CSV with a header into ``target``, zstd-compressed; its rows and
    the SHA-256 of the CSV and of the compressed file."""
    plain = hashlib.sha256()
    with open(target, "wb") as out:
        writer = zstandard.ZstdCompressor(level=10).stream_writer(out, closefd=False)
        with cursor.copy(f"COPY ({query}) TO STDOUT WITH (FORMAT csv, HEADER true)") as copy:
            for chunk in copy:
                data = bytes(chunk)
                plain.update(data)
                writer.write(data)
        rows = cursor.rowcount
        writer.flush(zstandard.FLUSH_FRAME)
        writer.close()
    with open(target, "rb") as done:
        packed = hashlib.file_digest(done, "sha256").hexdigest()
    return {"rows": rows, "sha256": plain.hexdigest(), "file_sha256": packed}


def _links(cursor, lo: datetime, hi: datetime, lease_ids: list[int]) -> list[dict[str, Any]]:
    """Every chain link of these leases from the first to the last run link of the month
    that is not a run (telemetry batches, rejudgements): they stay in the database, and the
    archive carries their hashes so the month's links can be checked end to end."""
    if not lease_ids:
        return []
    cursor.execute(
        """WITH span AS (
               SELECT lease_id, min(chain_index) AS lo, max(chain_index) AS hi
               FROM benchmarks_proberun
               WHERE slot_at >= %s AND slot_at < %s AND chain_index IS NOT NULL
               GROUP BY lease_id)
           SELECT 'telemetry', b.lease_id, b.chain_index, b.prev_hash, b.link_hash
           FROM telemetry_telemetrybatch b JOIN span s ON s.lease_id = b.lease_id
           WHERE b.chain_index BETWEEN s.lo AND s.hi
           UNION ALL
           SELECT 'rejudgement', r.lease_id, r.chain_index, r.prev_hash, r.link_hash
           FROM benchmarks_rejudgement r JOIN span s ON s.lease_id = r.lease_id
           WHERE r.chain_index BETWEEN s.lo AND s.hi
           ORDER BY 2, 3""",
        [lo, hi],
    )
    return [
        {"kind": kind, "lease_id": lease, "index": index, "prev": prev, "hash": digest}
        for kind, lease, index, prev, digest in cursor.fetchall()
    ]


def _exports(month: Period) -> list[tuple[str, str, str]]:
    """(member file, table, query) of everything a month's archive holds."""
    found: list[tuple[str, str, str]] = []
    for table in partitions.TABLES:
        part = partitions.partition_name(table.name, month)
        found.append((f"{table.name}.csv.zst", table.name, f"SELECT * FROM {_q(part)}"))
        for companion, column in table.companions:
            query = (
                f"SELECT c.* FROM {_q(companion)} c WHERE c.{_q(column)} IN "
                f"(SELECT id FROM {_q(part)})"
            )
            found.append((f"{companion}.csv.zst", companion, query))
        for shared, key, columns in table.shared:
            named = " UNION ".join(f"SELECT {_q(c)} FROM {_q(part)}" for c in columns)
            query = f"SELECT s.* FROM {_q(shared)} s WHERE s.{_q(key)} IN ({named})"
            found.append((f"{shared}.csv.zst", shared, query))
    return found


def archive_month(
    month: Period, *, directory: Path | None = None, now: datetime | None = None
) -> PartitionArchive:
    """Export ``month`` (UTC) of every partitioned table to an archive file, check it,
    record it, then detach and drop the month's partitions."""
    if not partitions.supported():
        raise NotArchivable("archiving needs PostgreSQL's partitions; SQLite keeps every row")
    now = now or timezone.now()
    directory = Path(directory or settings.ARCHIVE_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    if month >= Period.containing(now, UTC):
        raise NotArchivable(f"{month} is not over yet (UTC)")
    if PartitionArchive.objects.filter(month=str(month), restored_at__isnull=True).exists():
        raise NotArchivable(f"{month} is archived already")
    lo, hi = month.bounds(UTC)
    started = time.perf_counter()
    target = directory / file_name(month)
    with transaction.atomic(), connection.cursor() as cursor, _without_statement_timeout(cursor):
        # Writers of the month wait until it is gone; readers go on until the detach.
        for table in partitions.TABLES:
            partitions.create(cursor, table.name, month)  # a table with none of the month
            part = partitions.partition_name(table.name, month)
            cursor.execute(f"LOCK TABLE {_q(part)} IN SHARE MODE")
        members: dict[str, dict[str, Any]] = {}
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            exports = _exports(month)
            with counter(desc=f"archive {month}", unit="table", total=len(exports)) as bar:
                for member, table_name, query in exports:
                    members[member] = {
                        "table": table_name,
                        **_export(cursor, query, Path(scratch) / member),
                    }
                    bar.update(1)
            runs, traffic = (
                _q(partitions.partition_name(name, month))
                for name in ("benchmarks_proberun", "billing_trafficsample")
            )
            cursor.execute(
                f"SELECT lease_id FROM {runs} UNION SELECT lease_id FROM {traffic} ORDER BY 1"
            )
            lease_ids = [row[0] for row in cursor.fetchall()]
            manifest = {
                "format": FORMAT,
                "month": str(month),
                "start": lo.isoformat().replace("+00:00", "Z"),
                "end": hi.isoformat().replace("+00:00", "Z"),
                "created_at": now.isoformat().replace("+00:00", "Z"),
                "partitioned_by": {t.name: t.column for t in partitions.TABLES},
                "files": members,
                "leases": lease_ids,
                "links_kept": _links(cursor, lo, hi, lease_ids),
            }
            archived = ArchivedMonth(month=month, cursor=cursor, runs=runs, lease_ids=lease_ids)
            for add in _manifest_parts:
                manifest.update(add(archived))
            part_file = target.with_suffix(".tar.part")
            with tarfile.open(part_file, "w") as tar:
                _add_bytes(tar, "manifest.json", json.dumps(manifest, indent=1).encode())
                for member in members:
                    tar.add(Path(scratch) / member, arcname=member)
            with open(part_file, "rb") as written:
                os.fsync(written.fileno())
            os.replace(part_file, target)
        read_back = read_manifest(target)  # every member's count and hash, or ArchiveError
        for member, info in members.items():
            if read_back["files"][member]["rows"] != info["rows"]:
                raise ArchiveError(f"{target}: {member} reads back a different row count")
        with open(target, "rb") as done:
            digest = hashlib.file_digest(done, "sha256").hexdigest()
        for table in partitions.TABLES:
            part = partitions.partition_name(table.name, month)
            for companion, column in table.companions:
                cursor.execute(
                    f"DELETE FROM {_q(companion)} WHERE {_q(column)} IN (SELECT id FROM {_q(part)})"
                )
            cursor.execute(f"ALTER TABLE {_q(table.name)} DETACH PARTITION {_q(part)}")
            cursor.execute(f"DROP TABLE {_q(part)}")
        record = PartitionArchive.objects.create(
            month=str(month),
            path=str(target),
            sha256=digest,
            size_bytes=target.stat().st_size,
            rows={m["table"]: m["rows"] for m in members.values()},
            archived_at=now,
            seconds=round(time.perf_counter() - started, 3),
        )
    log.info(
        "archived %s to %s: %s rows, %s bytes, %.1f s",
        month,
        target,
        sum(record.rows.values()),
        record.size_bytes,
        record.seconds,
    )
    return record


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def due(*, now: datetime, retention_months: int | None = None) -> list[Period]:
    """Months whose partitions are older than the retention: their last instant lies more
    than ``retention_months`` whole months before this UTC month."""
    keep = settings.PARTITION_RETENTION_MONTHS if retention_months is None else retention_months
    oldest_kept = Period.containing(now, UTC).shift(-keep)
    return sorted(
        {p.month for p in partitions.partitions() if p.month is not None and p.month < oldest_kept}
    )


def archive_due(*, now: datetime | None = None, directory: Path | None = None) -> list[str]:
    """For beat, daily: archive every month past the retention. The months archived."""
    now = now or timezone.now()
    done: list[str] = []
    for month in due(now=now):
        archive_month(month, directory=directory, now=now)
        done.append(str(month))
    return done


# -- restore ---------------------------------------------------------------------------------


def _load(cursor, tar: tarfile.TarFile, member: str, table: str) -> int:
    stream = tar.extractfile(member)
    if stream is None:
        raise ArchiveError(f"{member} is not a file in the archive")
    reader = zstandard.ZstdDecompressor().stream_reader(stream, closefd=False)
    header = io.TextIOWrapper(reader, encoding="utf-8", newline="").readline()
    columns = next(csv.reader([header]))
    stream.seek(0)
    reader = zstandard.ZstdDecompressor().stream_reader(stream)
    names = ", ".join(_q(c) for c in columns)
    with cursor.copy(
        f"COPY {_q(table)} ({names}) FROM STDIN WITH (FORMAT csv, HEADER true)"
    ) as copy:
        while data := reader.read(CHUNK):
            copy.write(data)
    return cursor.rowcount


@contextmanager
def _without_statement_timeout(cursor) -> Iterator[None]:
    """A month's COPY is long by nature: DB_STATEMENT_TIMEOUT_S, a bound for requests, is
    lifted inside the block and put back after it (an error rolls the lift back with the
    transaction or savepoint it was made in)."""
    cursor.execute("SHOW statement_timeout")
    (before,) = cursor.fetchone()
    cursor.execute("SET LOCAL statement_timeout = 0")
    yield
    cursor.execute("SELECT set_config('statement_timeout', %s, true)", [before])


def _attach_from(path: Path, *, show_progress: bool = False) -> dict[str, Any]:
    """Load the archive's month back into partitions and attach them, in the caller's
    transaction (with a bar of the files loaded on a terminal, for ``restore``). Its
    manifest."""
    manifest = read_manifest(path)
    month = Period.parse(manifest["month"])
    by_table = {info["table"]: member for member, info in manifest["files"].items()}
    with (
        connection.cursor() as cursor,
        _without_statement_timeout(cursor),
        tarfile.open(path, "r") as tar,
        counter(
            desc=f"restore {month}", unit="file", total=len(by_table), quiet=not show_progress
        ) as bar,
    ):

        def load(member: str, target: str) -> None:
            _load(cursor, tar, member, target)
            bar.update(1)

        for table in partitions.TABLES:
            part = partitions.partition_name(table.name, month)
            cursor.execute("SELECT to_regclass(%s)", [part])
            if cursor.fetchone()[0] is not None:
                raise NotArchivable(f"{part} is attached already: {month} is not archived")
            partitions.fill(cursor, table.name, month, partial(load, by_table[table.name]))
            for companion, _column in table.companions:
                load(by_table[companion], companion)
            for shared, _key, _columns in table.shared:
                cursor.execute(
                    f"CREATE TEMPORARY TABLE archived_shared (LIKE {_q(shared)}) ON COMMIT DROP"
                )
                load(by_table[shared], "archived_shared")
                cursor.execute(
                    f"INSERT INTO {_q(shared)} SELECT * FROM archived_shared ON CONFLICT DO NOTHING"
                )
                cursor.execute("DROP TABLE archived_shared")
    return manifest


def restore(path: Path, *, now: datetime | None = None) -> PartitionArchive:
    """Re-attach an archived month from its file, checked first. Stamps its record
    ``restored_at`` (or records a file from elsewhere as archived and restored)."""
    if not partitions.supported():
        raise NotArchivable("restoring needs PostgreSQL's partitions")
    now = now or timezone.now()
    path = Path(path)
    with transaction.atomic():
        manifest = _attach_from(path, show_progress=True)
        with open(path, "rb") as done:
            digest = hashlib.file_digest(done, "sha256").hexdigest()
        record = (
            locking(PartitionArchive.objects)
            .filter(month=manifest["month"], restored_at__isnull=True)
            .first()
        )
        if record is None:
            record = PartitionArchive(
                month=manifest["month"],
                path=str(path),
                sha256=digest,
                size_bytes=path.stat().st_size,
                rows={m["table"]: m["rows"] for m in manifest["files"].values()},
                archived_at=now,
            )
        record.restored_at = now
        record.save()
    log.info("restored %s from %s", manifest["month"], path)
    return record


@contextmanager
def readable(
    start: datetime, end: datetime, *, margin: timedelta = READING_REACH
) -> Iterator[list[str]]:
    """Within the block, the archived months that ``[start - margin, end + margin)``
    touches are back in the tables, from their files; afterwards they are gone again (the
    block runs in a transaction rolled back at its end, so it must not write). Yields the
    months it loaded. The default margin is how far a node's counter reading can lie
    outside a period and close one of its intervals without a metering gap
    (``READING_REACH``); the audit bundle widens it over the gaps that reach over the
    period's edges (``billing.metering_gaps.reach``)."""
    wanted = set(
        Period.span(
            Period.containing(start - margin, UTC),
            Period.containing(end + margin - timedelta(microseconds=1), UTC),
        )
    )
    if not partitions.supported():
        yield []
        return
    records = [
        row
        for row in PartitionArchive.objects.filter(restored_at__isnull=True).order_by("month")
        if Period.parse(row.month) in wanted
    ]
    if not records:
        yield []
        return
    with transaction.atomic():
        for row in records:
            _attach_from(Path(row.path))
        yield [row.month for row in records]
        transaction.set_rollback(True)


__all__ = [
    "ArchivedMonth",
    "NotArchivable",
    "add_manifest_part",
    "archive_due",
    "archive_month",
    "due",
    "file_name",
    "published_keys",
    "readable",
    "restore",
    "set_published_keys",
]
