import uuid

from django.db import models
from django.utils.translation import gettext_lazy as _

from leases.models import Lease, Node


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


class PendingWitness(models.Model):
    """A throughput batch that ran and released its nodes, waiting for its switch ports'
    settled reading before its runs are judged and recorded
    (``benchmarks.witness_settle``). Its runs stay ``running`` meanwhile; their outputs
    are stored already, and what the transport said of each is kept here."""

    batch = models.UUIDField(_("batch"), unique=True)
    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="+", verbose_name=_("lease")
    )
    due_at = models.DateTimeField(_("settled reading due at"), db_index=True)
    # hostname -> the witness port read (benchmarks.witness.WitnessPort's fields)
    ports = models.JSONField(_("switch ports"))
    # the readings so far, in order: before the first measurement, and between it and its
    # confirmation when there is one (hostname -> SwitchPortReading's fields)
    readings = models.JSONField(_("switch readings"))
    # one entry per measurement: run id -> the transport's state, error and finish time
    measurements = models.JSONField(_("measurements"))
    created_at = models.DateTimeField(_("created at"), auto_now_add=True)

    class Meta:
        verbose_name = _("pending switch witness")
        verbose_name_plural = _("pending switch witnesses")

    def __str__(self) -> str:
        return f"witness of {self.batch} due {self.due_at:%H:%M:%S}"
