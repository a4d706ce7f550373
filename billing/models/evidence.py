"""What a customer brings: the raw output of their own measurement (evidence), and
disputes about a verdict, an incident or an invoice, with every step kept."""

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from benchmarks.choices import Verdict
from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from leases.models import Lease, LeaseTerms, Node


class EvidenceTool(models.TextChoices):
    """The tools a customer runs themselves (DOMAIN.md, "How a customer verifies")."""

    IPERF3 = "iperf3", "iperf3 (-J)"
    PERFTEST = "perftest", "perftest (ib_write_bw, ib_write_lat, ...)"
    NCCL_TESTS = "nccl-tests", "nccl-tests (all_reduce_perf, ...)"
    PING = "ping", "ping"


class DisputeState(models.TextChoices):
    OPEN = "open", _("open")
    ACCEPTED = "accepted", _("accepted")
    REJECTED = "rejected", _("rejected")


class Evidence(models.Model):
    """The raw output of a measurement a customer ran on their leased nodes, parsed by the
    probes' own parsers and judged against the terms in force when it was measured.
    Nothing here is ever edited: a new measurement is a new row."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="evidence", verbose_name=_("lease")
    )
    submitted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("submitted by"),
    )
    tool = models.CharField(_("tool"), max_length=16, choices=EvidenceTool.choices)
    nodes = models.ManyToManyField(
        Node, related_name="customer_evidence", verbose_name=_("nodes it ran on")
    )
    measured_at = models.DateTimeField(_("measured at"))
    raw_output = models.TextField(_("raw output"))
    raw_sha256 = models.CharField(_("raw output SHA-256"), max_length=64)
    parsed = models.JSONField(_("parsed result"))
    measured_bps = models.BigIntegerField(_("measured bandwidth (bit/s)"), null=True, blank=True)
    latency_us = models.FloatField(_("latency (µs)"), null=True, blank=True)
    terms = models.ForeignKey(
        LeaseTerms,
        on_delete=models.PROTECT,
        related_name="customer_evidence",
        verbose_name=_("terms in force"),
    )
    verdict = models.CharField(
        _("verdict"), max_length=8, choices=Verdict.choices, default=Verdict.NONE
    )
    rule = models.CharField(_("rule"), max_length=255, blank=True)
    verdict_reason = models.TextField(_("verdict reason"), blank=True)
    note = models.TextField(_("customer's note"), blank=True)
    created_at = models.DateTimeField(_("submitted at"), auto_now_add=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("customer evidence")
        verbose_name_plural = _("customer evidence")
        ordering = ["-measured_at", "-id"]
        indexes = [models.Index(fields=["lease", "-measured_at"], name="evidence_lease_measured")]

    def __str__(self) -> str:
        return f"{self.lease} {self.tool} @ {self.measured_at:%Y-%m-%d %H:%M}"


class Dispute(TimeStampedModel):
    """A tenant's objection to a probe run's verdict, an incident or an invoice, with the
    evidence it brings. The provider accepts it (with a credit that goes on the tenant's
    invoice for the month of acceptance) or rejects it with a reason. Every step is a
    DisputeEvent; the row itself only says where the dispute stands."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="disputes", verbose_name=_("lease")
    )
    probe_run = models.ForeignKey(
        "benchmarks.ProbeRun",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="disputes",
        verbose_name=_("disputed probe run"),
        db_constraint=False,  # runs are partitioned (common.partitions)
    )
    incident = models.ForeignKey(
        "incidents.Incident",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="disputes",
        verbose_name=_("disputed incident"),
    )
    invoice = models.ForeignKey(
        "billing.Invoice",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="disputes",
        verbose_name=_("disputed invoice"),
    )
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("opened by"),
    )
    reason = models.TextField(_("reason"))
    evidence = models.ManyToManyField(
        Evidence, blank=True, related_name="disputes", verbose_name=_("evidence")
    )
    state = models.CharField(
        _("state"), max_length=8, choices=DisputeState.choices, default=DisputeState.OPEN
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("decided by"),
    )
    decided_at = models.DateTimeField(_("decided at"), null=True, blank=True)
    decision_reason = models.TextField(_("provider's reason"), blank=True)
    credit_cny = models.DecimalField(
        _("credit (¥)"), max_digits=14, decimal_places=2, default=Decimal("0.00")
    )
    credit_period = models.CharField(
        _("credited on the invoice of (YYYY-MM)"),
        max_length=7,
        blank=True,
        help_text=_("The month of acceptance, in the tenant's time zone."),
    )

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("dispute")
        verbose_name_plural = _("disputes")
        ordering = ["-created_at", "-id"]
        permissions = [
            ("accept_dispute", _("Can accept disputes, with a credit")),
            ("reject_dispute", _("Can reject disputes")),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(credit_cny__gte=0),
                name="dispute_credit_not_negative",
                violation_error_message=_("A dispute's credit cannot be negative."),
            ),
            models.CheckConstraint(
                condition=~models.Q(state="accepted") | ~models.Q(credit_period=""),
                name="accepted_dispute_has_credit_period",
                violation_error_message=_("An accepted dispute names the invoice month."),
            ),
        ]
        indexes = [
            models.Index(fields=["state", "credit_period"], name="dispute_state_credit_period")
        ]

    def __str__(self) -> str:
        return f"dispute #{self.pk} on {self.lease} ({self.state})"


class DisputeEvent(models.Model):
    """One step of a dispute: opened, evidence attached, accepted, rejected."""

    class Action(models.TextChoices):
        OPENED = "opened", _("opened")
        EVIDENCE_ADDED = "evidence_added", _("evidence attached")
        ACCEPTED = "accepted", _("accepted")
        REJECTED = "rejected", _("rejected")

    dispute = models.ForeignKey(
        Dispute, on_delete=models.CASCADE, related_name="events", verbose_name=_("dispute")
    )
    at = models.DateTimeField(_("at"))
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("actor"),
    )
    action = models.CharField(_("action"), max_length=16, choices=Action.choices)
    reason = models.TextField(_("reason"), blank=True)
    detail = models.JSONField(_("detail"), default=dict, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "dispute__lease__tenant"

    class Meta:
        verbose_name = _("dispute event")
        verbose_name_plural = _("dispute events")
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.dispute} {self.action} at {self.at:%Y-%m-%d %H:%M}"
