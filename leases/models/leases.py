from django.db import models
from django.utils.translation import gettext_lazy as _

from common.models import TimeStampedModel
from common.querysets import TenantScopedQuerySet
from leases.choices import LeaseStatus
from leases.models.inventory import Node
from leases.models.tenants import Tenant
from leases.validators import validate_reference


class LeaseQuerySet(TenantScopedQuerySet):
    def active(self) -> "LeaseQuerySet":
        return self.filter(status=LeaseStatus.ACTIVE)


class Lease(TimeStampedModel):
    """A customer's contract for a set of nodes over a period."""

    tenant = models.ForeignKey(
        Tenant, on_delete=models.PROTECT, related_name="leases", verbose_name=_("tenant")
    )
    reference = models.CharField(
        _("contract reference"),
        max_length=64,
        unique=True,
        validators=[validate_reference],
        help_text=_("Letters, digits, '.', '_' and '-', starting with a letter or digit."),
        error_messages={"unique": _("Another lease already uses this contract reference.")},
    )
    name = models.CharField(_("name"), max_length=200, blank=True)
    starts_at = models.DateTimeField(_("starts at"))
    ends_at = models.DateTimeField(
        _("ends at"), null=True, blank=True, help_text=_("Empty: until further notice.")
    )
    status = models.CharField(
        _("status"), max_length=16, choices=LeaseStatus.choices, default=LeaseStatus.DRAFT
    )
    notes = models.TextField(_("notes"), blank=True)
    probes_enabled = models.BooleanField(
        _("probes enabled"),
        default=True,
        help_text=_("Off: the scheduler leaves this lease's nodes alone (e.g. demo hosts)."),
    )

    objects = LeaseQuerySet.as_manager()
    tenant_path = "tenant"

    class Meta:
        verbose_name = _("lease")
        verbose_name_plural = _("leases")
        ordering = ["-starts_at", "reference"]
        permissions = [("transition_lease", _("Can activate, end or cancel leases"))]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__isnull=True)
                | models.Q(ends_at__gt=models.F("starts_at")),
                name="lease_ends_after_start",
                violation_error_message=_("A lease must end after it starts."),
            )
        ]
        indexes = [models.Index(fields=["tenant", "status"])]

    def __str__(self) -> str:
        return self.reference


class NodeAssignmentQuerySet(TenantScopedQuerySet):
    def overlapping(self, *, node_id: int, start, end) -> "NodeAssignmentQuerySet":  # type: ignore[no-untyped-def]
        """Live assignments of a node whose [from, until) meets [start, end)."""
        return self.filter(node_id=node_id).during(start, end)

    def during(self, start, end) -> "NodeAssignmentQuerySet":  # type: ignore[no-untyped-def]
        """Live assignments whose [from, until) meets [start, end) (``end`` None: open)."""
        qs = self.filter(void=False).filter(
            models.Q(assigned_until__isnull=True) | models.Q(assigned_until__gt=start)
        )
        if end is not None:
            qs = qs.filter(assigned_from__lt=end)
        return qs

    def in_force_at(self, at) -> "NodeAssignmentQuerySet":  # type: ignore[no-untyped-def]
        return self.filter(void=False, assigned_from__lte=at).filter(
            models.Q(assigned_until__isnull=True) | models.Q(assigned_until__gt=at)
        )


class NodeAssignment(TimeStampedModel):
    """A node in a lease over [assigned_from, assigned_until). A swap ends one and starts
    another, so history is kept. The database refuses a node in two live assignments that
    overlap in time (exclusion constraint on PostgreSQL, triggers on SQLite; see migration
    0002). A cancelled lease's assignments are void and block nothing."""

    lease = models.ForeignKey(
        Lease, on_delete=models.CASCADE, related_name="assignments", verbose_name=_("lease")
    )
    node = models.ForeignKey(
        Node, on_delete=models.PROTECT, related_name="assignments", verbose_name=_("node")
    )
    assigned_from = models.DateTimeField(_("assigned from"))
    assigned_until = models.DateTimeField(
        _("assigned until"), null=True, blank=True, help_text=_("Empty: until the lease ends.")
    )
    void = models.BooleanField(
        _("void"), default=False, help_text=_("Set when the lease is cancelled.")
    )

    objects = NodeAssignmentQuerySet.as_manager()
    tenant_path = "lease__tenant"

    class Meta:
        verbose_name = _("node assignment")
        verbose_name_plural = _("node assignments")
        ordering = ["lease", "assigned_from", "node"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(assigned_until__isnull=True)
                | models.Q(assigned_until__gt=models.F("assigned_from")),
                name="assignment_ends_after_start",
                violation_error_message=_("A node assignment must end after it starts."),
            )
        ]
        indexes = [models.Index(fields=["node", "assigned_from"])]

    def __str__(self) -> str:
        return f"{self.node} in {self.lease}"
