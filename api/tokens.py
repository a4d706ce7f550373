"""Writes for API tokens: issue and revoke. The whole token exists only in the return
value of issue_token; the database keeps its prefix and SHA-256."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from api.models import ApiToken, Scope, hash_token, new_token_parts

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


@transaction.atomic
def issue_token(
    *,
    user: Any,
    scopes: Iterable[str],
    name: str = "",
    expires_at: datetime | None = None,
    now: datetime | None = None,
) -> IssuedToken:
    now = now or timezone.now()
    if expires_at is not None and expires_at <= now:
        raise ValidationError(_("A token must expire in the future."))
    if not user.is_active:
        raise ValidationError(_("User %(user)s is inactive.") % {"user": user})
    granted = parse_scopes(scopes)
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
