"""``gpulease-verify BUNDLE``: check a signed contract-audit bundle with nothing but the
bundle and the provider's published key. Prints every check and every mismatch; exits 0
only when all agree, 1 on a mismatch, 2 when the input cannot be read or no key is trusted
(``--public-key``, ``--fingerprint`` or, with a warning, ``--trust-embedded-key``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from gpulease_verify.bundle import verify_report
from gpulease_verify.canonical import StrictJSONError, strict_loads
from gpulease_verify.report import report
from gpulease_verify.trust import Trust


class Writer(Protocol):
    """Where the report goes: a text stream, or Django's OutputWrapper."""

    def write(self, text: str, /) -> Any: ...


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
        help=(
            "the provider's published key: PEM, base64 of the 32 raw bytes, or the JSON of "
            "GET /api/v1/audit/public-key/ (every current and retired key with its validity)"
        ),
    )
    command.add_argument(
        "--fingerprint",
        metavar="HEX",
        help=(
            "the provider's published key fingerprint (sha256, with or without 'sha256:'): "
            "the key inside the bundle is used only if it has this fingerprint"
        ),
    )
    command.add_argument(
        "--trust-embedded-key",
        action="store_true",
        help="check the signature with the key inside the bundle, whoever it is (warns)",
    )
    command.add_argument(
        "--previous",
        metavar="FILE",
        help=(
            "an earlier checkpoint or signed bundle of the lease you kept: its head must "
            "still be in this bundle's chain with the same hash"
        ),
    )
    return command


def _load(path: str, what: str) -> dict:  # type: ignore[type-arg]
    try:
        doc = strict_loads(_read(path), f"{what} file {path}")
    except StrictJSONError as error:
        raise InputError(str(error)) from None
    if not isinstance(doc, dict):
        raise InputError(f"{what} file {path} must hold a JSON object")
    return doc


def run(argv: Sequence[str] | None = None, out: Writer | None = None) -> int:
    out = out or sys.stdout
    options = parser().parse_args(argv)
    try:
        doc = _load(options.bundle, "the bundle")
        key = _read(options.public_key) if options.public_key else None
        previous = _load(options.previous, "the earlier file") if options.previous else None
        Trust.of(
            key, fingerprint=options.fingerprint, trust_embedded_key=options.trust_embedded_key
        )
    except (InputError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    mismatches, notes = verify_report(
        doc,
        key,
        fingerprint=options.fingerprint,
        trust_embedded_key=options.trust_embedded_key,
        previous=previous,
    )
    return report(mismatches, notes, agreed="all figures agree", out=out)


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
