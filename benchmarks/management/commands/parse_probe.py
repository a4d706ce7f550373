"""`manage.py parse_probe TOOL FILE`: print one probe output parsed, as one JSON object."""

from __future__ import annotations

import json
import sys
from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand

from gpulease_verify.parsers import PARSERS, ParseError, parse, to_dict
from gpulease_verify.parsers.base import one_line


class Command(BaseCommand):
    help = "Parse the saved output of a network probe tool and print it as JSON (bits/s)."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("tool", help=f"one of: {', '.join(PARSERS)}")
        parser.add_argument("file", help="the saved output, or - for standard input")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            text = _read(options["file"])
            result = parse(options["tool"], text)
        except (ParseError, OSError, UnicodeDecodeError) as error:
            # One line, no traceback: callers (probe runners, auditors) read stderr.
            sys.stderr.write(f"parse_probe: {one_line(str(error))}\n")
            sys.stderr.flush()
            sys.exit(1)
        self.stdout.write(json.dumps(to_dict(result)))


def _read(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    return Path(name).read_text(encoding="utf-8")
