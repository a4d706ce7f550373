from decimal import Decimal

from django.db import models
from django.utils.translation import gettext_lazy as _

from common.querysets import TenantScopedQuerySet
from leases.choices import BillingMode, ProbeKind
from leases.models import Lease


class HourlyRollup(models.Model):
    """Every finished run of a lease and kind, counted per UTC hour of its slot, so that
    reports and billing never rescan raw runs. A late run recomputes only its hour.

    Verdict counts: passed and failed are measured samples; unknown are samples that should
    exist but measured nothing (probe failed, timed out, unreachable, unparsable, missed);
    excluded fell inside a maintenance window; informational had no rule to judge by.
    For link checks, the minute counts are per slot of every node together: available when
    every node's links passed, unavailable when any failed, unknown otherwise; degraded are
    the available minutes that a failed throughput sample covered."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="hourly_rollups", verbose_name=_("lease")
    )
    kind = models.CharField(_("kind"), max_length=16, choices=ProbeKind.choices)
    hour = models.DateTimeField(_("hour (UTC)"))
    passed = models.PositiveIntegerField(_("passed"), default=0)
    failed = models.PositiveIntegerField(_("failed"), default=0)
    unknown = models.PositiveIntegerField(_("unknown"), default=0)
    excluded = models.PositiveIntegerField(_("excluded (maintenance)"), default=0)
    informational = models.PositiveIntegerField(_("informational"), default=0)
    measured = models.PositiveIntegerField(_("samples with a figure"), default=0)
    sum_bps = models.DecimalField(
        _("sum of measured bit/s"), max_digits=30, decimal_places=0, default=0
    )
    min_bps = models.BigIntegerField(_("lowest bit/s"), null=True, blank=True)
    max_bps = models.BigIntegerField(_("highest bit/s"), null=True, blank=True)
    sum_latency_us = models.FloatField(_("sum of latencies (µs)"), default=0)
    available_minutes = models.PositiveIntegerField(_("available minutes"), default=0)
    unavailable_minutes = models.PositiveIntegerField(_("unavailable minutes"), default=0)
    unknown_minutes = models.PositiveIntegerField(_("unknown minutes"), default=0)
    # Of the available minutes, those a failed throughput sample covered, and those
    # minutes times their terms' degraded_weight (gpulease_verify.compliance).
    # db_default: rows written by SQL of their own (perf/bench_billing.py) get 0 too.
    degraded_minutes = models.PositiveIntegerField(_("degraded minutes"), default=0, db_default=0)
    degraded_weighted = models.DecimalField(
        _("degraded minutes counted as down"),
        max_digits=12,
        decimal_places=3,
        default=Decimal(0),
        db_default=Decimal(0),
    )
    computed_at = models.DateTimeField(_("computed at"), auto_now=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("hourly rollup")
        verbose_name_plural = _("hourly rollups")
        constraints = [
            models.UniqueConstraint(fields=["lease", "kind", "hour"], name="one_rollup_per_hour")
        ]

    def __str__(self) -> str:
        return f"{self.lease} {self.kind} {self.hour:%Y-%m-%d %H}:00Z"


class TrafficSample(models.Model):
    """Bytes the lease's nodes sent and received in one slot, ``[slot_at, slot_at +
    seconds)``: every node's tx (and rx) counter delta over its own interval (across wraps
    and resets), spread over the slots that interval covers (``gpulease_verify.traffic``).
    Stamped with the slot's START, so a sample belongs to the billing period its slot
    starts in: the 5-minute bandwidth samples of 95th-percentile billing (either
    direction) and the traffic of per-GB billing (bytes sent)."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="traffic_samples", verbose_name=_("lease")
    )
    slot_at = models.DateTimeField(_("slot"))
    seconds = models.PositiveIntegerField(_("seconds"))
    tx_bytes = models.DecimalField(_("bytes sent"), max_digits=30, decimal_places=0)
    # Null: stored before received bytes were metered (billing.ingest.recompute_traffic
    # fills it in again from the counters runs).
    rx_bytes = models.DecimalField(
        _("bytes received"), max_digits=30, decimal_places=0, null=True, blank=True
    )
    nodes = models.PositiveSmallIntegerField(_("nodes counted"))
    resets = models.PositiveSmallIntegerField(_("counter resets"), default=0)
    wraps = models.PositiveSmallIntegerField(_("counter wraps"), default=0)
    switch_nodes = models.PositiveSmallIntegerField(
        _("nodes metered at their switch"),
        default=0,
        help_text=_("Of the nodes counted, those whose bytes are their switch port's count."),
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("traffic sample")
        verbose_name_plural = _("traffic samples")
        constraints = [
            models.UniqueConstraint(fields=["lease", "slot_at"], name="one_traffic_sample_per_slot")
        ]

    def __str__(self) -> str:
        return f"{self.lease} {self.slot_at:%Y-%m-%d %H:%M} {self.tx_bytes} B"


class RunningFigure(models.Model):
    """A usage-billed lease's month so far, stored for ``/metrics``: what
    ``billing.running.month_to_date`` answers (the figures the API's usage endpoint and the
    lease page compute live), written by ``billing.running.refresh_running`` after ingest
    rewrote the lease's traffic samples of that month (a month of the tenant's calendar,
    by the slot a sample starts in). As of ``computed_at``: a 95th-percentile line is
    prorated by the elapsed share of the month, so its amount grows between refreshes."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="running_figures", verbose_name=_("lease")
    )
    period = models.CharField(_("period"), max_length=7)  # YYYY-MM, the tenant's calendar
    billing_mode = models.CharField(_("billing mode"), max_length=16, choices=BillingMode.choices)
    # The invoice line's quantity so far: GB sent (every per-GB part of the month), or the
    # 95th percentile so far in Mbit/s (the part of the terms version in force last).
    quantity = models.DecimalField(_("quantity"), max_digits=24, decimal_places=6)
    unit = models.CharField(_("unit"), max_length=8)
    p95_bps = models.DecimalField(
        _("95th percentile so far (bit/s)"),
        max_digits=30,
        decimal_places=3,
        null=True,
        blank=True,
    )
    slots_above_p95 = models.PositiveIntegerField(
        _("slots above the 95th percentile"), null=True, blank=True
    )
    samples = models.PositiveIntegerField(_("samples"), default=0)
    amount = models.DecimalField(_("amount so far"), max_digits=14, decimal_places=2)
    projected_amount = models.DecimalField(
        _("projected amount"), max_digits=14, decimal_places=2, null=True, blank=True
    )
    # The slot (start) of the newest sample counted.
    samples_through = models.DateTimeField(_("newest sample"), null=True, blank=True)
    computed_at = models.DateTimeField(_("computed at"))

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("running figure")
        verbose_name_plural = _("running figures")
        constraints = [
            models.UniqueConstraint(fields=["lease", "period"], name="one_running_figure_per_month")
        ]

    def __str__(self) -> str:
        return f"{self.lease} {self.period} {self.amount}"


class IngestCursor(models.Model):
    """How far the rollup job has read finished runs (by finished_at, then id)."""

    name = models.CharField(max_length=32, unique=True)
    finished_at = models.DateTimeField(null=True)
    run_id = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = _("ingest cursor")
        verbose_name_plural = _("ingest cursors")

    def __str__(self) -> str:
        return f"{self.name} at {self.finished_at} #{self.run_id}"
