from django.db import models
from django.utils.translation import gettext_lazy as _


class Role(models.TextChoices):
    """A member's role in a tenant (Membership.role, and the role an API token acts with)."""

    ADMIN = "admin", _("tenant admin")
    VIEWER = "viewer", _("viewer")
    AUDITOR = "auditor", _("auditor")


class Scope(models.TextChoices):
    """What an API token may do; the holder's role narrows it further (ROLE_SCOPES)."""

    READ = "read", _("read")
    WRITE = "write", _("write")
    AUDIT = "audit", _("audit")


class TokenState(models.TextChoices):
    ACTIVE = "active", _("active")
    EXPIRED = "expired", _("expired")
    REVOKED = "revoked", _("revoked")
