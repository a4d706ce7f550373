from django.conf import settings
from django.db import models
from django.utils.translation import gettext_lazy as _

from common.querysets import TenantScopedQuerySet
from incidents.choices import (
    FabricIncidentKind,
    IncidentSource,
    IncidentState,
    MeteringIncidentKind,
)
from leases.choices import ProbeKind
from leases.models import Lease, LeaseTerms


class Incident(models.Model):
    """A breach that lasted: K violating samples in a row (K from the terms) of one lease,
    kind and target open it; the next passing sample closes it. The runs that prove it are
    linked, so the customer can open the raw evidence behind every figure."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="incidents", verbose_name=_("lease")
    )
    kind = models.CharField(
        _("kind"),
        max_length=16,
        choices=[*ProbeKind.choices, *FabricIncidentKind.choices, *MeteringIncidentKind.choices],
    )
    target = models.CharField(_("affected nodes or pair"), max_length=255)
    # a probe pattern, "witness", or a fabric health rule (gpulease_verify.health.RULE_SETS)
    pattern = models.CharField(_("pattern"), max_length=32)
    state = models.CharField(
        _("state"), max_length=8, choices=IncidentState.choices, default=IncidentState.OPEN
    )
    opened_at = models.DateTimeField(_("started at"))
    closed_at = models.DateTimeField(_("ended at"), null=True, blank=True)
    violations = models.PositiveIntegerField(_("violating samples"), default=0)
    worst_bps = models.BigIntegerField(_("worst bandwidth (bit/s)"), null=True, blank=True)
    worst_latency_us = models.FloatField(_("worst latency (µs)"), null=True, blank=True)
    rule = models.CharField(_("rule"), max_length=255)
    detail = models.TextField(_("detail"), blank=True)
    # A metering gap's counter difference, billed by time over [opened_at, closed_at).
    gap_bytes = models.DecimalField(
        _("bytes billed by time over the gap"),
        max_digits=30,
        decimal_places=0,
        null=True,
        blank=True,
    )
    terms = models.ForeignKey(
        LeaseTerms, on_delete=models.PROTECT, related_name="incidents", verbose_name=_("terms")
    )
    runs = models.ManyToManyField(
        "benchmarks.ProbeRun",
        related_name="incidents",
        verbose_name=_("evidence runs"),
        db_constraint=False,  # runs are partitioned (common.partitions)
    )
    # Time to repair (incidents.repair): the fault is ``opened_at``, the resolution
    # ``closed_at`` (both from evidence); acknowledging and mitigating are the provider's
    # own statements, each with who made it.
    acknowledged_at = models.DateTimeField(_("acknowledged at"), null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("acknowledged by"),
    )
    mitigated_at = models.DateTimeField(_("mitigated at"), null=True, blank=True)
    mitigated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        verbose_name=_("mitigated by"),
    )
    # A database default too: a worker still on the previous release inserts incidents
    # without this column during a rolling deploy.
    repair_note = models.TextField(_("repair note"), blank=True, default="", db_default="")
    # Who opened and who closed it (incidents.services): the cause is the source (ingest,
    # telemetry, witness, Alertmanager, or a person: manual), the actor the person's user
    # name or, for a system source, the source itself. Database defaults too: a worker
    # still on the previous release inserts incidents without these columns.
    source = models.CharField(
        _("opened by (source)"),
        max_length=16,
        choices=IncidentSource.choices,
        blank=True,
        default="",
        db_default="",
    )
    opened_by = models.CharField(
        _("opened by"), max_length=150, blank=True, default="", db_default=""
    )
    closed_source = models.CharField(
        _("closed by (source)"),
        max_length=16,
        choices=IncidentSource.choices,
        blank=True,
        default="",
        db_default="",
    )
    closed_by = models.CharField(
        _("closed by"), max_length=150, blank=True, default="", db_default=""
    )
    notified_open_at = models.DateTimeField(_("opening notified at"), null=True, blank=True)
    notified_close_at = models.DateTimeField(_("closing notified at"), null=True, blank=True)

    objects = TenantScopedQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        # The table billing made: the model moved to this app, its rows did not.
        db_table = "billing_incident"
        verbose_name = _("incident")
        verbose_name_plural = _("incidents")
        ordering = ["-opened_at"]
        permissions = [
            ("acknowledge_incident", _("Can acknowledge incidents")),
            ("mitigate_incident", _("Can mark incidents mitigated")),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["lease", "kind", "pattern", "target"],
                condition=models.Q(state="open"),
                name="one_open_incident_per_target",
            )
        ]
        indexes = [models.Index(fields=["lease", "opened_at"], name="incident_lease_opened")]

    def __str__(self) -> str:
        return f"{self.lease} {self.kind} {self.target} from {self.opened_at:%Y-%m-%d %H:%M}"
