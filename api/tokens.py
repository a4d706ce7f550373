"""Writes for API tokens: issue and revoke. The whole token exists only in the return
value of issue_token; the database keeps its prefix and SHA-256."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from api.models import ROLE_SCOPES, ApiToken, Scope, hash_token, managed_users, new_token_parts
from common.querysets import is_provider_staff
from leases.models import Membership

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


def role_scopes(user: Any) -> frozenset[str]:
    """What ``user``'s standing allows a token to do: staff everything, a member what
    their roles allow (ROLE_SCOPES), anybody else nothing."""
    if is_provider_staff(user):
        return frozenset(Scope.values)
    roles = Membership.objects.filter(user_id=user.pk).values_list("role", flat=True)
    return frozenset().union(*(ROLE_SCOPES.get(role, frozenset()) for role in roles))


def scopes_held(*, user: Any, token: ApiToken | None = None) -> frozenset[str]:
    """What a request may hand on: the user's role scopes, narrowed to the token's when it
    acts through one (a write-only token cannot mint an audit token)."""
    held = role_scopes(user)
    return held & frozenset(token.scopes) if token is not None else held


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
) -> IssuedToken:
    """A new token for ``user``. ``issuer`` is the person asking (None: an operator at the
    console); a token is issued to oneself or to a user the issuer manages, with scopes
    that both the holder's roles and the issuer (and the issuer's token) hold."""
    now = now or timezone.now()
    if not user.is_active:
        raise ValidationError(_("User %(user)s is inactive.") % {"user": user})
    if (
        issuer is not None
        and issuer.pk != user.pk
        and not managed_users(issuer).filter(pk=user.pk).exists()
    ):
        raise ValidationError(
            _("You may not issue tokens for %(user)s.") % {"user": user.get_username()}
        )
    expires_at = _expiry(expires_at, now, issuer_token)
    granted = parse_scopes(scopes)
    allowed = role_scopes(user)
    if issuer is not None:
        allowed &= scopes_held(user=issuer, token=issuer_token)
    beyond = [scope for scope in granted if scope not in allowed]
    if beyond:
        raise ValidationError(
            _("A token cannot carry the %(scopes)s scope(s): it may hold only %(allowed)s.")
            % {
                "scopes": ", ".join(beyond),
                "allowed": ", ".join(s for s in Scope.values if s in allowed) or _("nothing"),
            }
        )
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
    )
    return IssuedToken(token=token, secret=secret)


def revoke_all(*, user_id: int, now: datetime | None = None) -> int:
    """Revoke every live token of a user (a deactivated user, a membership removed)."""
    return ApiToken.objects.filter(user_id=user_id, revoked_at__isnull=True).update(
        revoked_at=now or timezone.now()
    )


def revoke_token(*, token: ApiToken, now: datetime | None = None) -> ApiToken:
    """Idempotent: a revoked token keeps its first revocation time."""
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
