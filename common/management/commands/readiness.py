"""The /readyz checks from the command line, for healthchecks of processes that serve no
HTTP (beat): prints the same JSON and exits 1 when a check fails."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from config.health import CHECKS, readiness


class Command(BaseCommand):
    help = "Run the readiness checks of /readyz (all, or those named) and print them as JSON."

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
