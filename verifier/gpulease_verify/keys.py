"""The provider's Ed25519 keys as an auditor reads them: loading a published key, its
fingerprint, and checking a signature over canonical JSON."""

from __future__ import annotations

import base64
import hashlib

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

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
