"""The provider's Ed25519 audit keys: the current one, and the public halves of retired
ones with their validity.

The current private key is a PKCS#8 PEM at ``key_path()`` (``AUDIT_SIGNING_KEY``, default
``VAR_DIR/audit/ed25519.pem``), created on first use. Next to it, ``audit-keys.json``
lists every key the provider has signed with: fingerprint, public PEM, ``not_before`` and
``not_after`` (ISO UTC; null: open). ``rotate`` makes a new current key valid from now and
retires the old one with ``not_after`` = now; a retired private key is overwritten, only its
public half stays, so it can sign nothing new. The first key's ``not_before`` is null: it
has been in use since the beginning."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings
from django.utils import timezone

from gpulease_verify.canonical import iso_utc
from gpulease_verify.keys import load_public_key, public_key_info

REGISTRY = "audit-keys.json"


def key_path() -> Path:
    configured = getattr(settings, "AUDIT_SIGNING_KEY", "")
    return Path(configured) if configured else Path(settings.VAR_DIR) / "audit" / "ed25519.pem"


def registry_path() -> Path:
    return key_path().parent / REGISTRY


def _pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write_private(path: Path, pem: bytes, *, replace: bool) -> None:
    """0600 from the first byte. Without ``replace``, O_EXCL: of two workers starting
    together, one key wins. With it, a temporary file renamed over the old key."""
    if not replace:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
        return
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".key-")
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    os.replace(temporary, path)


def create_key(path: Path) -> bool:
    """A new key at ``path`` unless one is there; True when this made it. Needs no settings:
    ``python -m config.keys create`` provisions production with it."""
    if path.exists():
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, _pem(Ed25519PrivateKey.generate()), replace=False)
    return True


def signing_key() -> Ed25519PrivateKey:
    """The current key, created on first use (only ever outside production: with DEBUG off
    the settings refuse to load without it)."""
    path = key_path()
    create_key(path)
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path} does not hold an Ed25519 private key")
    return key


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    lock = key_path().parent / f".{REGISTRY}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read_registry() -> list[dict[str, Any]]:
    path = registry_path()
    if not path.exists():
        return []
    return list(json.loads(path.read_text())["keys"])


def _write_registry(entries: list[dict[str, Any]]) -> None:
    path = registry_path()
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".keys-")
    with os.fdopen(fd, "w") as handle:
        json.dump({"keys": entries}, handle, indent=2)
    os.replace(temporary, path)


def _entry(key: Ed25519PrivateKey, not_before: datetime | None) -> dict[str, Any]:
    info = public_key_info(key.public_key())
    return {
        "fingerprint": info["fingerprint"],
        "public_key_pem": info["public_key_pem"],
        "not_before": iso_utc(not_before),
        "not_after": None,
    }


def _registered(current: Ed25519PrivateKey) -> list[dict[str, Any]]:
    """The registry, with the current key in it (a key from before rotation existed, or
    one just created, is added with an open start)."""
    entries = _read_registry()
    fingerprint = public_key_info(current.public_key())["fingerprint"]
    if not any(entry["fingerprint"] == fingerprint for entry in entries):
        entries.append(_entry(current, None))
        _write_registry(entries)
    return entries


def published_keys() -> list[dict[str, Any]]:
    """Every key, oldest first, as the public-key endpoint lists them."""
    current = signing_key()
    with _locked():
        entries = _registered(current)
    fingerprint = public_key_info(current.public_key())["fingerprint"]
    return [
        {
            **public_key_info(load_public_key(entry["public_key_pem"])),
            "not_before": entry["not_before"],
            "not_after": entry["not_after"],
            "current": entry["fingerprint"] == fingerprint,
        }
        for entry in entries
    ]


def rotate(*, now: datetime | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A new current key valid from ``now``; the old one retired at ``now``. Returns the
    (retired, new) entries as published."""
    now = now or timezone.now()
    old = signing_key()
    new = Ed25519PrivateKey.generate()
    with _locked():
        entries = _registered(old)
        retired_fp = public_key_info(old.public_key())["fingerprint"]
        for entry in entries:
            if entry["fingerprint"] == retired_fp:
                entry["not_after"] = iso_utc(now)
        entries.append(_entry(new, now))
        _write_registry(entries)
        _write_private(key_path(), _pem(new), replace=True)
    keys = {entry["fingerprint"]: entry for entry in published_keys()}
    return keys[retired_fp], keys[public_key_info(new.public_key())["fingerprint"]]
