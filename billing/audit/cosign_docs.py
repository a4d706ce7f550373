"""The tenant's keys and the records it made (key events, co-signed acknowledgements,
acceptance sign-offs and disputes) as an audit bundle carries them
(``gpulease_verify.cosign`` checks them)."""

from __future__ import annotations

from typing import Any

from gpulease_verify.canonical import iso_utc
from leases.models import Lease
from leases.selectors import tenant_keys_of, tenant_links_of


def tenant_keys_doc(lease: Lease) -> list[dict[str, Any]]:
    """Every key the lease's tenant registered, revoked ones too, with the signature by
    which the key proved its registration."""
    return [
        {
            "public_key": key.public_key,
            "fingerprint": key.fingerprint,
            "label": key.label,
            "registered_at": iso_utc(key.registered_at),
            "registered_by": key.registered_by_username,
            "registration_signature": key.registration_signature,
            "revoked_at": iso_utc(key.revoked_at),
            "revoked_by": key.revoked_by_username or None,
        }
        for key in tenant_keys_of(tenant_id=lease.tenant_id)
    ]


def tenant_links_doc(lease: Lease) -> list[dict[str, Any]]:
    """Every tenant link of the lease's chain, whatever the period: the key events a
    signature is checked against may be older than the month."""
    return [
        {
            "id": item.pk,
            "chain_index": item.chain_index,
            "prev_hash": item.prev_hash,
            "tenant_hash": item.link_hash,
            "content": item.content,
        }
        for item in tenant_links_of(lease=lease)
    ]


def amended_versions(links: list[dict[str, Any]]) -> set[int]:
    """The terms versions the tenant's signed acknowledgements amend: the bundle carries
    them, so the verifier can hold every unchanged field to the version signed."""
    return {
        int(link["content"]["signed"]["amends"]["version"])
        for link in links
        if link["content"].get("kind") == "acknowledgement"
    }
