"""Print the provider's audit signing public key (creating the key on first use), or
rotate it: ``--rotate`` makes a new current key and retires the old one from now."""

import json
from typing import Any

from django.core.management.base import BaseCommand

from billing import audit_keys
from billing.audit import key_path, published_key_info


class Command(BaseCommand):
    help = (
        "Print the public key that signs contract audit bundles (PEM, or --json with every "
        "current and retired key), or --rotate it."
    )

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--json", action="store_true", help="one JSON object")
        parser.add_argument(
            "--rotate",
            action="store_true",
            help="make a new current key and retire the old one (not_after = now)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["rotate"]:
            retired, new = audit_keys.rotate()
            self.stdout.write(
                f"retired: {retired['fingerprint']} (not_after {retired['not_after']})"
            )
            self.stdout.write(f"current: {new['fingerprint']} (not_before {new['not_before']})")
            return
        info = published_key_info()
        if options["json"]:
            self.stdout.write(json.dumps({**info, "path": str(key_path())}, indent=2))
            return
        self.stdout.write(info["public_key_pem"].rstrip())
        self.stdout.write(f"fingerprint: {info['fingerprint']}")
