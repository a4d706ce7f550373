from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from common.querysets import TenantScopedQuerySet
from leases.models.leases import Lease
from leases.models.tenants import Tenant


class LeaseEvent(models.Model):
    """Audit trail: every change a service makes to a lease, who made it and when."""

    class Action(models.TextChoices):
        CREATED = "created", _("created")
        ACTIVATED = "activated", _("activated")
        ENDED = "ended", _("ended")
        CANCELLED = "cancelled", _("cancelled")
        AMENDED = "amended", _("terms amended")
        AMENDMENT_PROPOSED = "amendment_proposed", _("retroactive amendment proposed")
        NODE_ASSIGNED = "node_assigned", _("node assigned")
        NODE_RELEASED = "node_released", _("node released")
        RERATED = "rerated", _("re-rated under corrected terms")

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="events", verbose_name=_("lease")
    )
    at = models.DateTimeField(_("at"), auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("actor"),
    )
    action = models.CharField(_("action"), max_length=32, choices=Action.choices)
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("lease event")
        verbose_name_plural = _("lease events")
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.lease} {self.get_action_display()}"


class TenantSettingsEvent(models.Model):
    """Audit trail of a tenant's own settings (contacts, webhook): who changed which fields
    and when (``leases.tenant_settings``). Names the fields, never their values: a rotated
    signing secret appears here only as ``webhook_secret``."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="settings_events", verbose_name=_("tenant")
    )
    at = models.DateTimeField(_("at"), db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("actor"),
    )
    # Kept when the user is deleted, as TenantKey keeps who registered a key.
    actor_username = models.CharField(_("actor (username)"), max_length=150)
    fields = models.JSONField(_("fields changed"), default=list)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("tenant settings change")
        verbose_name_plural = _("tenant settings changes")
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.tenant}: {', '.join(self.fields)} ({self.actor_username})"
