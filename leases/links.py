"""Terms versions and tenant records as links of a lease's hash chain (``ledger.chain``):
what each one's hash covers, appending them, and reading them back (registered with the
ledger by ``leases.apps``, with the lease table whose row is each chain's lock). The
content rules are ``gpulease_verify.terms.terms_content`` and
``gpulease_verify.cosign.tenant_link_content``."""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from gpulease_verify.canonical import iso_utc
from gpulease_verify.chain import Link
from gpulease_verify.terms import CONTRACT_FIELDS, terms_content
from leases.models import Lease, LeaseTerms, TenantLink
from ledger import kinds
from ledger.chain import appending


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    return value


def terms_fields(version: Any) -> dict[str, Any]:
    """A terms version as an audit bundle writes it (and as ``terms_content`` reads it):
    instants ISO UTC, decimals as text, windows and tiers as JSON."""
    return {
        "lease": version.lease.reference,
        "version": version.version,
        "effective_from": iso_utc(version.effective_from),
        "created_at": iso_utc(version.created_at),
        "amendment_reason": version.amendment_reason,
        **{name: _plain(getattr(version, name)) for name in CONTRACT_FIELDS},
        "acknowledgement": version.acknowledgement,
    }


def _terms_link_content(version: LeaseTerms) -> dict[str, Any]:
    return terms_content(terms_fields(version))


def link_terms(version: LeaseTerms) -> LeaseTerms:
    """Append a saved, unlinked terms version to its lease's chain. The caller
    (``leases.services.add_terms_version``) holds the lease's row already."""
    with appending([version.lease_id]) as chain:
        version.refresh_from_db()  # hash the values as stored (decimal places, JSON)
        chain.link(version)
        version.save(update_fields=["chain_index", "prev_hash", "terms_hash"])
    return version


def link_tenant_record(*, lease_id: int, kind: str, content: dict[str, Any]) -> TenantLink:
    """Append a tenant record (``gpulease_verify.cosign.tenant_link_content``) to the
    lease's chain and save it. The caller (``leases.cosign``) holds the lease's row
    already."""
    with appending([lease_id]) as chain:
        item = chain.link(TenantLink(lease_id=lease_id, kind=kind, content=content))
        item.save(force_insert=True)
    return item


def _terms_links(rows: QuerySet[LeaseTerms]) -> Iterable[Link]:
    return [
        Link(
            index=version.chain_index or 0,
            prev_hash=version.prev_hash,
            run_hash=version.terms_hash,
            content=_terms_link_content(version),
            terms_version=version.version,
        )
        for version in rows.select_related("lease")
    ]


def _tenant_links(rows: QuerySet[TenantLink]) -> Iterable[Link]:
    return [
        Link(
            index=item.chain_index,
            prev_hash=item.prev_hash,
            run_hash=item.link_hash,
            content=item.content,
            tenant_link_id=item.pk,
        )
        for item in rows
    ]


def register() -> None:
    """The lease's chain and the leases app's kinds of link (``leases.apps``)."""
    kinds.register_leases(Lease)
    kinds.register(kinds.Kind("terms", LeaseTerms, "terms_hash", _terms_link_content, _terms_links))
    kinds.register(
        kinds.Kind("tenant", TenantLink, "link_hash", lambda item: item.content, _tenant_links)
    )
