"""What every admin of the project shares: stamps shown read-only, and the permission each
admin action declares.

Every action declares ``@admin.action(permissions=[...])``: a standard one ("change",
"delete") or a name ``x`` whose ``has_x_permission`` the ModelAdmin defines with
``requires("app.codename")``. Django offers an action only to a user who passes every
check it names (an action with none would be offered to anybody who can view the list:
tests/test_staff_permissions.py fails on such an action)."""

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import admin
from django.db import models

from common.models import PartitionArchive


def requires(permission: str) -> Callable[[Any, Any], bool]:
    """A ``has_<x>_permission`` method that asks for one Django permission
    ("app_label.codename"), which it keeps as ``.permission`` for the tests to read."""

    def check(modeladmin: Any, request: Any) -> bool:
        return bool(request.user.has_perm(permission))

    check.permission = permission  # type: ignore[attr-defined]
    return check


# The actions of other packages' admins, with the permission each needs (none of them
# declares one): declared by declare_third_party_actions() once every admin is registered.
THIRD_PARTY_ACTIONS = {
    "django_celery_beat.PeriodicTask": {
        "enable_tasks": "change",
        "disable_tasks": "change",
        "toggle_tasks": "change",
        "run_tasks": "change",
    },
    "axes.AccessAttempt": {"cleanup_expired_attempts": "delete"},
}


def _declaring(action: Callable, permission: str) -> Callable:
    @functools.wraps(action)  # its name and description
    def declared(modeladmin: Any, request: Any, queryset: Any) -> Any:
        return action(modeladmin, request, queryset)

    declared.allowed_permissions = (permission,)  # type: ignore[attr-defined]
    return declared


def declare_third_party_actions(site: admin.AdminSite = admin.site) -> None:
    """Register each admin of THIRD_PARTY_ACTIONS again as a subclass whose actions declare
    their permissions (called from CommonConfig.ready, after the admin's autodiscovery)."""
    for model, model_admin in list(site._registry.items()):
        wanted = THIRD_PARTY_ACTIONS.get(model._meta.label)
        if wanted is None:
            continue
        base = type(model_admin)
        actions = []
        for listed in base.actions or ():
            action = getattr(base, listed) if isinstance(listed, str) else listed
            needed = wanted.get(action.__name__)  # a new one stays undeclared: a test fails
            actions.append(_declaring(action, needed) if needed else action)
        site.unregister(model)
        site.register(model, type(f"Declared{base.__name__}", (base,), {"actions": actions}))


class StampedAdmin(admin.ModelAdmin):
    """Created/updated stamps shown, never edited."""

    stamp_fields = ("created_at", "updated_at")
    # A URL typed without a scheme is https (Django 6's default, chosen now).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return tuple(super().get_readonly_fields(request, obj)) + self.stamp_fields


class ReadOnlyAdmin(admin.ModelAdmin):
    """Measurements and computed figures: shown, never added or edited here."""

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(PartitionArchive)
class PartitionArchiveAdmin(admin.ModelAdmin):
    """Months archived to files (``manage.py partitions``): read-only, never deleted here."""

    list_display = ("month", "path", "size_bytes", "archived_at", "restored_at", "seconds")
    readonly_fields = (
        "month",
        "path",
        "sha256",
        "size_bytes",
        "rows",
        "archived_at",
        "seconds",
        "restored_at",
    )

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False
