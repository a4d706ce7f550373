"""``manage.py partitions``: the monthly partitions of runs, telemetry and traffic samples
on PostgreSQL, and their archives (common.partitions, common.archives).

    partitions [list] [--json]          partitions with rows and bytes, archives made
    partitions ensure [--ahead N]       make this month's and N months ahead
    partitions archive --month YYYY-MM  export a month to an archive file and detach it
    partitions archive --due            every month past PARTITION_RETENTION_MONTHS
    partitions restore FILE             check an archive and re-attach its month
    partitions check FILE               check an archive offline against the provider's keys
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from common import archives, partitions
from common.models import PartitionArchive
from gpulease_verify import archive as offline
from gpulease_verify.periods import Period, PeriodError
from gpulease_verify.report import report
from gpulease_verify.trust import Trust


class Command(BaseCommand):
    help = "List, make ahead, archive, restore and check monthly partitions (PostgreSQL)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "action",
            nargs="?",
            default="list",
            choices=["list", "ensure", "archive", "restore", "check"],
        )
        parser.add_argument("file", nargs="?", help="the archive file (restore, check)")
        parser.add_argument("--month", help="the UTC month to archive, YYYY-MM")
        parser.add_argument("--due", action="store_true", help="archive every month past retention")
        parser.add_argument(
            "--directory", help=f"where archives go (default {settings.ARCHIVE_DIR})"
        )
        parser.add_argument("--ahead", type=int, default=settings.PARTITIONS_AHEAD)
        parser.add_argument("--exact", action="store_true", help="count rows (not estimates)")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        action = options["action"]
        if action == "check":
            return self._check(options)
        if not partitions.supported():
            self.stdout.write("SQLite keeps plain tables: there are no partitions to manage.")
            return
        try:
            if action == "list":
                self._list(options)
            elif action == "ensure":
                made = partitions.ensure(now=timezone.now(), ahead=options["ahead"])
                self._say(
                    options,
                    {"made": made},
                    f"made {len(made)} partition(s): {', '.join(made) or '-'}",
                )
            elif action == "archive":
                self._archive(options)
            elif action == "restore":
                if not options["file"]:
                    raise CommandError("restore needs the archive file")
                record = archives.restore(Path(options["file"]))
                self._say(
                    options,
                    {"month": record.month, "restored_at": str(record.restored_at)},
                    f"restored {record.month} from {options['file']}",
                )
        except (archives.NotArchivable, offline.ArchiveError) as error:
            raise CommandError(str(error)) from None

    def _say(self, options: dict[str, Any], data: Any, text: str) -> None:
        self.stdout.write(json.dumps(data, indent=2) if options["json"] else text)

    def _list(self, options: dict[str, Any]) -> None:
        rows = partitions.partitions(exact=options["exact"])
        archived = list(PartitionArchive.objects.order_by("month"))
        data = {
            "partitions": [
                {
                    "table": p.table,
                    "partition": p.name,
                    "month": str(p.month) if p.month else None,
                    "rows": p.rows,
                    "bytes": p.bytes,
                }
                for p in rows
            ],
            "archives": [
                {
                    "month": a.month,
                    "path": a.path,
                    "sha256": a.sha256,
                    "bytes": a.size_bytes,
                    "rows": a.rows,
                    "archived_at": a.archived_at.isoformat(),
                    "restored_at": a.restored_at.isoformat() if a.restored_at else None,
                }
                for a in archived
            ],
        }
        if options["json"]:
            self.stdout.write(json.dumps(data, indent=2))
            return
        for p in rows:
            self.stdout.write(
                f"{p.name:<40} {p.month or 'default'!s:<8} {p.rows:>12,} rows {p.bytes:>14,} B"
            )
        for a in archived:
            state = f"restored {a.restored_at:%Y-%m-%d}" if a.restored_at else "archived"
            self.stdout.write(f"{a.month} {state}: {a.path} ({a.size_bytes:,} B)")

    def _archive(self, options: dict[str, Any]) -> None:
        directory = Path(options["directory"]) if options["directory"] else None
        if options["due"]:
            months = archives.archive_due(directory=directory)
            self._say(options, {"archived": months}, f"archived {', '.join(months) or 'nothing'}")
            return
        try:
            month = Period.parse(options["month"] or "")
        except PeriodError as error:
            raise CommandError(f"--month: {error}") from None
        record = archives.archive_month(month, directory=directory)
        self._say(
            options,
            {
                "month": record.month,
                "path": record.path,
                "rows": record.rows,
                "seconds": record.seconds,
            },
            f"archived {record.month} to {record.path}: {sum(record.rows.values()):,} rows, "
            f"{record.size_bytes:,} bytes in {record.seconds:.1f} s",
        )

    def _check(self, options: dict[str, Any]) -> None:
        if not options["file"]:
            raise CommandError("check needs the archive file")
        trust = Trust.of({"keys": archives.published_keys()})
        mismatches, notes = offline.check(options["file"], trust)
        printed = io.StringIO()
        failed = report(mismatches, notes, agreed=offline.AGREED, out=printed)
        self.stdout.write(printed.getvalue(), ending="")
        if failed:
            raise CommandError(f"{len(mismatches)} mismatch(es)")
