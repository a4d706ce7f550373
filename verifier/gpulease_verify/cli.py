"""``gpulease-verify BUNDLE``: check a signed contract-audit bundle with nothing but the
bundle and the provider's published key. Prints every check and every mismatch; exits 0
only when all agree, 1 on a mismatch, 2 when the input cannot be read or no key is trusted
(``--public-key``, ``--fingerprint`` or, with a warning, ``--trust-embedded-key``).

``gpulease-verify keygen`` and ``gpulease-verify sign`` are the tenant's side of
co-signed records (``gpulease_verify.cosign``): make a key pair, sign a content."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from gpulease_verify import cosign
from gpulease_verify.bundle import verify_report
from gpulease_verify.canonical import StrictJSONError, strict_loads
from gpulease_verify.keys import fingerprint
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
    command.add_argument(
        "--tenant-keys",
        metavar="FILE",
        help=(
            "the public keys your tenant registered (PEM blocks or base64 lines): every "
            "co-signed record must be signed by one of them, and each must be in the bundle"
        ),
    )
    return command


def signing_parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="gpulease-verify", description="The tenant's signing key and signatures."
    )
    sub = command.add_subparsers(dest="action", required=True)
    keygen = sub.add_parser(
        "keygen", help="make an Ed25519 key pair: the private key to a file, the public printed"
    )
    keygen.add_argument("--out", metavar="FILE", required=True, help="private key PEM to write")
    sign = sub.add_parser(
        "sign", help="print the base64 Ed25519 signature of a content's canonical JSON"
    )
    sign.add_argument("--key", metavar="FILE", required=True, help="your private key PEM")
    sign.add_argument("content", help="the content JSON to sign (as the portal or API shows it)")
    return command


def _keygen(path: str, out: Writer) -> int:
    private = cosign.generate()
    target = Path(path)
    try:
        with target.open("xb") as handle:  # never overwrite a key
            target.chmod(0o600)
            handle.write(cosign.private_pem(private))
    except FileExistsError:
        raise InputError(f"{path} exists: choose another file") from None
    except OSError as error:
        raise InputError(f"cannot write {path}: {error.strerror}") from None
    public = private.public_key()
    out.write(f"{cosign.public_key_text(public)}\n")
    print(f"fingerprint {fingerprint(public)}; private key in {path}", file=sys.stderr)
    return 0


def _sign(key_path: str, content_path: str, out: Writer) -> int:
    try:
        private = cosign.load_private_key(Path(key_path).read_bytes())
    except OSError as error:
        raise InputError(f"cannot read {key_path}: {error.strerror}") from None
    except (ValueError, TypeError) as error:
        raise InputError(f"{key_path}: {error}") from None
    content = _load(content_path, "the content")
    out.write(f"{cosign.sign(private, content)}\n")
    return 0


def run_signing(argv: Sequence[str], out: Writer) -> int:
    options = signing_parser().parse_args(argv)
    try:
        if options.action == "keygen":
            return _keygen(options.out, out)
        return _sign(options.key, options.content, out)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


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
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments and arguments[0] in ("keygen", "sign"):
        return run_signing(arguments, out)
    options = parser().parse_args(arguments)
    try:
        doc = _load(options.bundle, "the bundle")
        published = (
            cosign.published_keys(_read(options.tenant_keys)) if options.tenant_keys else None
        )
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
        tenant_keys=published,
    )
    return report(mismatches, notes, agreed="all figures agree", out=out)


def main() -> None:
    sys.exit(run())


if __name__ == "__main__":
    main()
