"""``manage.py audit_verify``: the standalone ``gpulease-verify`` (verifier/), run from here.
Same options, same output, same exit status."""

import argparse
from typing import Any

from django.core.management.base import BaseCommand

from gpulease_verify import cli


class Command(BaseCommand):
    help = cli.parser().description or ""
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument(
            "arguments", nargs=argparse.REMAINDER, help="as for gpulease-verify --help"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        code = cli.run([*args, *options["arguments"]], out=self.stdout)
        if code:
            raise SystemExit(code)
