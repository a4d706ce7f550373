"""Records the tenant signs: its Ed25519 keys, and the acknowledgements, acceptance
sign-offs and disputes it co-signs.

A tenant admin registers one or more Ed25519 public keys. From then on every record that
says "the tenant agreed" carries the tenant's signature over its *signed content*: a JSON
object built here (``acknowledgement_content``, ``acceptance_content``,
``dispute_content``), written as canonical JSON (``gpulease_verify.canonical``: sorted
keys, no spaces, UTF-8) and signed as those bytes with plain Ed25519 (RFC 8032, no
pre-hash). The signature travels as the base64 of its 64 bytes. Every signed content
starts with ``purpose``: ``gpulease-cosign-v1:<kind>``, so a signature over one kind of
record is never valid for another, and names the tenant, the lease, who signed, as what
role and when (``at``, ISO UTC), and what it is about by number and by chain hash: a
signature over one amendment does not verify for another.

A key's registration is itself signed by that key (``key_content``: proof that the
registrant holds the private key, and of the instant it was registered), so nobody
without the tenant's private key can add a key to the tenant's list or move its
registration. A key is valid at ``t`` when ``registered_at <= t < revoked_at``.

On the server each of these records is a *tenant link* of the lease's hash chain
(``tenant_link_content``): the signed content, the signature and the key's fingerprint,
plus what the server added (``record``: the terms version an acknowledgement made, the
dispute's number). An audit bundle carries the tenant's keys (``tenant_keys``) and every
tenant link of the lease (``tenant_links``); ``check_cosigned`` checks each signature
against a key valid at its time and each co-signed record against the bundle's terms
version or dispute, so an edit of any signed field shows even when the provider signs the
bundle again. Given the tenant's own list of keys (``--tenant-keys``), it also refuses any
key the tenant did not publish.

This module reads no database: the server and an auditor's ``gpulease-verify`` use it, and
``gpulease-verify keygen`` / ``sign`` give a customer the signing side.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from gpulease_verify import terms as terms_rules
from gpulease_verify.canonical import canonical_json
from gpulease_verify.canonical import parse_instant as _at
from gpulease_verify.chain import TENANT
from gpulease_verify.keys import fingerprint, load_public_key, raw_public

VERSION = "gpulease-cosign-v1"
ACKNOWLEDGEMENT = "acknowledgement"
ACCEPTANCE = "acceptance"
DISPUTE = "dispute"
KEY_REGISTERED = "key_registered"
KEY_REVOKED = "key_revoked"
SIGNED_KINDS = (ACKNOWLEDGEMENT, ACCEPTANCE, DISPUTE)
TENANT_LINK = TENANT


def purpose(kind: str) -> str:
    return f"{VERSION}:{kind}"


def _who(tenant: str, by: str, role: str, at: str) -> dict[str, Any]:
    return {"tenant": tenant, "by": by, "role": role, "at": at}


def key_content(*, tenant: str, public_key: str, by: str, role: str, at: str) -> dict[str, Any]:
    """What a key's registration is signed as, by that key: the tenant, the public key
    (base64 of its 32 raw bytes), who registered it and when."""
    return {
        "purpose": purpose(KEY_REGISTERED),
        **_who(tenant, by, role, at),
        "public_key": public_key,
    }


def revocation_content(*, tenant: str, key: str, by: str, role: str, at: str) -> dict[str, Any]:
    """A key's revocation as its tenant link records it (not signed: a tenant that lost a
    key revokes it without it): the tenant, the key's fingerprint, who revoked it, when."""
    return {"purpose": purpose(KEY_REVOKED), **_who(tenant, by, role, at), "key": key}


def acknowledgement_content(
    *,
    tenant: str,
    lease: str,
    by: str,
    role: str,
    at: str,
    amendment: int,
    amends: Mapping[str, Any],
    effective_from: str,
    changes: Mapping[str, Any],
    amendment_reason: str,
    reason: str,
) -> dict[str, Any]:
    """An amendment's acknowledgement: the amendment (number, effective_from, changes as
    stored, the provider's reason), the terms version it amends (``amends``: version,
    chain_index, terms_hash, the one in force at effective_from) and the tenant's reason."""
    return {
        "purpose": purpose(ACKNOWLEDGEMENT),
        **_who(tenant, by, role, at),
        "lease": lease,
        "amendment": int(amendment),
        "amends": {
            "version": int(amends["version"]),
            "chain_index": amends["chain_index"],
            "terms_hash": amends["terms_hash"],
        },
        "effective_from": effective_from,
        "changes": dict(changes),
        "amendment_reason": amendment_reason,
        "reason": reason,
    }


def acceptance_content(
    *, tenant: str, lease: str, by: str, role: str, at: str, run: Mapping[str, Any]
) -> dict[str, Any]:
    """A sign-off that the tenant accepts the lease's acceptance run (``run``: id,
    chain_index, run_hash, verdict)."""
    return {
        "purpose": purpose(ACCEPTANCE),
        **_who(tenant, by, role, at),
        "lease": lease,
        "run": {
            "id": int(run["id"]),
            "chain_index": run["chain_index"],
            "run_hash": run["run_hash"],
            "verdict": run["verdict"],
        },
    }


def dispute_content(
    *,
    tenant: str,
    lease: str,
    by: str,
    role: str,
    at: str,
    reason: str,
    probe_run: Mapping[str, Any] | None,
    incident: int | None,
    invoice: Mapping[str, Any] | None,
    evidence: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """A dispute as opened: its reason, what it is about (a probe run by id and chain
    hash, an incident by id, an invoice by id and number) and the evidence it brings (id
    and SHA-256 of the raw output, ordered by id)."""
    return {
        "purpose": purpose(DISPUTE),
        **_who(tenant, by, role, at),
        "lease": lease,
        "reason": reason,
        "probe_run": None
        if probe_run is None
        else {"id": int(probe_run["id"]), "run_hash": probe_run["run_hash"]},
        "incident": None if incident is None else int(incident),
        "invoice": None
        if invoice is None
        else {"id": int(invoice["id"]), "number": invoice["number"]},
        "evidence": sorted(
            ({"id": int(item["id"]), "raw_sha256": item["raw_sha256"]} for item in evidence),
            key=lambda item: item["id"],
        ),
    }


def signing_bytes(content: Mapping[str, Any]) -> bytes:
    """The exact bytes a tenant signs: the content's canonical JSON in UTF-8."""
    return canonical_json(content).encode("utf-8")


# --- keys and signatures ---------------------------------------------------------------


def public_key_text(public: Ed25519PublicKey) -> str:
    """A public key as the tenant registers it: base64 of its 32 raw bytes."""
    return base64.b64encode(raw_public(public)).decode()


def parse_public_key(text: str) -> Ed25519PublicKey:
    """A tenant's public key from PEM or base64 of the 32 raw bytes (ValueError with a
    sentence otherwise)."""
    try:
        return load_public_key(text)
    except (ValueError, TypeError) as error:
        raise ValueError(f"not an Ed25519 public key: {error}") from None


def signature_bytes(text: str) -> bytes:
    """A signature from its base64 text (ValueError unless 64 bytes)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the signature is not base64") from None
    if len(raw) != 64:
        raise ValueError(f"an Ed25519 signature has 64 bytes, not {len(raw)}")
    return raw


def verifies(public: Ed25519PublicKey | str, content: Mapping[str, Any], signature: str) -> bool:
    """Whether ``signature`` (base64) is ``public``'s signature over ``content``."""
    key = parse_public_key(public) if isinstance(public, str) else public
    try:
        key.verify(signature_bytes(signature), signing_bytes(content))
    except (InvalidSignature, ValueError):
        return False
    return True


def generate() -> Ed25519PrivateKey:
    """A new private key (``gpulease-verify keygen``)."""
    return Ed25519PrivateKey.generate()


def sign(private: Ed25519PrivateKey, content: Mapping[str, Any]) -> str:
    """The base64 signature of ``content``'s signing bytes."""
    return base64.b64encode(private.sign(signing_bytes(content))).decode()


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("the PEM key is not an Ed25519 private key")
    return key


def private_pem(private: Ed25519PrivateKey) -> bytes:
    return private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def tenant_link_content(
    *,
    lease: str,
    kind: str,
    signed: Mapping[str, Any],
    signature: str | None,
    key: str | None,
    record: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What a tenant link's hash covers: the lease, the kind of record, the content the
    tenant signed, the signature and key fingerprint (null when unsigned: a revocation, or
    a record of a tenant with no key), and what the server added (``record``)."""
    return {
        "link": TENANT_LINK,
        "lease": lease,
        "kind": kind,
        "signed": dict(signed),
        "signature": signature,
        "key": key,
        "record": dict(record or {}),
    }


@dataclass(frozen=True)
class TenantKey:
    """A tenant key as a bundle lists it."""

    public: Ed25519PublicKey
    fingerprint: str
    registered_at: datetime
    revoked_at: datetime | None

    def valid_at(self, at: datetime) -> bool:
        return self.registered_at <= at and (self.revoked_at is None or at < self.revoked_at)


def _key_problems(entry: Mapping[str, Any], tenant: str) -> tuple[TenantKey | None, list[str]]:
    try:
        public = parse_public_key(entry["public_key"])
    except ValueError as error:
        return None, [f"tenant key {entry.get('fingerprint')}: {error}"]
    found = fingerprint(public)
    name = f"tenant key {found}"
    problems = []
    if entry.get("fingerprint") != found:
        problems.append(f"{name} is listed with fingerprint {entry.get('fingerprint')}")
    registration = key_content(
        tenant=tenant,
        public_key=public_key_text(public),
        by=entry["registered_by"],
        role=entry.get("registered_as", terms_rules.TENANT_ADMIN),
        at=entry["registered_at"],
    )
    if not verifies(public, registration, entry.get("registration_signature") or ""):
        problems.append(
            f"{name}: its registration (by {entry['registered_by']} at "
            f"{entry['registered_at']} for tenant {tenant}) is not signed by the key itself"
        )
    revoked = entry.get("revoked_at")
    key = TenantKey(public, found, _at(entry["registered_at"]), _at(revoked) if revoked else None)
    return key, problems


def published_keys(text: str) -> set[str]:
    """The fingerprints of the keys in a ``--tenant-keys`` file: PEM blocks and/or lines
    of base64 (32 raw bytes); blank lines and lines starting with ``#`` are skipped."""
    found: set[str] = set()
    pem: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if pem or line.startswith("-----BEGIN"):
            pem.append(line)
            if line.startswith("-----END"):
                found.add(fingerprint(parse_public_key("\n".join(pem))))
                pem = []
            continue
        if line and not line.startswith("#"):
            found.add(fingerprint(parse_public_key(line)))
    if pem:
        raise ValueError("the tenant key file ends inside a PEM block")
    if not found:
        raise ValueError("the tenant key file lists no key")
    return found


class _Cosigned:
    def __init__(self, bundle: Mapping[str, Any], published: set[str] | None):
        self.b = bundle
        self.tenant = (bundle.get("tenant") or {}).get("slug") or ""
        self.lease = bundle["lease"]["reference"]
        self.published = published
        self.problems: list[str] = []
        self.keys: dict[str, TenantKey] = {}
        self.links = list(bundle.get("tenant_links") or [])

    def bad(self, text: str) -> None:
        self.problems.append(text)

    def read_keys(self) -> None:
        for entry in self.b.get("tenant_keys") or []:
            key, problems = _key_problems(entry, self.tenant)
            self.problems.extend(problems)
            if key is not None and not problems:
                self.keys[key.fingerprint] = key
                if self.published is not None and key.fingerprint not in self.published:
                    self.bad(
                        f"tenant key {key.fingerprint} is not one of the tenant's published "
                        "keys (--tenant-keys): the tenant did not register it"
                    )
        for missing in sorted((self.published or set()) - set(self.keys)):
            self.bad(f"the tenant's published key {missing} is not among the bundle's tenant keys")

    def in_force(self, at: datetime) -> list[str]:
        return sorted(fp for fp, key in self.keys.items() if key.valid_at(at))

    def check_signature(self, name: str, content: Mapping[str, Any]) -> None:
        signed, fp = content.get("signed") or {}, content.get("key")
        kind = content.get("kind")
        if signed.get("purpose") != purpose(kind or ""):
            self.bad(f"{name}: signed as {signed.get('purpose')}, not {purpose(kind or '')}")
        if signed.get("tenant") != self.tenant:
            self.bad(f"{name}: signed for tenant {signed.get('tenant')}, not {self.tenant}")
        if kind != KEY_REGISTERED and signed.get("lease", self.lease) != self.lease:
            self.bad(f"{name}: signed for lease {signed.get('lease')}, not {self.lease}")
        if content.get("signature") is None:
            return
        key = self.keys.get(fp or "")
        if key is None:
            self.bad(f"{name}: signed with key {fp}, which is not a key of tenant {self.tenant}")
            return
        at = _at(signed["at"])
        if not key.valid_at(at):
            self.bad(
                f"{name}: signed at {signed['at']} with tenant key {fp}, which was not valid "
                "then (registered "
                + key.registered_at.isoformat()
                + (f", revoked {key.revoked_at.isoformat()})" if key.revoked_at else ")")
            )
        if not verifies(key.public, signed, content["signature"]):
            self.bad(f"{name}: signature does not verify with tenant key {fp}")

    def unsigned(self, name: str, at: str) -> None:
        keys = self.in_force(_at(at))
        if keys:
            self.bad(
                f"{name} at {at} carries no tenant signature, though tenant key(s) "
                f"{', '.join(keys)} were registered then: the tenant must co-sign it"
            )

    def by_record(self, kind: str, field: str) -> dict[Any, Mapping[str, Any]]:
        return {
            link["content"]["record"].get(field): link["content"]
            for link in self.links
            if link["content"].get("kind") == kind
        }

    def check_links(self) -> None:
        for link in self.links:
            content = link["content"]
            name = link_name(content)
            if content.get("lease") != self.lease:
                self.bad(f"{name} is a record of lease {content.get('lease')}, not {self.lease}")
            kind = content.get("kind")
            if kind in SIGNED_KINDS:
                self.check_signature(name, content)
                if content.get("signature") is None:
                    self.unsigned(name, content["signed"]["at"])
            elif kind == KEY_REGISTERED:
                self.check_registration(name, content)
            elif kind == KEY_REVOKED:
                self.check_revocation(name, content)
            else:
                self.bad(f"{name}: unknown kind {kind!r}")

    def check_registration(self, name: str, content: Mapping[str, Any]) -> None:
        fp = content.get("key")
        key = self.keys.get(fp or "")
        if key is None:
            self.bad(f"{name}: key {fp} is not among the bundle's tenant keys")
            return
        self.check_signature(name, content)
        if _at(content["signed"]["at"]) != key.registered_at:
            self.bad(
                f"{name} says {content['signed']['at']}, the tenant keys say it was registered "
                f"{key.registered_at.isoformat()}"
            )

    def check_revocation(self, name: str, content: Mapping[str, Any]) -> None:
        fp = content.get("key")
        key = self.keys.get(fp or "")
        at = _at(content["signed"]["at"])
        if key is not None and key.revoked_at != at:
            self.bad(
                f"{name} at {content['signed']['at']}, but the tenant keys list key {fp} as "
                + (f"revoked {key.revoked_at.isoformat()}" if key.revoked_at else "not revoked")
            )

    def check_terms(self) -> None:
        acks = self.by_record(ACKNOWLEDGEMENT, "terms_version")
        by_version = {int(entry["version"]): entry for entry in self.b.get("terms", [])}
        for entry in self.b.get("terms", []):
            ack = entry.get("acknowledgement")
            if not isinstance(ack, Mapping):
                continue
            link = acks.get(int(entry["version"]))
            if link is None:
                self.unsigned(f"the acknowledgement of terms v{entry['version']}", ack["at"])
                continue
            self.problems.extend(acknowledged_differences(entry, link, by_version))

    def check_disputes(self) -> None:
        signed = self.by_record(DISPUTE, "dispute")
        for dispute in self.b.get("disputes") or []:
            link = signed.get(dispute["id"])
            if link is None:
                opened = next(
                    (e["at"] for e in dispute.get("events", []) if e.get("action") == "opened"),
                    None,
                )
                if opened is not None:
                    self.unsigned(f"dispute #{dispute['id']}", opened)
                continue
            self.problems.extend(dispute_differences(dispute, link))


def link_name(content: Mapping[str, Any]) -> str:
    """A tenant link as a sentence names it."""
    kind, record, signed = content.get("kind"), content.get("record") or {}, content.get("signed")
    signed = signed if isinstance(signed, Mapping) else {}
    if kind == ACKNOWLEDGEMENT:
        return f"acknowledgement of amendment {signed.get('amendment')}"
    if kind == DISPUTE:
        return f"dispute #{record.get('dispute')}"
    if kind == ACCEPTANCE:
        return f"acceptance of run {(signed.get('run') or {}).get('id')}"
    if kind == KEY_REGISTERED:
        return f"registration of tenant key {content.get('key')}"
    if kind == KEY_REVOKED:
        return f"revocation of tenant key {content.get('key')}"
    return f"tenant record {kind}"


def _differs(a: Any, b: Any) -> bool:
    return not terms_rules._same_value(a, b)


def acknowledged_differences(
    entry: Mapping[str, Any],
    link: Mapping[str, Any],
    by_version: Mapping[int, Mapping[str, Any]],
) -> list[str]:
    """How a terms version differs from the acknowledgement the tenant signed: who, when,
    why, the effective instant, every changed field, and every other field against the
    version it amends (which must be the version, by hash, that the tenant signed)."""
    signed, ack = link["signed"], entry["acknowledgement"]
    name = f"{link_name(link)} (terms v{entry['version']})"
    differ = [
        field
        for field, stated in (
            ("by", ack.get("by")),
            ("role", ack.get("role")),
            ("at", ack.get("at")),
            ("reason", ack.get("reason")),
        )
        if stated != signed.get(field)
    ]
    if ack.get("tenant") is not None and ack["tenant"] != signed.get("tenant"):
        differ.append("tenant")
    for field in ("effective_from", "amendment_reason"):
        if entry.get(field) != signed.get(field):
            differ.append(field)
    changes = signed.get("changes") or {}
    base = by_version.get(int(signed["amends"]["version"]))
    for field in terms_rules.CONTRACT_FIELDS:
        if field in changes:
            if _differs(entry.get(field), changes[field]):
                differ.append(field)
        elif base is not None and _differs(entry.get(field), base.get(field)):
            differ.append(field)
    problems = []
    if differ:
        problems.append(
            f"{name}: the version's {', '.join(differ)} differ(s) from what the tenant signed"
        )
    amends = signed["amends"]
    if base is None:
        problems.append(
            f"{name}: the tenant signed an amendment of terms v{amends['version']}, which is "
            "not in the bundle"
        )
    elif base.get("terms_hash") != amends["terms_hash"]:
        problems.append(
            f"{name}: the tenant signed an amendment of terms v{amends['version']} with hash "
            f"{amends['terms_hash']}, but the bundle's terms v{amends['version']} has hash "
            f"{base.get('terms_hash')}"
        )
    return problems


def dispute_differences(dispute: Mapping[str, Any], link: Mapping[str, Any]) -> list[str]:
    """How a bundle's dispute differs from what the tenant signed when opening it."""
    signed = link["signed"]
    stated = {
        "reason": dispute.get("reason"),
        "probe_run": dispute.get("probe_run"),
        "incident": dispute.get("incident"),
        "invoice": dispute.get("invoice"),
        "evidence": sorted(dispute.get("evidence") or []),
    }
    wanted = {
        "reason": signed.get("reason"),
        "probe_run": (signed.get("probe_run") or {}).get("id"),
        "incident": signed.get("incident"),
        "invoice": (signed.get("invoice") or {}).get("id"),
        "evidence": sorted(item["id"] for item in signed.get("evidence") or []),
    }
    differ = [field for field in stated if stated[field] != wanted[field]]
    if not differ:
        return []
    return [
        f"dispute #{dispute['id']}: its {', '.join(differ)} differ(s) from what the tenant signed"
    ]


def check_cosigned(
    bundle: Mapping[str, Any], published: set[str] | None = None
) -> tuple[list[str], list[str]]:
    """(problems, notes) of the bundle's tenant keys and co-signed records; ``published``:
    the fingerprints of the keys the tenant itself published (``--tenant-keys``)."""
    check = _Cosigned(bundle, published)
    check.read_keys()
    check.check_links()
    check.check_terms()
    check.check_disputes()
    signed = sum(
        1
        for link in check.links
        if link["content"].get("signature") and link["content"].get("kind") in SIGNED_KINDS
    )
    notes = []
    if check.keys or check.links:
        pinned = (
            "pinned by --tenant-keys"
            if published is not None
            else "taken from the bundle; pass --tenant-keys to pin the tenant's own"
        )
        notes.append(
            f"tenant signatures: {signed} co-signed record(s) checked with "
            f"{len(check.keys)} tenant key(s) ({pinned})"
        )
    return check.problems, notes


__all__ = [
    "ACCEPTANCE",
    "ACKNOWLEDGEMENT",
    "DISPUTE",
    "KEY_REGISTERED",
    "KEY_REVOKED",
    "TENANT_LINK",
    "acceptance_content",
    "acknowledgement_content",
    "check_cosigned",
    "dispute_content",
    "generate",
    "key_content",
    "link_name",
    "load_private_key",
    "parse_public_key",
    "private_pem",
    "public_key_text",
    "published_keys",
    "purpose",
    "revocation_content",
    "sign",
    "signature_bytes",
    "signing_bytes",
    "tenant_link_content",
    "verifies",
]
