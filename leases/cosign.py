"""The tenant's signing keys and its signatures on the records that say "the tenant
agreed" (the rules and the signed contents: ``gpulease_verify.cosign``).

A tenant admin registers an Ed25519 public key with a signature by that key over its
registration (``registration_content``), and may revoke it; both are links of every lease
of the tenant's chain. From then on an acknowledgement (``leases.services``), an acceptance
sign-off (``benchmarks.acceptance``) and a dispute (``billing.evidence``) carry the tenant's
signature over their content, made at ``at`` (chosen by whoever shows the content, no
later than now and no earlier than ``SIGNED_AT_REACH`` ago): ``cosignature`` refuses one
whose signature does not verify with a key of the tenant valid at ``at``, and an unsigned
one from a tenant that holds a valid key. A tenant with no key keeps the rules of
``accounts.selectors.require_tenant_admin`` alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.selectors import require_tenant_admin
from common.locks import lock_in_key_order, locking
from gpulease_verify import cosign as rules
from gpulease_verify.canonical import iso_utc, parse_instant
from gpulease_verify.keys import fingerprint
from gpulease_verify.terms import TENANT_ADMIN
from leases.links import link_tenant_record
from leases.models import Lease, Tenant, TenantKey, TenantLink

# How long a content shown for signing stays signable.
SIGNED_AT_REACH = timedelta(minutes=30)


def parse_signed_at(text: str) -> datetime:
    """``at`` as a client sends it back (ISO 8601 with an offset), else a sentence."""
    try:
        return parse_instant(text)
    except (TypeError, ValueError):
        raise ValidationError(
            {"signed_at": _("Not an instant: give it as the content to sign shows it.")}
        ) from None


def check_signed_at(at: datetime, now: datetime | None = None) -> None:
    now = now or timezone.now()
    if at > now:
        raise ValidationError(
            {
                "signed_at": _("The signed content's time %(at)s is in the future.")
                % {"at": iso_utc(at)}
            }
        )
    if at < now - SIGNED_AT_REACH:
        raise ValidationError(
            {
                "signed_at": _(
                    "The signed content's time %(at)s is more than 30 minutes ago: fetch the "
                    "content again and sign that."
                )
                % {"at": iso_utc(at)}
            }
        )


def keys_valid_at(tenant: Tenant, at: datetime) -> list[TenantKey]:
    return list(
        TenantKey.objects.filter(tenant=tenant, registered_at__lte=at).filter(
            Q(revoked_at__isnull=True) | Q(revoked_at__gt=at)
        )
    )


def cosignature(*, tenant: Tenant, content: dict[str, Any], signature: str | None) -> str | None:
    """The fingerprint of the tenant's key that signed ``content`` (its ``at`` checked
    against now), None for an unsigned record of a tenant with no valid key; else the
    reason, as a ValidationError on ``signature``."""
    at = parse_instant(content["at"])
    if not signature:
        if keys_valid_at(tenant, timezone.now()):
            raise ValidationError(
                {
                    "signature": _(
                        "Tenant %(tenant)s has registered signing keys: this record needs the "
                        "tenant's signature over its content."
                    )
                    % {"tenant": tenant.name}
                }
            )
        return None
    check_signed_at(at)
    try:
        rules.signature_bytes(signature)
    except ValueError:
        raise ValidationError(
            {"signature": _("A signature is the base64 of 64 bytes (Ed25519).")}
        ) from None
    for key in keys_valid_at(tenant, at):
        if rules.verifies(key.public_key, content, signature):
            return key.fingerprint
    raise ValidationError(
        {
            "signature": _(
                "The signature does not verify with any key of tenant %(tenant)s valid at %(at)s."
            )
            % {"tenant": tenant.name, "at": content["at"]}
        }
    )


def record(
    *,
    lease: Lease,
    kind: str,
    signed: dict[str, Any],
    signature: str | None,
    key: str | None,
    extra: dict[str, Any] | None = None,
) -> TenantLink:
    """Append a tenant record to the lease's chain; the caller holds the lease row's lock."""
    return link_tenant_record(
        lease_id=lease.pk,
        kind=kind,
        content=rules.tenant_link_content(
            lease=lease.reference,
            kind=kind,
            signed=signed,
            signature=signature,
            key=key,
            record=extra,
        ),
    )


def _on_every_lease(tenant: Tenant, kind: str, signed: dict[str, Any], **link: Any) -> None:
    leases = Lease.objects.filter(tenant=tenant)
    lock_in_key_order(leases)
    for lease in leases.order_by("pk"):
        record(lease=lease, kind=kind, signed=signed, **link)


# --- keys ------------------------------------------------------------------------------


def registration_content(
    *, tenant: Tenant, user: Any, public_key: str, at: datetime
) -> dict[str, Any]:
    """What the registrant signs with the new key (its base64 raw form, or a sentence)."""
    try:
        public = rules.parse_public_key(public_key)
    except ValueError:
        raise ValidationError(
            {
                "public_key": _(
                    "Not an Ed25519 public key: give its PEM or the base64 of its 32 bytes."
                )
            }
        ) from None
    return rules.key_content(
        tenant=tenant.slug,
        public_key=rules.public_key_text(public),
        by=user.get_username(),
        role=TENANT_ADMIN,
        at=iso_utc(at) or "",
    )


@transaction.atomic
def register_key(
    *,
    tenant: Tenant,
    user: Any,
    public_key: str,
    signature: str,
    signed_at: datetime,
    label: str = "",
) -> TenantKey:
    """Register a public key of the tenant, proven by its signature over
    ``registration_content``; a link on every lease of the tenant."""
    require_tenant_admin(
        user,
        tenant,
        _("Only a tenant admin of %(tenant)s can register its signing keys.")
        % {"tenant": tenant.name},
    )
    check_signed_at(signed_at)
    signed = registration_content(tenant=tenant, user=user, public_key=public_key, at=signed_at)
    public = rules.parse_public_key(signed["public_key"])
    if not rules.verifies(public, signed, signature or ""):
        raise ValidationError(
            {
                "signature": _(
                    "The signature is not this key's signature over its registration: sign "
                    "the registration content with the key's private half."
                )
            }
        )
    try:
        with transaction.atomic():
            key = TenantKey.objects.create(
                tenant=tenant,
                public_key=signed["public_key"],
                fingerprint=fingerprint(public),
                label=label.strip()[:100],
                registered_at=signed_at,
                registered_by=user,
                registered_by_username=user.get_username(),
                registration_signature=signature,
            )
    except IntegrityError:
        raise ValidationError(
            {"public_key": _("This tenant has already registered this key.")}
        ) from None
    _on_every_lease(tenant, rules.KEY_REGISTERED, signed, signature=signature, key=key.fingerprint)
    return key


@transaction.atomic
def revoke_key(*, key: TenantKey, user: Any, now: datetime | None = None) -> TenantKey:
    """Revoke a key from now on: what it signed before stays valid, nothing after is."""
    key = locking(TenantKey.objects).select_related("tenant").get(pk=key.pk)
    role = require_tenant_admin(
        user,
        key.tenant,
        _("Only a tenant admin of %(tenant)s can revoke its signing keys.")
        % {"tenant": key.tenant.name},
    )
    if key.revoked_at is not None:
        raise ValidationError(
            _("Key %(key)s was already revoked at %(at)s.")
            % {"key": key.fingerprint, "at": iso_utc(key.revoked_at)}
        )
    key.revoked_at = now or timezone.now()
    key.revoked_by, key.revoked_by_username = user, user.get_username()
    key.save(update_fields=["revoked_at", "revoked_by", "revoked_by_username"])
    signed = rules.revocation_content(
        tenant=key.tenant.slug,
        key=key.fingerprint,
        by=key.revoked_by_username,
        role=role,
        at=iso_utc(key.revoked_at) or "",
    )
    _on_every_lease(key.tenant, rules.KEY_REVOKED, signed, signature=None, key=key.fingerprint)
    return key
