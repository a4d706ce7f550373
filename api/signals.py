"""Tokens die with the standing that granted them: deactivating a user or removing one
of their memberships revokes every token they hold. Receivers, because both changes are
made in Django's own admin (the user form, the membership inline), which calls no
service of ours."""

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models.signals import post_delete, post_save

from api.tokens import revoke_all
from leases.models import Membership


def _user_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    if not instance.is_active:
        revoke_all(user_id=instance.pk)


def _membership_removed(sender: Any, instance: Membership, **kwargs: Any) -> None:
    revoke_all(user_id=instance.user_id)


def connect() -> None:
    post_save.connect(_user_saved, sender=get_user_model(), dispatch_uid="api-token-user")
    post_delete.connect(_membership_removed, sender=Membership, dispatch_uid="api-token-member")
