"""``gpulease-verify BUNDLE``: check a signed contract-audit bundle with nothing but the
bundle and the provider's published key. Prints every check and every mismatch; exits 0
only when all agree, 1 on a mismatch, 2 when the input cannot be read."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from gpulease_verify.bundle import verify_report


class InputError(Exception):
    """A file that cannot be read or is not a bundle: exit status 2."""


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path} is not UTF-8 text") from None


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="gpulease-verify",
        description=(
            "Verify a gpulease contract-audit bundle: its Ed25519 signature, the hash chain, "
            "every verdict, compliance, the SLA credit and every invoice line, recomputed from "
            "the bundle alone. Exit status 0 only when everything agrees."
        ),
    )
    command.add_argument("bundle", help="the JSON document from /api/v1/leases/{id}/audit/")
    command.add_argument(
        "--public-key",
        metavar="FILE",
        help="the provider's published key (PEM, or base64 of the 32 raw bytes)",
    )
    return command


def run(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    options = parser().parse_args(argv)
    try:
        doc = json.loads(_read(options.bundle))
        key = _read(options.public_key) if options.public_key else None
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"error: {options.bundle} is not JSON: {error}", file=sys.stderr)
        return 2
    if not isinstance(doc, dict):
        print("error: the bundle must be a JSON object", file=sys.stderr)
        return 2
    mismatches, notes = verify_report(doc, key)
    for note in notes:
        print(f"ok: {note}", file=out)
    for mismatch in mismatches:
        print(f"MISMATCH: {mismatch}", file=out)
    if mismatches:
        print(f"{len(mismatches)} mismatch(es)", file=sys.stderr)
        return 1
    print("all figures agree", file=out)
    return 0


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
