"""Which keys an auditor trusts, and checking a signed document (a bundle or a chain
checkpoint) with them.

A signed document carries its signature, the key's fingerprint (``key_id``) and the public
key itself. The key inside is only a convenience: it is used when the auditor gave its
fingerprint (``--fingerprint``) and it matches, or when the auditor explicitly trusts it
(``--trust-embedded-key``, which warns). Given the provider's keys (``--public-key``: a PEM,
base64, or the public-key endpoint's JSON with every current and retired key and its
validity), the document is checked with the key it names, and the time it was signed must
lie within that key's validity."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from gpulease_verify.keys import (
    ALGORITHM,
    TrustedKey,
    fingerprint,
    fingerprint_hex,
    load_public_key,
    trusted_keys,
)

NO_KEY = (
    "no trusted key: pass the provider's published key with --public-key FILE (PEM, or the "
    "JSON of GET /api/v1/audit/public-key/) or its fingerprint with --fingerprint HEX; "
    "--trust-embedded-key trusts whatever key the file carries"
)
EMBEDDED_WARNING = (
    "WARNING: the signature was checked with the key inside the file, which proves nothing "
    "about who signed it; compare {fingerprint} with the provider's published fingerprint"
)


class NoTrustedKey(ValueError):
    """Neither a key, nor a fingerprint, nor trust in the embedded key was given."""

    def __init__(self) -> None:
        super().__init__(NO_KEY)


@dataclass
class Trust:
    keys: list[TrustedKey] = field(default_factory=list)
    fingerprint: str | None = None  # 64 lowercase hex digits
    embedded: bool = False

    @classmethod
    def of(
        cls,
        public_key: bytes | str | Mapping[str, Any] | Ed25519PublicKey | None = None,
        *,
        fingerprint: str | None = None,
        trust_embedded_key: bool = False,
    ) -> Trust:
        """Raises ``NoTrustedKey`` when nothing is trusted, ``ValueError`` for a key or a
        fingerprint that cannot be read."""
        if public_key is None and fingerprint is None and not trust_embedded_key:
            raise NoTrustedKey
        keys: list[TrustedKey] = []
        if isinstance(public_key, Ed25519PublicKey):
            keys = [TrustedKey(public_key)]
        elif public_key is not None:
            keys = trusted_keys(public_key)
        return cls(
            keys=keys,
            fingerprint=fingerprint_hex(fingerprint) if fingerprint is not None else None,
            embedded=trust_embedded_key and not keys and fingerprint is None,
        )

    def check(
        self, doc: Mapping[str, Any], signed: bytes, *, what: str, at: str | None
    ) -> tuple[list[str], list[str]]:
        """(mismatches, notes) of the signature of ``doc`` over ``signed`` (the canonical
        bytes), ``what`` naming the document in sentences, ``at`` when it says it was
        signed (ISO UTC)."""
        if doc.get("algorithm", ALGORITHM) != ALGORITHM:
            return [f"{what}: unknown signature algorithm {doc['algorithm']!r}"], []
        try:
            embedded = load_public_key(doc["public_key"])
            named = fingerprint_hex(
                doc.get("key_id") or doc.get("fingerprint") or fingerprint(embedded)
            )
            signature = base64.b64decode(doc["signature"], validate=True)
        except (KeyError, TypeError, ValueError) as error:
            return [f"{what}: the signature or key cannot be read: {error}"], []
        mismatches: list[str] = []
        notes: list[str] = []
        if fingerprint_hex(fingerprint(embedded)) != named:
            mismatches.append(
                f"{what} names key sha256:{named} but carries key {fingerprint(embedded)}"
            )
        key: TrustedKey | None
        if self.keys:
            key = next((k for k in self.keys if fingerprint_hex(k.fingerprint) == named), None)
            if key is None:
                given = ", ".join(k.fingerprint for k in self.keys)
                many = "one of the given keys" if len(self.keys) > 1 else "the given key"
                mismatches.append(f"{what} names signing key sha256:{named}, not {many} {given}")
                key = self.keys[0]
        elif self.fingerprint is not None:
            if named != self.fingerprint:
                return [
                    *mismatches,
                    f"{what} is signed with key sha256:{named}, not the key with the given "
                    f"fingerprint sha256:{self.fingerprint}; its signature is not trusted "
                    "(pass the provider's key list, the public-key endpoint's JSON, with "
                    "--public-key to check documents signed with a retired key)",
                ], notes
            key = TrustedKey(embedded)
        else:
            key = TrustedKey(embedded)
            notes.append(EMBEDDED_WARNING.format(fingerprint=key.fingerprint))
        try:
            key.public.verify(signature, signed)
        except InvalidSignature:
            mismatches.append(
                f"the signature of {what} does not verify: it was changed after it was "
                "signed, or signed with another key"
                if what != "the bundle"
                else "the signature does not verify: the bundle was changed after it was "
                "signed, or signed with another key"
            )
            return mismatches, notes
        problem = key.validity_problem(at, f"{what} says it was signed")
        if problem:
            mismatches.append(problem)
        notes.append(f"signature of {what}: valid Ed25519 signature by key {key.fingerprint}")
        return mismatches, notes
