"""The reads of accounts that other apps make: a user's memberships, tenants and roles, whom
an actor manages, what a token may still do, who may speak for a tenant. Writes go
through ``accounts.services``."""

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.utils.translation import gettext as _

from accounts.choices import Role, Scope
from accounts.models import ROLE_SCOPES, ApiToken, Membership

# Its home is the model's module (ApiToken.objects.visible_to is built on it); read it here.
from accounts.models import administered_tenants as administered_tenants
from common.querysets import acting_tenant_id, is_provider_staff

if TYPE_CHECKING:
    from datetime import datetime

    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


def memberships_of(user: Any) -> "QuerySet[Membership]":
    """The user's memberships with their tenants, by tenant slug (none for anonymous)."""
    if user is None or not user.is_authenticated:
        return Membership.objects.none()
    return (
        Membership.objects.filter(user_id=user.pk).select_related("tenant").order_by("tenant__slug")
    )


def tenant_ids_of(user: Any) -> list[int]:
    """The ids of the tenants the user belongs to, ascending."""
    return list(
        Membership.objects.filter(user_id=user.pk)
        .order_by("tenant_id")
        .values_list("tenant_id", flat=True)
    )


def roles_by_tenant(user: Any, tenant_id: int | None = None) -> dict[int, str]:
    """tenant id -> the user's role there (in ``tenant_id`` only, when given)."""
    rows = Membership.objects.filter(user_id=user.pk)
    if tenant_id is not None:
        rows = rows.filter(tenant_id=tenant_id)
    return dict(rows.values_list("tenant_id", "role"))


def has_role(user: Any, tenant_id: int, roles: Iterable[str]) -> bool:
    """Whether the user is a member of the tenant with one of ``roles`` (standing aside:
    provider staff and inactive users are the caller's to refuse)."""
    return Membership.objects.filter(
        user_id=user.pk, tenant_id=tenant_id, role__in=list(roles)
    ).exists()


def first_admin_of(tenant_id: int) -> Any:
    """The tenant's longest-standing admin (a user), None when it has none."""
    row = (
        Membership.objects.filter(tenant_id=tenant_id, role=Role.ADMIN)
        .select_related("user")
        .order_by("pk")
        .first()
    )
    return row.user if row is not None else None


def managed_users(actor: "AbstractBaseUser | AnonymousUser") -> "QuerySet[Any]":
    """The other users whose tokens ``actor`` may issue, list and revoke.

    Provider staff: every user. A tenant admin: the users none of whose memberships lies
    outside the tenants that admin administers, and never provider staff (who hold the
    provider's keys) nor a user who is also a member elsewhere. Anybody else: nobody."""
    users = get_user_model()._default_manager
    if not actor.is_authenticated or not actor.is_active:
        return users.none()
    if is_provider_staff(actor):
        return users.all()
    administered = administered_tenants(actor)
    elsewhere = Membership.objects.exclude(tenant__in=administered).values("user")
    return (
        users.filter(memberships__tenant__in=administered, is_staff=False, is_superuser=False)
        .exclude(pk__in=elsewhere)
        .distinct()
    )


def active_tokens(now: "datetime") -> "QuerySet[ApiToken]":
    """Every token neither revoked nor expired at ``now``."""
    return ApiToken.objects.active(now)


def tokens_visible_to(user: "AbstractBaseUser | AnonymousUser") -> "QuerySet[ApiToken]":
    """The tokens ``user`` may list and revoke (ApiToken.objects.visible_to)."""
    return ApiToken.objects.visible_to(user)


def role_scopes(user: Any, tenant_id: int | None = None) -> frozenset[str]:
    """What ``user``'s standing allows a token to do: staff everything, a member what
    their roles allow (ROLE_SCOPES; in ``tenant_id`` only, when given), anybody else
    nothing."""
    if is_provider_staff(user):
        return frozenset(Scope.values)
    roles = Membership.objects.filter(user_id=user.pk)
    if tenant_id is not None:
        roles = roles.filter(tenant_id=tenant_id)
    return frozenset().union(
        *(ROLE_SCOPES.get(role, frozenset()) for role in roles.values_list("role", flat=True))
    )


def scopes_held(
    *, user: Any, token: ApiToken | None = None, tenant_id: int | None = None
) -> frozenset[str]:
    """What a request may hand on: the user's role scopes (in ``tenant_id``), narrowed to
    the token's when it acts through one (a write-only token cannot mint an audit token)."""
    held = role_scopes(user, tenant_id)
    return held & frozenset(token.scopes) if token is not None else held


def lapse_reason(token: ApiToken) -> str:
    """Why a token's standing no longer holds, in a sentence (a few queries: only asked
    once the token is refused)."""
    holder, issuer = token.user, token.issuer
    if not holder.is_active:
        return _("its holder %(user)s is inactive") % {"user": holder.get_username()}
    if holder.is_staff and not token.holder_is_staff:
        return _("its holder %(user)s has become provider staff since it was issued") % {
            "user": holder.get_username()
        }
    if token.holder_is_staff and not holder.is_staff:
        return _("its holder %(user)s is no longer provider staff") % {
            "user": holder.get_username()
        }
    if (
        token.tenant_id is not None
        and not Membership.objects.filter(
            user_id=holder.pk, tenant_id=token.tenant_id, role=token.role
        ).exists()
    ):
        return _("its holder %(user)s is no longer %(role)s of %(tenant)s") % {
            "user": holder.get_username(),
            "role": Role(token.role).label if token.role in Role.values else token.role,
            "tenant": token.tenant.slug if token.tenant else token.tenant_id,
        }
    if issuer is None:
        return _("the user who issued it no longer exists")
    return _("%(issuer)s, who issued it, may no longer issue it") % {
        "issuer": issuer.get_username()
    }


def require_tenant_admin(user: Any, tenant: Any, refusal: str) -> str:
    """The user's role (admin) in ``tenant``, else PermissionDenied: ``refusal`` (a
    sentence naming what only a tenant admin does), with the reason for staff."""
    if user is None or not user.is_authenticated or not user.is_active:
        raise PermissionDenied(refusal)
    if user.is_staff or user.is_superuser:
        raise PermissionDenied(
            _("%(refusal)s Provider staff never act as a tenant user.") % {"refusal": refusal}
        )
    acting = acting_tenant_id(user)
    if acting is not None and acting != tenant.pk:
        raise PermissionDenied(refusal)
    role = (
        Membership.objects.filter(user=user, tenant_id=tenant.pk)
        .values_list("role", flat=True)
        .first()
    )
    if role != Role.ADMIN:
        raise PermissionDenied(refusal)
    return role


# --- read by api ---


def tokens_for_provider() -> "QuerySet[ApiToken]":
    """Every API token, unscoped."""
    return ApiToken.objects.all()


def token_with_standing(*, prefix: str) -> ApiToken | None:
    """The token of ``prefix`` with its holder and whether its standing still holds
    (ApiToken.objects.with_standing); None when there is none."""
    return ApiToken.objects.select_related("user").with_standing().filter(prefix=prefix).first()
