"""The writes of accounts: issuing and revoking API tokens, adding, changing and removing
memberships. The whole token exists only in the return value of issue_token; the database
keeps its prefix and SHA-256.

A token is minted on a standing (``accounts.models``): for a tenant user, one tenant and
their role there, issued by themselves or by an admin of that tenant; for provider staff,
the provider's standing. Provider staff never mint a token that acts as a tenant user.

Anybody issues and revokes their own tokens. Provider staff need ISSUE_ANY to issue a
token held by other staff (and only a superuser issues one held by a superuser: the token
would act with every permission) and REVOKE_ANY to revoke another user's token.

A membership is never given to provider staff (Membership.clean). Changing or removing
one revokes the tokens whose standing it ended (``accounts.signals``, which the admin's
forms reach too)."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.choices import Role, Scope
from accounts.models import ROLE_SCOPES, ApiToken, Membership, hash_token, new_token_parts
from accounts.selectors import administered_tenants, managed_users, role_scopes, scopes_held
from common.locks import lock_in_key_order
from common.querysets import is_provider_staff

ISSUE_ANY = "accounts.issue_any_token"
REVOKE_ANY = "accounts.revoke_any_token"

# Writes to last_used_at are spread out: at most one per token per this interval.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # the whole token, gpl_<prefix>_<secret>: show it once, never store it


def parse_scopes(scopes: Iterable[str]) -> list[str]:
    wanted = [scope.strip() for scope in scopes if scope.strip()]
    unknown = sorted(set(wanted) - set(Scope.values))
    if unknown:
        raise ValidationError(
            _("Unknown scope(s) %(scopes)s; the scopes are %(known)s.")
            % {"scopes": ", ".join(unknown), "known": ", ".join(Scope.values)}
        )
    if not wanted:
        raise ValidationError(_("A token needs at least one scope."))
    return [scope for scope in Scope.values if scope in wanted]


def _is_staff_account(user: Any) -> bool:
    return bool(user.is_staff or user.is_superuser)


def _standing(user: Any, tenant: Any) -> tuple[Any, str]:
    """The tenant and role a token of ``user`` acts with: none for provider staff; for a
    member, the named tenant, or their only one."""
    if user.is_staff:
        if tenant is not None:
            raise ValidationError(
                {
                    "tenant": _(
                        "%(user)s is provider staff: their tokens act for the provider, "
                        "never for a tenant."
                    )
                    % {"user": user.get_username()}
                }
            )
        return None, ""
    held = {
        m.tenant_id: m for m in Membership.objects.filter(user_id=user.pk).select_related("tenant")
    }
    if tenant is None:
        if len(held) == 1:
            (only,) = held.values()
            return only.tenant, only.role
        if not held:
            raise ValidationError(
                _("%(user)s belongs to no tenant: a token of theirs could do nothing.")
                % {"user": user.get_username()}
            )
        names = ", ".join(sorted(m.tenant.slug for m in held.values()))
        raise ValidationError(
            {
                "tenant": _(
                    "%(user)s belongs to several tenants (%(tenants)s): name the one the "
                    "token acts for."
                )
                % {"user": user.get_username(), "tenants": names}
            }
        )
    if tenant.pk not in held:
        raise ValidationError(
            {
                "tenant": _("%(user)s is not a member of %(tenant)s.")
                % {"user": user.get_username(), "tenant": tenant.slug}
            }
        )
    return tenant, held[tenant.pk].role


def _check_issuer(issuer: Any, user: Any, tenant: Any, issuer_token: ApiToken | None) -> None:
    """Refuse an issuer who may not mint this token: staff for a tenant user (403), a
    token of one tenant for another, anybody for a user they do not manage."""
    bound = issuer_token.tenant_id if issuer_token is not None else None
    if bound is not None and (tenant is None or tenant.pk != bound):
        raise ValidationError(
            {"tenant": _("A token of one tenant can only issue tokens of that tenant.")}
        )
    if issuer.pk == user.pk:
        return
    if _is_staff_account(issuer) and not _is_staff_account(user):
        raise PermissionDenied(
            _(
                "Provider staff cannot issue a token for %(user)s: it would act as a user of "
                "the tenant, and only the tenant's own admins issue those."
            )
            % {"user": user.get_username()}
        )
    if _is_staff_account(issuer) and not issuer.has_perm(ISSUE_ANY):
        raise PermissionDenied(
            _("Issuing a token for %(user)s needs the permission %(permission)s.")
            % {"user": user.get_username(), "permission": ISSUE_ANY}
        )
    if user.is_superuser and not issuer.is_superuser:
        raise PermissionDenied(
            _("Only a superuser issues a token for the superuser %(user)s.")
            % {"user": user.get_username()}
        )
    if not managed_users(issuer).filter(pk=user.pk).exists() or (
        tenant is not None and not administered_tenants(issuer).filter(tenant=tenant.pk).exists()
    ):
        raise ValidationError(
            _("You may not issue tokens for %(user)s.") % {"user": user.get_username()}
        )


def _expiry(expires_at: datetime | None, now: datetime, issuer_token: ApiToken | None) -> datetime:
    """Every token expires: by default after API_TOKEN_DEFAULT_DAYS, at most after
    API_TOKEN_MAX_DAYS, and never after the token that issued it."""
    latest = now + timedelta(days=settings.API_TOKEN_MAX_DAYS)
    if issuer_token is not None and issuer_token.expires_at is not None:
        latest = min(latest, issuer_token.expires_at)
    if expires_at is None:
        return min(now + timedelta(days=settings.API_TOKEN_DEFAULT_DAYS), latest)
    if expires_at <= now:
        raise ValidationError(_("A token must expire in the future."))
    if expires_at > latest:
        raise ValidationError(
            _("A token may expire at the latest at %(latest)s.") % {"latest": latest.isoformat()}
        )
    return expires_at


def _check_caps(user: Any, tenant: Any, now: datetime) -> None:
    """Refuse a token beyond API_TOKENS_PER_TENANT active tokens of its tenant or
    API_TOKENS_PER_USER of its holder (each with its own request budget, unlimited tokens
    would be an unlimited budget). The tenant's row, then the holder's, is locked first,
    so two issues at once cannot both take the last place."""
    if tenant is not None:
        lock_in_key_order(type(tenant)._default_manager.filter(pk=tenant.pk))
    lock_in_key_order(get_user_model().objects.filter(pk=user.pk))
    active = ApiToken.objects.active(now)
    cap = settings.API_TOKENS_PER_TENANT
    if tenant is not None and active.filter(tenant=tenant).count() >= cap:
        raise ValidationError(
            _(
                "%(tenant)s already has %(cap)d active API tokens, the most a tenant may "
                "hold: revoke one it no longer uses first."
            )
            % {"tenant": tenant.slug, "cap": cap}
        )
    cap = settings.API_TOKENS_PER_USER
    if active.filter(user_id=user.pk).count() >= cap:
        raise ValidationError(
            _(
                "%(user)s already holds %(cap)d active API tokens, the most one user may "
                "hold: revoke one they no longer use first."
            )
            % {"user": user.get_username(), "cap": cap}
        )


@transaction.atomic
def issue_token(
    *,
    user: Any,
    scopes: Iterable[str],
    name: str = "",
    expires_at: datetime | None = None,
    now: datetime | None = None,
    issuer: Any = None,
    issuer_token: ApiToken | None = None,
    tenant: Any = None,
) -> IssuedToken:
    """A new token for ``user``, acting for ``tenant`` (needed only when the user belongs
    to several; a token issued through another token acts for that token's tenant).
    ``issuer`` is the person asking (None: an operator at the console, recorded as the
    holder itself); a token is issued to oneself or to a member of a tenant the issuer
    administers, with scopes that both the holder's role there and the issuer (and the
    issuer's token) hold."""
    now = now or timezone.now()
    if not user.is_active:
        raise ValidationError(_("User %(user)s is inactive.") % {"user": user})
    if tenant is None and issuer_token is not None and issuer_token.tenant_id is not None:
        tenant = issuer_token.tenant
    if issuer is not None:
        _check_issuer(issuer, user, tenant, issuer_token)
    tenant, role = _standing(user, tenant)
    expires_at = _expiry(expires_at, now, issuer_token)
    granted = parse_scopes(scopes)
    allowed = ROLE_SCOPES.get(role, frozenset()) if tenant is not None else role_scopes(user)
    if issuer is not None:
        allowed &= scopes_held(
            user=issuer, token=issuer_token, tenant_id=tenant.pk if tenant else None
        )
    beyond = [scope for scope in granted if scope not in allowed]
    if beyond:
        raise ValidationError(
            _("A token cannot carry the %(scopes)s scope(s): it may hold only %(allowed)s.")
            % {
                "scopes": ", ".join(beyond),
                "allowed": ", ".join(s for s in Scope.values if s in allowed) or _("nothing"),
            }
        )
    _check_caps(user, tenant, now)
    while True:
        prefix, secret = new_token_parts()
        if not ApiToken.objects.filter(prefix=prefix).exists():
            break
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=prefix,
        secret_hash=hash_token(secret),
        scopes=granted,
        expires_at=expires_at,
        issuer=issuer if issuer is not None else user,
        tenant=tenant,
        role=role,
        holder_is_staff=user.is_staff,
    )
    return IssuedToken(token=token, secret=secret)


def revoke_lapsed(
    *,
    user_ids: Iterable[int] = (),
    tenant_ids: Iterable[int] = (),
    orphaned: bool = False,
    now: datetime | None = None,
) -> int:
    """Revoke the live tokens whose standing no longer holds, among those held or issued
    by ``user_ids``, those of ``tenant_ids``, and (``orphaned``) those whose issuer was
    deleted. Returns how many were revoked."""
    near = Q(user_id__in=list(user_ids)) | Q(issuer_id__in=list(user_ids))
    near |= Q(tenant_id__in=list(tenant_ids))
    if orphaned:
        near |= Q(issuer__isnull=True)
    lapsed = (
        ApiToken.objects.filter(near, revoked_at__isnull=True)
        .with_standing()
        .filter(standing_ok=False)
        .values_list("pk", flat=True)
    )
    return ApiToken.objects.filter(pk__in=list(lapsed)).update(revoked_at=now or timezone.now())


def check_revoker(actor: Any, token: ApiToken) -> None:
    """Refuse provider staff who revoke another user's token without REVOKE_ANY. (Which
    tokens a tenant admin may revoke is which they see: ApiToken.objects.visible_to.)"""
    if token.user_id != actor.pk and is_provider_staff(actor) and not actor.has_perm(REVOKE_ANY):
        raise PermissionDenied(
            _("Revoking %(user)s's token needs the permission %(permission)s.")
            % {"user": token.user.get_username(), "permission": REVOKE_ANY}
        )


def revoke_token(*, token: ApiToken, actor: Any = None, now: datetime | None = None) -> ApiToken:
    """Idempotent: a revoked token keeps its first revocation time. ``actor``: the person
    asking (check_revoker); None for the system (a token whose standing lapsed)."""
    if actor is not None:
        check_revoker(actor, token)
    if token.revoked_at is None:
        token.revoked_at = now or timezone.now()
        ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
            revoked_at=token.revoked_at
        )
    return token


def touch(token: ApiToken, now: datetime | None = None) -> None:
    now = now or timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        token.last_used_at = now
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)


@transaction.atomic
def add_membership(*, user: Any, tenant: Any, role: str = Role.VIEWER) -> Membership:
    """Make ``user`` a member of ``tenant`` with ``role``. Refused (ValidationError) for
    provider staff, a user who already belongs to the tenant, or an unknown role."""
    membership = Membership(user=user, tenant=tenant, role=role)
    membership.full_clean()
    membership.save()
    return membership


@transaction.atomic
def change_role(*, membership: Membership, role: str) -> Membership:
    """Give the member another role; the tokens minted on the old role are revoked
    (``accounts.signals``)."""
    membership.role = role
    membership.full_clean()
    membership.save()
    return membership


@transaction.atomic
def remove_membership(*, membership: Membership) -> None:
    """End the membership; the tokens minted on it, and those its holder issued in the
    tenant as its admin, are revoked (``accounts.signals``)."""
    membership.delete()
