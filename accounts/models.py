"""Who is who in a tenant: memberships (a user's role in a tenant) and API tokens.

The tables keep the names they had in the apps these models came from (issue 31 item 5):
``leases_membership`` and ``api_apitoken``. Other apps read them through
``accounts.selectors`` and write them through ``accounts.services``.

API tokens: per user, stored hashed (SHA-256 of the whole token), shown once.

A token reads ``gpl_<prefix>_<secret>``. The prefix (8 characters) is kept in clear so a
person can tell their tokens apart and so the lookup is one indexed row; the secret is
never stored. Scopes (read, write, audit) narrow what the token may do; the user's role
narrows it further.

A token carries the standing it was minted on: its holder (``user``), its issuer, the
tenant it acts for and the holder's role there (provider staff's tokens: no tenant, no
role), and whether the holder was provider staff. It holds only while that standing does
(``standing_holds``): the holder still has that role in that tenant, the same staff flag,
both are active, and the issuer may still issue it (the holder itself, an admin of that
tenant, or for a staff token active staff). Authentication checks this in the query that
finds the token; ``accounts.signals`` revokes what no longer holds when standing changes."""

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import BooleanField, Case, Exists, F, OuterRef, Q, Value, When
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from accounts.choices import Role, Scope, TokenState
from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet, acting_tenant_id, is_provider_staff

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from django.db.models import QuerySet

TOKEN_MARK = "gpl"
PREFIX_LENGTH = 8


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token_parts() -> tuple[str, str]:
    """(prefix, whole token). The prefix is lowercase hex, so it never holds the "_" that
    separates the parts; the secret is 43 URL-safe characters (256 bits)."""
    prefix = secrets.token_hex(PREFIX_LENGTH // 2)
    return prefix, f"{TOKEN_MARK}_{prefix}_{secrets.token_urlsafe(32)}"


# As new_token_parts writes them. Checked before any query: a prefix with a NUL in it
# would otherwise be a database error on PostgreSQL and "unknown token" on SQLite.
_WELL_FORMED = re.compile(rf"{TOKEN_MARK}_([0-9a-f]{{{PREFIX_LENGTH}}})_[A-Za-z0-9_-]+", re.ASCII)


def split_token(token: str) -> str | None:
    """The prefix of a well-formed token, else None."""
    match = _WELL_FORMED.fullmatch(token)
    return match.group(1) if match else None


# What each role may do through a token; a token never gets more than its issuer holds.
ROLE_SCOPES: dict[str, frozenset[str]] = {
    Role.ADMIN: frozenset({Scope.READ, Scope.WRITE, Scope.AUDIT}),
    Role.VIEWER: frozenset({Scope.READ}),
    Role.AUDITOR: frozenset({Scope.READ, Scope.AUDIT}),
}


class Membership(TimeStampedModel):
    """A user's place in a tenant. Provider staff (is_staff) hold none: they act for the
    provider, and a tenant admin must never be able to reach them (their tokens, their
    sessions) through a membership."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="memberships",
        verbose_name=_("user"),
    )
    tenant = models.ForeignKey(
        "leases.Tenant",
        on_delete=models.CASCADE,
        related_name="memberships",
        verbose_name=_("tenant"),
    )
    role = models.CharField(_("role"), max_length=16, choices=Role.choices, default=Role.VIEWER)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        db_table = "leases_membership"
        verbose_name = _("membership")
        verbose_name_plural = _("memberships")
        constraints = [
            models.UniqueConstraint(
                fields=["user", "tenant"],
                name="one_membership_per_user_and_tenant",
                violation_error_message=_("This user already belongs to this tenant."),
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.tenant} ({self.get_role_display()})"

    def clean(self) -> None:
        user = getattr(self, "user", None)
        if user is not None and (user.is_staff or user.is_superuser):
            raise ValidationError(
                {
                    "user": _(
                        "%(user)s is provider staff; staff cannot be members of a tenant. "
                        "Use a separate account for tenant work."
                    )
                    % {"user": user.get_username()}
                }
            )


def administered_tenants(actor: Any) -> "QuerySet[Any]":
    """The ids of the tenants ``actor`` administers (as a subquery): none for provider
    staff, who are not tenant users whatever their memberships say; only the token's
    tenant when the actor acts through a token."""
    if is_provider_staff(actor) or actor.is_superuser:
        return Membership.objects.none().values("tenant")
    rows = Membership.objects.filter(user_id=actor.pk, role=Role.ADMIN)
    tenant_id = acting_tenant_id(actor)
    if tenant_id is not None:
        rows = rows.filter(tenant_id=tenant_id)
    return rows.values("tenant")


def standing_holds() -> Q:
    """The condition under which a token's standing still holds (see the module)."""
    holder_role = Exists(
        Membership.objects.filter(
            user=OuterRef("user"), tenant=OuterRef("tenant"), role=OuterRef("role")
        )
    )
    issuer_admin = Exists(
        Membership.objects.filter(
            user=OuterRef("issuer"), tenant=OuterRef("tenant"), role=Role.ADMIN
        )
    )
    holder = Q(user__is_active=True, user__is_staff=F("holder_is_staff"))
    as_staff = Q(tenant__isnull=True, holder_is_staff=True)
    as_member = Q(tenant__isnull=False, holder_is_staff=False) & holder_role
    issuer = (
        Q(issuer=F("user"))
        | (Q(tenant__isnull=True, issuer__is_active=True, issuer__is_staff=True))
        | (
            Q(tenant__isnull=False, issuer__is_active=True, issuer__is_staff=False)
            & Q(issuer__is_superuser=False)
            & issuer_admin
        )
    )
    return holder & (as_staff | as_member) & issuer


class ApiTokenQuerySet(models.QuerySet):
    def visible_to(self, user: "AbstractBaseUser | AnonymousUser") -> "ApiTokenQuerySet":
        """A user sees their own tokens, and every token issued in a tenant they administer
        (whoever holds or issued it); provider staff see all. Acting through a token: that
        token's tenant only."""
        if not user.is_authenticated or not user.is_active:
            return self.none()
        if is_provider_staff(user):
            return self
        rows = self.filter(Q(user=user) | Q(tenant__in=administered_tenants(user)))
        tenant_id = acting_tenant_id(user)
        return rows if tenant_id is None else rows.filter(tenant_id=tenant_id)

    def active(self, now: datetime) -> "ApiTokenQuerySet":
        """Neither revoked nor expired at ``now`` (TokenState.ACTIVE, in the query)."""
        return self.filter(revoked_at__isnull=True).filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=now)
        )

    def with_standing(self) -> "ApiTokenQuerySet":
        """Each token with ``standing_ok``: whether its standing still holds (one CASE in
        the same query, so a NULL issuer or tenant reads as false, never as unknown)."""
        return self.annotate(
            standing_ok=Case(
                When(standing_holds(), then=Value(True)),
                default=Value(False),
                output_field=BooleanField(),
            )
        )


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        related_name="api_tokens",
        verbose_name=_("user"),
    )
    name = models.CharField(_("name"), max_length=100, blank=True)
    prefix = models.CharField(_("prefix"), max_length=PREFIX_LENGTH, unique=True)
    secret_hash = models.CharField(_("SHA-256 of the token"), max_length=64)
    scopes = models.JSONField(_("scopes"), default=list)
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires at"), null=True, blank=True)
    revoked_at = models.DateTimeField(_("revoked at"), null=True, blank=True)
    last_used_at = models.DateTimeField(_("last used at"), null=True, blank=True)
    # The standing it was minted on (see the module).
    issuer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="issued_api_tokens",
        verbose_name=_("issued by"),
    )
    tenant = models.ForeignKey(
        "leases.Tenant",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="api_tokens",
        verbose_name=_("acts for tenant"),
        help_text=_("Empty for a provider staff token."),
    )
    role = models.CharField(_("role"), max_length=16, choices=Role.choices, blank=True)
    holder_is_staff = models.BooleanField(_("holder was provider staff"), default=False)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        db_table = "api_apitoken"
        verbose_name = _("API token")
        verbose_name_plural = _("API tokens")
        ordering = ["-created_at", "-id"]
        permissions = [
            ("issue_any_token", _("Can issue API tokens held by other provider staff")),
            ("revoke_any_token", _("Can revoke other users' API tokens")),
        ]

    def __str__(self) -> str:
        return f"{TOKEN_MARK}_{self.prefix}… ({self.user})"

    def matches(self, token: str) -> bool:
        return hmac.compare_digest(self.secret_hash, hash_token(token))

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at is not None and self.expires_at <= (now or timezone.now())

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return TokenState.REVOKED
        if self.is_expired():
            return TokenState.EXPIRED
        return TokenState.ACTIVE
