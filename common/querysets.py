"""The one scoping path for tenant data.

Every tenant-owned model declares ``tenant_path``: the lookup from the model to its
Tenant ("tenant", "lease__tenant", ...; "" for Tenant itself). Its manager is built from
TenantScopedQuerySet, so ``Model.objects.visible_to(user)`` is the only way views and APIs
read tenant data: provider staff see every row, a tenant member sees the rows of their
tenants, anybody else sees nothing. Provider-wide reads that bypass it are named ``*_for_provider``.

A request made with an API token acts for the one tenant the token was issued in
(``accounts.models.ApiToken.tenant``): authentication marks the user with ``acting_for``, and
``visible_to`` then shows that tenant's rows only, whatever other tenants the holder joins.
"""

from typing import TYPE_CHECKING, Any

from django.db import models

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser


class TenantScopedQuerySet(models.QuerySet):
    def visible_to(self, user: "AbstractBaseUser | AnonymousUser") -> "TenantScopedQuerySet":
        if not user.is_authenticated or not user.is_active:
            return self.none()
        if is_provider_staff(user):
            return self
        path: str = self.model.tenant_path
        member: dict[str, Any] = {
            f"{path}__memberships__user" if path else "memberships__user": user
        }
        tenant_id = acting_tenant_id(user)
        if tenant_id is not None:
            member[f"{path}__pk" if path else "pk"] = tenant_id
        if getattr(self.model, "tenant_path_is_many", False):
            # The path crosses a to-many relation: filter by primary key so rows don't repeat.
            return self.filter(pk__in=self.model._default_manager.filter(**member).values("pk"))
        return self.filter(**member)


def is_provider_staff(user: Any) -> bool:
    return bool(user.is_authenticated and user.is_active and user.is_staff)


# The attribute authentication sets on a user who acts through a tenant's API token.
ACTING_TENANT = "gpulease_acting_tenant_id"


def acting_for(user: Any, tenant_id: int | None) -> None:
    """Mark ``user`` (this request's instance) as acting for one tenant only."""
    setattr(user, ACTING_TENANT, tenant_id)


def acting_tenant_id(user: Any) -> int | None:
    """The one tenant this request's user acts for (through a token), else None."""
    return getattr(user, ACTING_TENANT, None)
