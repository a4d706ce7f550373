"""A tenant's own settings, written by its own admins: the contacts that incident e-mail
goes to (``incidents.notifications``), the incident webhook's URL and its signing secret.

These are the tenant's statements, so only an active admin of the tenant who is not
provider staff writes them here (``accounts.selectors.require_tenant_admin``); provider staff
correct them in the admin, and that is recorded too (``record_change``). Each value is
checked by its model field: the e-mail with Django's validate_email, the phone with
``validate_phone``, the URL with URLValidator and ``common.egress.validate_webhook_url``
(public addresses only, the same check as before each delivery). Every write that changes
something records a TenantSettingsEvent: the tenant, who, when and the names of the fields
changed, never a value (a rotated secret is named ``webhook_secret``, nothing more).

A rotated secret is returned to the caller once; afterwards it is only ever shown masked
to the tenant (``Tenant.webhook_secret_for``). Deliveries from then on are signed with the
new secret, retries of earlier events included (each attempt is signed when it is made),
and for settings.WEBHOOK_SECRET_OVERLAP_HOURS with the replaced one too: two signatures
in ``webhook-signature``, as Standard Webhooks provides for rotation, so a receiver still
holding the old secret verifies until it is switched (``Tenant.replace_webhook_secret``)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, cast

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.selectors import require_tenant_admin
from common.locks import locking
from leases.models import Tenant, TenantSettingsEvent
from leases.models.tenants import new_webhook_secret

CONTACT_FIELDS = ("contact_name", "contact_email", "contact_phone")
WEBHOOK_FIELDS = ("webhook_url", "webhook_secret")
# The fields whose changes are recorded, whoever makes them (the admin records staff's).
SETTINGS_FIELDS = CONTACT_FIELDS + WEBHOOK_FIELDS

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def change_contacts(
    *,
    tenant: Tenant,
    user: Any,
    contact_name: str,
    contact_email: str,
    contact_phone: str,
    now: datetime | None = None,
) -> list[str]:
    """Set the three contacts (each may be empty); the names of those that changed."""
    require_tenant_admin(user, tenant, _("Only an admin of the tenant changes its contacts."))
    values = {
        "contact_name": contact_name,
        "contact_email": contact_email,
        "contact_phone": contact_phone,
    }
    return _write(tenant, user, _cleaned(tenant, values), now)


def set_webhook_url(
    *, tenant: Tenant, user: Any, url: str, now: datetime | None = None
) -> list[str]:
    """Set the webhook URL, or clear it with ""; ["webhook_url"] when it changed."""
    require_tenant_admin(
        user, tenant, _("Only an admin of the tenant changes its webhook endpoint.")
    )
    return _write(tenant, user, _cleaned(tenant, {"webhook_url": url}), now)


def rotate_webhook_secret(*, tenant: Tenant, user: Any, now: datetime | None = None) -> str:
    """A new signing secret, in force at once; returned this once to show the admin."""
    require_tenant_admin(
        user, tenant, _("Only an admin of the tenant rotates its webhook signing secret.")
    )
    secret = new_webhook_secret()
    at = now or timezone.now()
    with transaction.atomic():
        locked = locking(Tenant.objects).get(pk=tenant.pk)
        fields = locked.replace_webhook_secret(secret, at=at)
        locked.save(update_fields=[*fields, "updated_at"])
        record_change(tenant=locked, actor=user, fields=fields, now=at)
    for name in fields:
        setattr(tenant, name, getattr(locked, name))
    return secret


def record_change(
    *, tenant: Tenant, actor: Any, fields: list[str], now: datetime | None = None
) -> TenantSettingsEvent | None:
    """Record that ``actor`` changed ``fields`` of the tenant's settings (the others are
    not settings of this page and are left out); None when none of them is one."""
    named = [name for name in SETTINGS_FIELDS if name in fields]
    if not named:
        return None
    return TenantSettingsEvent.objects.create(
        tenant=tenant,
        actor=actor,
        actor_username=actor.get_username(),
        at=now or timezone.now(),
        fields=named,
    )


def _cleaned(tenant: Tenant, values: dict[str, str]) -> dict[str, str]:
    """Each value stripped and checked by its model field, else every reason by field."""
    cleaned: dict[str, str] = {}
    errors: dict[str, list[ValidationError]] = {}
    for name, raw in values.items():
        value = (raw or "").strip()
        if _CONTROL.search(value):
            errors[name] = [ValidationError(_("Control characters are not allowed here."))]
            continue
        try:
            model_field = cast(models.Field, Tenant._meta.get_field(name))
            cleaned[name] = model_field.clean(value, tenant)
        except ValidationError as error:
            errors[name] = error.error_list
    if errors:
        raise ValidationError(errors)
    return cleaned


def _write(tenant: Tenant, user: Any, values: dict[str, str], now: datetime | None) -> list[str]:
    with transaction.atomic():
        locked = locking(Tenant.objects).get(pk=tenant.pk)
        changed = [name for name, value in values.items() if getattr(locked, name) != value]
        if not changed:
            return []
        for name in changed:
            setattr(locked, name, values[name])
        locked.save(update_fields=[*changed, "updated_at"])
        record_change(tenant=locked, actor=user, fields=changed, now=now)
    for name in changed:
        setattr(tenant, name, values[name])
    return changed
