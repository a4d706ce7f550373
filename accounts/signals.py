"""Tokens die with the standing that granted them: every change of a user (activity, the
staff flag) or of a membership (added, role changed, moved, removed) revokes the tokens
held or issued by the people concerned, and those of the tenants concerned, whose standing
no longer holds (``accounts.services.revoke_lapsed``). Receivers, because these changes are made
in Django's own admin (the user form, the membership inline), which calls no service of
ours. Authentication checks the same standing on every request: a change these receivers
do not see (a raw UPDATE) still ends the token at its next use."""

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save, pre_save

from accounts.models import Membership
from accounts.services import revoke_lapsed


def _user_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if kwargs.get("created") or (fields is not None and set(fields) <= {"last_login"}):
        return  # a new user holds no token; a login changes no standing
    revoke_lapsed(user_ids=[instance.pk])


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    revoke_lapsed(orphaned=True)  # tokens they issued now have no issuer


def _membership_before(sender: Any, instance: Membership, **kwargs: Any) -> None:
    """Remember whose and which tenant's membership this row was, as it may be moved."""
    stored = (
        Membership.objects.filter(pk=instance.pk).values("user_id", "tenant_id").first()
        if instance.pk
        else None
    )
    instance._gpulease_before = stored  # type: ignore[attr-defined]


def _membership_changed(sender: Any, instance: Membership, **kwargs: Any) -> None:
    if kwargs.get("created"):
        return  # a new membership ends no standing
    users, tenants = {instance.user_id}, {instance.tenant_id}
    before = getattr(instance, "_gpulease_before", None)
    if before:
        users.add(before["user_id"])
        tenants.add(before["tenant_id"])
    revoke_lapsed(user_ids=users, tenant_ids=tenants)


def connect() -> None:
    user = get_user_model()
    post_save.connect(_user_saved, sender=user, dispatch_uid="api-token-user")
    post_delete.connect(_user_deleted, sender=user, dispatch_uid="api-token-user-gone")
    pre_save.connect(_membership_before, sender=Membership, dispatch_uid="api-token-member-pre")
    post_save.connect(_membership_changed, sender=Membership, dispatch_uid="api-token-member")
    post_delete.connect(
        _membership_changed, sender=Membership, dispatch_uid="api-token-member-gone"
    )
