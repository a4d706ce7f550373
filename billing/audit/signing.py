"""The provider's key: signing a bundle and publishing the public keys (the keys themselves
live in ``billing.audit_keys``)."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from billing import audit_keys
from billing.audit_keys import signing_key
from gpulease_verify.bundle import canonical_bytes
from gpulease_verify.canonical import CANONICAL
from gpulease_verify.keys import ALGORITHM, public_key_info
from leases.models import Lease

from .bundle import build_bundle


def sign_bundle(bundle: dict[str, Any], key: Ed25519PrivateKey | None = None) -> dict[str, Any]:
    """The signed document: the bundle, the Ed25519 signature of its canonical JSON, the
    key's fingerprint (``key_id``) and the public key (an auditor trusts it only once its
    fingerprint is the published one)."""
    key = key or signing_key()
    info = public_key_info(key.public_key())
    return {
        "bundle": bundle,
        "signature": base64.b64encode(key.sign(canonical_bytes(bundle))).decode(),
        "key_id": info["fingerprint"],
        "public_key": info["public_key"],
        "fingerprint": info["fingerprint"],
        "algorithm": ALGORITHM,
        "canonical": CANONICAL,
    }


def signed_bundle(
    *, lease: Lease, period: str, now: datetime | None = None, include_raw: bool = False
) -> dict[str, Any]:
    return sign_bundle(build_bundle(lease=lease, period=period, now=now, include_raw=include_raw))


def published_key_info() -> dict[str, Any]:
    """What GET /api/v1/audit/public-key/ publishes: the current signing key's public half,
    and ``keys``, every current and retired key with its validity (``audit_keys``)."""
    return {**public_key_info(signing_key().public_key()), "keys": audit_keys.published_keys()}
