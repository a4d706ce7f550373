"""Who may speak for a tenant: the records that say "the tenant agreed" (an amendment's
acknowledgement, a dispute) are made only by an active admin of that tenant who is not
provider staff, whatever the memberships say (a legacy row may give staff a membership:
Membership.clean refuses it, a raw insert does not), and, acting through an API token,
only with a token of that tenant."""

from typing import Any

from django.core.exceptions import PermissionDenied
from django.utils.translation import gettext as _

from common.querysets import acting_tenant_id
from leases.choices import Role
from leases.models import Membership, Tenant


def require_tenant_admin(user: Any, tenant: Tenant, refusal: str) -> str:
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
