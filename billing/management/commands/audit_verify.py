"""Check a signed contract audit bundle from the bundle alone (no database)."""

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from billing.audit import verify_report


class Command(BaseCommand):
    help = (
        "Verify a contract audit bundle: its Ed25519 signature, the probe runs' hash chain, "
        "then compliance, the SLA credit and the invoice lines recomputed from the bundle "
        "alone. Prints every mismatch; exits 0 only when everything agrees."
    )
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("bundle", help="the JSON document from /api/v1/leases/{id}/audit/")
        parser.add_argument(
            "--public-key",
            help="the provider's published key (PEM, or base64 of the 32 raw bytes); "
            "default: the key the bundle names",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            doc = json.loads(Path(options["bundle"]).read_text(encoding="utf-8"))
        except OSError as error:
            raise CommandError(f"cannot read {options['bundle']}: {error.strerror}") from None
        except ValueError as error:
            raise CommandError(f"{options['bundle']} is not JSON: {error}") from None
        key = None
        if options["public_key"]:
            try:
                key = Path(options["public_key"]).read_text(encoding="utf-8")
            except OSError as error:
                raise CommandError(
                    f"cannot read {options['public_key']}: {error.strerror}"
                ) from None
        if not isinstance(doc, dict):
            raise CommandError("the bundle must be a JSON object")
        mismatches, notes = verify_report(doc, key)
        for note in notes:
            self.stdout.write(f"ok: {note}")
        for mismatch in mismatches:
            self.stdout.write(f"MISMATCH: {mismatch}")
        if mismatches:
            self.stderr.write(f"{len(mismatches)} mismatch(es)")
            raise SystemExit(1)
        self.stdout.write("all figures agree")
