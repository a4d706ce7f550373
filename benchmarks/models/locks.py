import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from leases.models import Node


class NodeLock(models.Model):
    """A heavy probe (bandwidth, latency, collective) holds its nodes exclusively. One row
    per held node; the unique node column is the lock. A lock past expires_at belongs to a
    worker that died and may be taken over."""

    node = models.OneToOneField(
        Node, on_delete=models.CASCADE, related_name="probe_lock", verbose_name=_("node")
    )
    batch = models.UUIDField(_("batch"), default=uuid.uuid4, db_index=True)
    acquired_at = models.DateTimeField(_("acquired at"))
    expires_at = models.DateTimeField(_("expires at"))

    class Meta:
        verbose_name = _("node lock")
        verbose_name_plural = _("node locks")

    def __str__(self) -> str:
        return f"{self.node} held by {self.batch}"
