"""What the passive telemetry and the switch-side witness store.

A poll of a node is not a probe run: it prints a few kilobytes every 30 s, so its text is
not kept. What is kept is compact: per port and poll interval, the counters that moved
and how the link behaved (``gpulease_verify.telemetry.PortSample``), which is all the
health rules read; and per switch port, the counters the switch itself reports."""

from django.db import models
from django.utils.translation import gettext_lazy as _

from common.querysets import TenantScopedQuerySet
from leases.models import Lease, Node, Switch


class TelemetryBatch(models.Model):
    """What one telemetry poll stored for one lease (its nodes' port intervals and the
    switch readings that witness them), as one link of the lease's hash chain
    (``gpulease_verify.chain.telemetry_content``)."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="telemetry_batches", verbose_name=_("lease")
    )
    at = models.DateTimeField(_("polled at"))
    chain_index = models.PositiveIntegerField(_("chain index"), null=True, blank=True)
    prev_hash = models.CharField(_("previous link hash"), max_length=64, blank=True)
    link_hash = models.CharField(_("link hash"), max_length=64, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("telemetry batch")
        verbose_name_plural = _("telemetry batches")
        ordering = ["lease", "chain_index"]
        constraints = [
            models.UniqueConstraint(
                fields=["lease", "chain_index"], name="one_telemetry_batch_per_chain_index"
            )
        ]
        indexes = [models.Index(fields=["lease", "at"], name="telemetry_batch_lease_at")]

    def __str__(self) -> str:
        return f"{self.lease} telemetry @ {self.at:%Y-%m-%d %H:%M:%S}"


class PortSample(models.Model):
    """One port of one node over one poll interval ``[at - seconds, at)``."""

    node = models.ForeignKey(
        Node, on_delete=models.CASCADE, related_name="telemetry_samples", verbose_name=_("node")
    )
    batch = models.ForeignKey(
        TelemetryBatch,
        on_delete=models.CASCADE,
        related_name="samples",
        null=True,
        blank=True,
        verbose_name=_("batch"),
    )
    port = models.CharField(_("port"), max_length=48)
    at = models.DateTimeField(_("polled at"))
    seconds = models.FloatField(_("interval (s)"))
    up = models.BooleanField(_("link up"), null=True)
    down_cycles = models.PositiveSmallIntegerField(_("down-then-up cycles"), default=0)
    reset = models.BooleanField(
        _("counters reset"), default=False, help_text=_("A reboot or a counter reset.")
    )
    deltas = models.JSONField(_("counter increases"), default=dict, blank=True)
    # Set only when the port was up below the rate the inventory expects of it.
    rate_gbps = models.FloatField(_("rate (Gb/s)"), null=True, blank=True)
    expected_gbps = models.FloatField(_("expected rate (Gb/s)"), null=True, blank=True)
    saturated = models.JSONField(
        _("saturated counters"),
        default=list,
        blank=True,
        help_text=_("InfiniBand counters at their maximum at this poll: they count no more."),
    )
    disputed = models.BooleanField(
        _("disputed by the switch"),
        default=False,
        help_text=_("The switch port never saw the down this interval reports."),
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "node__assignments__lease__tenant"
    tenant_path_is_many = True

    class Meta:
        verbose_name = _("telemetry sample")
        verbose_name_plural = _("telemetry samples")
        ordering = ["node", "port", "at"]
        constraints = [
            models.UniqueConstraint(fields=["node", "port", "at"], name="one_sample_per_poll")
        ]

    def __str__(self) -> str:
        return f"{self.node_id} {self.port} until {self.at:%Y-%m-%d %H:%M:%S}"


class NodeReading(models.Model):
    """A node's latest full reading, the base of its next interval's deltas; or, when its
    latest poll failed or printed something unreadable, why (the raw text kept)."""

    node = models.OneToOneField(
        Node,
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="telemetry_reading",
        verbose_name=_("node"),
    )
    at = models.DateTimeField(_("read at"), null=True, blank=True)
    snapshot = models.JSONField(_("snapshot"), null=True, blank=True)
    # Quiet intervals not stored yet, per port (PortSample JSON): they are merged into one
    # row every TELEMETRY_QUIET_ROW_S, or stored as they are when something moves.
    pending = models.JSONField(_("quiet intervals not yet stored"), default=dict, blank=True)
    # The witness port's latest switch reading: the base of the next interval's check.
    switch = models.JSONField(_("latest switch reading"), null=True, blank=True)
    # A poll in progress holds the node until then: two overlapping cycles never read it
    # twice (a cycle that died leaves it to the next one after that).
    claimed_until = models.DateTimeField(_("claimed until"), null=True, blank=True)
    failed_at = models.DateTimeField(_("last failure at"), null=True, blank=True)
    error = models.TextField(_("last error"), blank=True)
    raw_output = models.TextField(_("raw output of the failed poll"), blank=True)

    class Meta:
        verbose_name = _("node reading")
        verbose_name_plural = _("node readings")

    def __str__(self) -> str:
        return f"telemetry of node {self.node_id}"


class SwitchReading(models.Model):
    """One switch port's IF-MIB counters as the switch reported them over SNMP: the
    witness the tenant does not control."""

    switch = models.ForeignKey(
        Switch, on_delete=models.CASCADE, related_name="readings", verbose_name=_("switch")
    )
    batch = models.ForeignKey(
        TelemetryBatch,
        on_delete=models.CASCADE,
        related_name="switch_readings",
        null=True,
        blank=True,
        verbose_name=_("batch"),
    )
    if_name = models.CharField(_("port (ifName)"), max_length=64)
    at = models.DateTimeField(_("read at"))
    in_octets = models.DecimalField(_("ifHCInOctets"), max_digits=20, decimal_places=0)
    out_octets = models.DecimalField(_("ifHCOutOctets"), max_digits=20, decimal_places=0)
    oper_up = models.BooleanField(_("ifOperStatus up"))
    in_errors = models.BigIntegerField(_("ifInErrors"))
    out_discards = models.BigIntegerField(_("ifOutDiscards"))
    # The link-state witness of the node's port (gpulease_verify.witness.link_block):
    # ifLastChange and sysUpTime now and at the previous reading. Null before it existed.
    link = models.JSONField(_("link-state witness"), null=True, blank=True)

    class Meta:
        verbose_name = _("switch reading")
        verbose_name_plural = _("switch readings")
        ordering = ["switch", "if_name", "at"]
        indexes = [models.Index(fields=["switch", "if_name", "at"], name="switch_reading_port_at")]

    def __str__(self) -> str:
        return f"{self.switch_id} {self.if_name} at {self.at:%Y-%m-%d %H:%M:%S}"


class PortClearance(models.Model):
    """An operator cleared a port's sticky flap (and drop) findings after inspecting it,
    as gpud's set-healthy does: the rules start afresh from ``at``. Recorded in a
    telemetry batch of the lease's chain, so an auditor recomputes the same findings."""

    batch = models.ForeignKey(
        TelemetryBatch,
        on_delete=models.CASCADE,
        related_name="clearances",
        verbose_name=_("batch"),
    )
    node = models.ForeignKey(
        Node, on_delete=models.CASCADE, related_name="port_clearances", verbose_name=_("node")
    )
    port = models.CharField(_("port"), max_length=48)
    at = models.DateTimeField(_("cleared at"))
    by = models.CharField(_("cleared by"), max_length=150)
    reason = models.TextField(_("reason"))

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "batch__lease__tenant"

    class Meta:
        verbose_name = _("port clearance")
        verbose_name_plural = _("port clearances")
        ordering = ["node", "port", "at"]
        indexes = [models.Index(fields=["node", "port", "at"], name="port_clearance_at")]

    def __str__(self) -> str:
        return f"{self.node_id} {self.port} cleared at {self.at:%Y-%m-%d %H:%M:%S}"
