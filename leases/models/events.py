from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from common.querysets import TenantScopedQuerySet
from leases.models.leases import Lease


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
