"""The readiness checks from the command line, for healthchecks of processes that serve no
HTTP: prints the JSON /readyz would and exits 1 when a check fails. Without --check, the
web's checks (database, cache, broker); beat's healthcheck is ``--check beat``, the age of
the file beat's own scheduler touches (config.beat_scheduler), with no database query."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from common.health import CHECKS, readiness


class Command(BaseCommand):
    help = "Run the readiness checks (those of /readyz, or those named) and print them as JSON."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "--check", action="append", choices=list(CHECKS), help="only this check (repeatable)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ready, checks = readiness(options["check"])
        self.stdout.write(
            json.dumps({"status": "ok" if ready else "unavailable", "checks": checks})
        )
        if not ready:
            raise CommandError("not ready", returncode=1)
