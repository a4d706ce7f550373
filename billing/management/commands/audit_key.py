"""Print the provider's audit signing public key (creating the key on first use)."""

import json
from typing import Any

from django.core.management.base import BaseCommand

from billing.audit import key_path, published_key_info


class Command(BaseCommand):
    help = "Print the public key that signs contract audit bundles (PEM, or --json)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--json", action="store_true", help="one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        info = published_key_info()
        if options["json"]:
            self.stdout.write(json.dumps({**info, "path": str(key_path())}, indent=2))
            return
        self.stdout.write(info["public_key_pem"].rstrip())
        self.stdout.write(f"fingerprint: {info['fingerprint']}")
