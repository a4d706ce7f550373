"""The provider's Ed25519 keys as an auditor reads them: loading a published key, its
fingerprint, and checking a signature over canonical JSON."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gpulease_verify.canonical import strict_loads

ALGORITHM = "Ed25519"


def raw_public(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def fingerprint(public: Ed25519PublicKey) -> str:
    return "sha256:" + hashlib.sha256(raw_public(public)).hexdigest()


def public_key_info(public: Ed25519PublicKey) -> dict[str, str]:
    """A public key as GET /api/v1/audit/public-key/ publishes it."""
    pem = public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return {
        "algorithm": ALGORITHM,
        "public_key": base64.b64encode(raw_public(public)).decode(),
        "public_key_pem": pem,
        "fingerprint": fingerprint(public),
    }


def load_public_key(data: bytes | str) -> Ed25519PublicKey:
    """A public key from a PEM text, or the base64 of its 32 raw bytes."""
    text = data.decode() if isinstance(data, bytes) else data
    text = text.strip()
    if text.startswith("-----BEGIN"):
        key = serialization.load_pem_public_key(text.encode())
        if not isinstance(key, Ed25519PublicKey):
            raise ValueError("the PEM key is not an Ed25519 public key")
        return key
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise ValueError("the key is neither PEM nor base64") from None
    if len(raw) != 32:
        raise ValueError(f"an Ed25519 public key has 32 bytes, not {len(raw)}")
    return Ed25519PublicKey.from_public_bytes(raw)


def fingerprint_hex(text: str) -> str:
    """A published fingerprint as 64 lowercase hex digits, with or without ``sha256:``."""
    value = text.strip().lower().removeprefix("sha256:")
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise ValueError(
            f"{text.strip()!r} is not a sha256 fingerprint (64 hex digits, optionally after "
            "'sha256:')"
        )
    return value


@dataclass(frozen=True)
class TrustedKey:
    """A public key the auditor trusts, with its validity when the provider published one
    (``not_before``/``not_after`` as ISO UTC text; None: unknown or open)."""

    public: Ed25519PublicKey
    not_before: str | None = None
    not_after: str | None = None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.public)

    def validity_problem(self, at: str | None, what: str) -> str | None:
        """Why ``at`` (ISO UTC) lies outside this key's validity, or None."""
        if at is None or (self.not_before is None and self.not_after is None):
            return None
        when = _instant(at)
        if self.not_before is not None and when < _instant(self.not_before):
            return (
                f"{what} at {at}, before key {self.fingerprint} was in use (from {self.not_before})"
            )
        if self.not_after is not None and when >= _instant(self.not_after):
            return (
                f"{what} at {at}, after key {self.fingerprint} was retired ({self.not_after}): "
                "a retired key must sign nothing new"
            )
        return None


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def trusted_keys(data: bytes | str | Mapping[str, Any]) -> list[TrustedKey]:
    """The keys in a ``--public-key`` file: a PEM, the base64 of the raw key, or the JSON of
    GET /api/v1/audit/public-key/ (its ``keys`` list with validity, else its one key)."""
    if isinstance(data, Mapping):
        published: Any = data
    else:
        text = data.decode() if isinstance(data, bytes) else data
        if not text.strip().startswith("{"):
            return [TrustedKey(load_public_key(text))]
        published = strict_loads(text)
    if not isinstance(published, Mapping):
        raise ValueError("the key file's JSON is not an object")
    entries = published.get("keys") or [published]
    keys = []
    for entry in entries:
        if not isinstance(entry, Mapping) or "public_key" not in entry:
            raise ValueError("a key in the key file's JSON has no public_key")
        key = TrustedKey(
            load_public_key(entry["public_key"]), entry.get("not_before"), entry.get("not_after")
        )
        stated = entry.get("fingerprint")
        if stated and fingerprint_hex(stated) != fingerprint_hex(key.fingerprint):
            raise ValueError(
                f"the key file lists fingerprint {stated} for a key whose fingerprint is "
                f"{key.fingerprint}"
            )
        keys.append(key)
    return keys
