"""Who may do what through the API.

Three layers, in this order:

1. Row visibility: querysets come from ``visible_to(user)`` (api.base), so another
   tenant's object is a 404 before any permission is asked.
2. The token's scopes (when the request carries a token): ``read`` for safe methods,
   ``write`` for unsafe ones, ``audit`` for the views that declare ``required_scope``.
3. The user's standing: provider staff read everything and write only with the Django
   permission the view declares for the action (``staff_permissions``: action ->
   "app_label.codename"; a write action it does not name is refused to staff, superusers
   included, so a new route cannot be left open). A tenant member may read with any role
   (``read_roles``) and write only where the view or action lists their role in
   ``write_roles`` (empty by default: provider only).

On a detail route (``view.detail``) the scope and role checks wait until the object has
been found, so a request for another tenant's object answers 404 whatever the role.
"""

from typing import Any

from django.utils.translation import gettext as _
from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts.choices import Role, Scope
from accounts.models import ApiToken
from accounts.selectors import roles_by_tenant
from common.querysets import acting_tenant_id, is_provider_staff

ALL_ROLES = frozenset(Role.values)
# A staff_permissions value: the route is open to staff and the service decides, with the
# object in hand: one's own API tokens (accounts.services), or a tenant's own act that the
# service refuses to provider staff (opening a dispute, acknowledging an amendment).
SERVICE_DECIDES = "service-decides"


def staff_permission(view: Any) -> str | None:
    """The permission provider staff need for the view's action (None: not declared)."""
    return getattr(view, "staff_permissions", {}).get(getattr(view, "action", None))


def check_staff(request: Request, view: Any) -> None:
    """Staff read freely; a write needs the permission the view declares for it."""
    if request.method in SAFE_METHODS:
        return
    needed = staff_permission(view)
    if needed is None:
        raise exceptions.PermissionDenied(_("Provider staff may not do this through the API."))
    if needed != SERVICE_DECIDES and not request.user.has_perm(needed):
        raise exceptions.PermissionDenied(
            _("This needs the permission %(permission)s.") % {"permission": needed}
        )


def tenant_id_of(obj: Any) -> int | None:
    """The tenant an object belongs to, following its model's tenant_path; None when the
    path crosses a to-many relation (a node may have served several tenants)."""
    model = type(obj)
    if getattr(model, "tenant_path_is_many", False) or not hasattr(model, "tenant_path"):
        return None
    path: str = model.tenant_path
    if not path:
        return obj.pk
    *hops, last = path.split("__")
    for hop in hops:
        obj = getattr(obj, hop)
    return getattr(obj, f"{last}_id")


def roles_of(request: Request) -> dict[int, str]:
    """tenant id -> the requesting user's role there (through a token: in the token's
    tenant only); one query per request."""
    cached = getattr(request, "_gpulease_roles", None)
    if cached is None:
        cached = roles_by_tenant(request.user, acting_tenant_id(request.user))
        request._gpulease_roles = cached  # type: ignore[attr-defined]
    return cached


def required_scope(request: Request, view: Any) -> str:
    declared = getattr(view, "required_scope", None)
    if declared:
        return declared
    return Scope.READ if request.method in SAFE_METHODS else Scope.WRITE


def check_scope(request: Request, view: Any) -> None:
    token = request.auth
    if isinstance(token, ApiToken):
        scope = required_scope(request, view)
        if not token.has_scope(scope):
            raise exceptions.PermissionDenied(
                _("This API token lacks the %(scope)s scope.") % {"scope": scope}
            )


def allowed_roles(request: Request, view: Any) -> frozenset[str]:
    if request.method in SAFE_METHODS:
        return frozenset(getattr(view, "read_roles", ALL_ROLES))
    return frozenset(getattr(view, "write_roles", ()))


class RolePermission(BasePermission):
    message = "You may not do this."

    def has_permission(self, request: Request, view: Any) -> bool:
        if not (request.user and request.user.is_authenticated and request.user.is_active):
            raise exceptions.NotAuthenticated()
        if getattr(view, "detail", False):
            return True  # decided once the object is found (404 first)
        check_scope(request, view)
        if is_provider_staff(request.user):
            check_staff(request, view)
            return True
        roles = allowed_roles(request, view)
        if request.method in SAFE_METHODS and roles >= ALL_ROLES:
            return True  # a user without membership reads empty lists
        if not roles & set(roles_of(request).values()):
            raise exceptions.PermissionDenied(self._refusal(request, roles))
        return True

    def has_object_permission(self, request: Request, view: Any, obj: Any) -> bool:
        check_scope(request, view)
        if is_provider_staff(request.user):
            check_staff(request, view)
            return True
        roles = allowed_roles(request, view)
        held = view.roles_for_object(request, obj) if hasattr(view, "roles_for_object") else None
        if held is None:
            tenant_id = tenant_id_of(obj)
            role = roles_of(request).get(tenant_id) if tenant_id is not None else None
            held = {role} if role else set()
            if tenant_id is None and request.method in SAFE_METHODS:
                # Visible inventory (a node of one's lease, a site): reading is allowed.
                held = set(roles_of(request).values())
        if not roles & set(held):
            raise exceptions.PermissionDenied(self._refusal(request, roles))
        return True

    @staticmethod
    def _refusal(request: Request, roles: frozenset[str]) -> str:
        if not roles:
            return _("Only provider staff may do this.")
        names = ", ".join(str(Role(role).label) for role in sorted(roles) if role in ALL_ROLES)
        return _("This needs one of these roles in the tenant: %(roles)s.") % {"roles": names}
