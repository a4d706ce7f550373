"""Reads of lease data. Views and other apps read through these, never raw managers."""

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from django.db.models import Count, Exists, Q, QuerySet
from django.utils.translation import gettext as _

from common.querysets import is_provider_staff
from gpulease_verify.units import plain
from leases.choices import LeaseStatus, SwitchRole
from leases.contract_rules import MULTI_NODE_FLOOR_GBPS
from leases.models import (
    Fabric,
    Lease,
    LeaseTerms,
    NicPort,
    Node,
    NodeAssignment,
    Site,
    Switch,
    Tenant,
    TenantKey,
    TenantLink,
    TenantSettingsEvent,
    TermsAmendment,
)

if TYPE_CHECKING:
    from common.archives import ArchivedMonth


def terms_in_force(*, lease: Lease, at: datetime) -> LeaseTerms | None:
    """Which terms were in force for this lease at instant ``at``."""
    return LeaseTerms.objects.in_force(lease.pk, at)


class Effective(Protocol):
    """A terms version as far as "in force at t" reads it (a LeaseTerms, or a lighter
    row of it: the dispatcher's)."""

    @property
    def effective_from(self) -> datetime: ...


Version = TypeVar("Version", bound=Effective)


class TermsTimeline(Generic[Version]):
    """All versions of a lease's terms, for answering "in force at t" for many samples
    without a query each."""

    def __init__(self, versions: Sequence[Version]):
        self._versions = sorted(versions, key=lambda terms: terms.effective_from)
        self._starts = [terms.effective_from for terms in self._versions]

    @classmethod
    def for_lease(cls, lease: Lease) -> "TermsTimeline[LeaseTerms]":
        return TermsTimeline(list(LeaseTerms.objects.filter(lease=lease)))

    def at(self, instant: datetime) -> Version | None:
        index = bisect_right(self._starts, instant)
        return self._versions[index - 1] if index else None

    def during(self, start: datetime, end: datetime) -> list[Version]:
        """The versions in force at some instant of ``[start, end)``, in order: the one
        in force at ``start`` (if any), then each that takes effect inside."""
        first = self.at(start)
        later = [terms for terms in self._versions if start < terms.effective_from < end]
        return ([first] if first is not None else []) + later

    def __iter__(self) -> Iterator[Version]:
        return iter(self._versions)


def assignments_in_force(*, lease: Lease, at: datetime) -> QuerySet[NodeAssignment]:
    return lease.assignments.in_force_at(at).select_related("node")


def lease_node_count(lease: Lease) -> int:
    """Distinct nodes the lease holds at any time (history included, void excluded)."""
    return lease.assignments.filter(void=False).values("node").distinct().count()


def contract_warnings(*, lease: Lease, terms: LeaseTerms | None = None) -> list[str]:
    """Advice, not refusals: sentences an operator should read before signing."""
    warnings: list[str] = []
    versions = [terms] if terms is not None else list(lease.terms.all())
    if lease_node_count(lease) > 1:
        for version in versions:
            if version.contracted_bandwidth_gbps < MULTI_NODE_FLOOR_GBPS:
                warnings.append(
                    _(
                        "Terms version %(v)s contracts %(bw)s Gbps for a multi-node lease: "
                        "below 25 Gbps, distributed training will wait on the network."
                    )
                    % {"v": version.version, "bw": plain(version.contracted_bandwidth_gbps)}
                )
    return warnings


def sites_visible_to(user) -> QuerySet[Site]:  # type: ignore[no-untyped-def]
    """Provider staff see every site; a tenant member sees the sites of their leases' nodes."""
    if is_provider_staff(user):
        return Site.objects.all()
    return Site.objects.filter(
        pk__in=Node.objects.visible_to(user).values("leaf_switch__fabric__site")
    )


def fabrics_visible_to(user) -> QuerySet[Fabric]:  # type: ignore[no-untyped-def]
    """Provider staff see every fabric; a tenant member sees the fabrics of their leases'
    nodes."""
    if is_provider_staff(user):
        return Fabric.objects.all()
    return Fabric.objects.filter(pk__in=Node.objects.visible_to(user).values("leaf_switch__fabric"))


def archived_names(archived: "ArchivedMonth") -> dict[str, Any]:
    """A month archive's names for what its runs' hashed content names outside their rows
    (``common.archives``; registered in leases.apps): each lease's reference, and each terms
    version's number, link index and hash (by id), so that an auditor recomputes every run's
    hash from the archive alone."""
    named = Lease.objects.filter(pk__in=archived.lease_ids).values_list("pk", "reference")
    references = {str(pk): reference for pk, reference in named}
    archived.cursor.execute(
        f"SELECT DISTINCT terms_id FROM {archived.runs} WHERE terms_id IS NOT NULL"
    )
    versions = LeaseTerms.objects.filter(pk__in=[row[0] for row in archived.cursor.fetchall()])
    terms = {
        str(pk): {"version": version, "chain_index": index, "terms_hash": digest}
        for pk, version, index, digest in versions.order_by("pk").values_list(
            "pk", "version", "chain_index", "terms_hash"
        )
    }
    return {"references": references, "terms": terms}


# --- read by billing, benchmarks, telemetry, demo ---


def lease_with_tenant(*, pk: int) -> Lease:
    """The lease ``pk`` with its tenant (Lease.DoesNotExist when there is none)."""
    return Lease.objects.select_related("tenant").get(pk=pk)


def lease_row(*, pk: int) -> QuerySet[Lease]:
    """The lease ``pk`` as a lazy QuerySet (callers ``get`` it, or lock it: ``common.locks``)."""
    return Lease.objects.filter(pk=pk)


def leases_among(*, ids: Any) -> QuerySet[Lease]:
    """The leases whose pk is among ``ids`` (a list or a subquery)."""
    return Lease.objects.filter(pk__in=ids)


def leases_with_reference(*, reference: str) -> QuerySet[Lease]:
    """The lease with this contract reference, as a lazy QuerySet (empty when none)."""
    return Lease.objects.filter(reference=reference)


def every_lease_of(*, tenant: Tenant) -> QuerySet[Lease]:
    """The tenant's leases, any status, with their tenant (unordered)."""
    return Lease.objects.filter(tenant=tenant).select_related("tenant")


def leases_overlapping(
    *, statuses: Iterable[str], start: datetime, end: datetime, tenant: Tenant | None = None
) -> QuerySet[Lease]:
    """The leases in ``statuses`` (of ``tenant`` when given) that overlap [start, end)."""
    filters: dict[str, Any] = {"status__in": statuses, "starts_at__lt": end}
    if tenant is not None:
        filters["tenant"] = tenant
    return Lease.objects.filter(**filters).filter(Q(ends_at__isnull=True) | Q(ends_at__gt=start))


def probed_leases(*, now: datetime, closing: Q) -> QuerySet[Lease]:
    """The leases with probes on that have started: active and not ended at ``now``, or
    matching ``closing`` (the dispatcher's leases owed a closing reading)."""
    return Lease.objects.filter(probes_enabled=True, starts_at__lte=now).filter(
        Q(status=LeaseStatus.ACTIVE) & (Q(ends_at__isnull=True) | Q(ends_at__gt=now)) | closing
    )


def telemetry_leases(*, now: datetime) -> QuerySet[Lease]:
    """The active leases with probes on that have started and not ended at ``now``, with
    their tenants."""
    return (
        Lease.objects.active()
        .filter(probes_enabled=True, starts_at__lte=now)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=now))
        .select_related("tenant")
    )


def active_leases_without_probes() -> QuerySet[Lease]:
    """The active leases whose probes are off (the demo's), as a lazy QuerySet."""
    return Lease.objects.filter(status=LeaseStatus.ACTIVE, probes_enabled=False)


def terms_of(*, lease: Lease) -> QuerySet[LeaseTerms]:
    """Every terms version of the lease (unordered)."""
    return LeaseTerms.objects.filter(lease=lease)


def terms_of_leases(*, lease_ids: Iterable[int]) -> QuerySet[LeaseTerms]:
    """Every terms version of these leases (unordered)."""
    return LeaseTerms.objects.filter(lease_id__in=lease_ids)


def terms_by_pk(*, pks: Iterable[int]) -> dict[int, LeaseTerms]:
    """Terms versions by pk (those that exist among ``pks``)."""
    return LeaseTerms.objects.in_bulk(pks)


def terms_in_force_for(*, lease_id: int, at: datetime) -> LeaseTerms | None:
    """``terms_in_force`` by the lease's id: the version in force at ``at``, or None."""
    return LeaseTerms.objects.in_force(lease_id, at)


def first_pending_amendment(*, lease: Lease, before: datetime) -> TermsAmendment | None:
    """The earliest pending retroactive amendment of the lease taking effect before
    ``before``, or None."""
    return (
        TermsAmendment.objects.filter(
            lease=lease, status=TermsAmendment.Status.PENDING, effective_from__lt=before
        )
        .order_by("effective_from")
        .first()
    )


def node_ids_ever_assigned(*, lease: Lease) -> set[int]:
    """The ids of every node ever assigned to the lease (void assignments included)."""
    return set(NodeAssignment.objects.filter(lease=lease).values_list("node_id", flat=True))


def _by_start_and_host(rows: QuerySet[NodeAssignment]) -> QuerySet[NodeAssignment]:
    return rows.select_related("node").order_by("assigned_from", "node__hostname", "pk")


def assignment_history(*, lease: Lease) -> QuerySet[NodeAssignment]:
    """Every assignment of the lease (void ones too), with its node, by start and host."""
    return _by_start_and_host(NodeAssignment.objects.filter(lease=lease))


def live_assignments(*, lease_id: int) -> QuerySet[NodeAssignment]:
    """The lease's assignments that are not void, with their nodes, by start and host."""
    return _by_start_and_host(NodeAssignment.objects.filter(lease_id=lease_id, void=False))


def live_assignments_of_leases(*, lease_ids: Iterable[int]) -> QuerySet[NodeAssignment]:
    """``live_assignments`` of many leases in one query."""
    return _by_start_and_host(NodeAssignment.objects.filter(lease_id__in=lease_ids, void=False))


def live_assignments_meeting(
    *, lease_ids: Iterable[int], start: datetime, end: datetime
) -> QuerySet[NodeAssignment]:
    """The leases' live assignments in force at some instant of [start, end] (from at
    most ``end``, until after ``start``), unordered."""
    return NodeAssignment.objects.filter(
        void=False, lease_id__in=lease_ids, assigned_from__lte=end
    ).filter(Q(assigned_until__isnull=True) | Q(assigned_until__gt=start))


def active_assignment_of(*, node: Node, at: datetime) -> NodeAssignment | None:
    """The assignment of the node in force at ``at`` under an active lease, with its
    lease, or None."""
    return (
        NodeAssignment.objects.in_force_at(at)
        .filter(node=node, lease__status=LeaseStatus.ACTIVE)
        .select_related("lease")
        .first()
    )


def lease_nodes_at(*, lease_ids: Iterable[int], at: datetime) -> dict[int, list[Node]]:
    """The nodes each lease holds at ``at``, with switch, fabric and site: two queries
    whatever the number of leases (the other is ports_of)."""
    held: dict[int, list[Node]] = defaultdict(list)
    assignments = (
        NodeAssignment.objects.in_force_at(at)
        .filter(lease_id__in=list(lease_ids))
        .select_related("node__leaf_switch__fabric__site")
        .order_by("node__hostname")
    )
    for assignment in assignments:
        held[assignment.lease_id].append(assignment.node)
    return held


def nodes_of_lease(*, lease: Lease) -> list[Node]:
    """The nodes of the lease's live assignments (any time), with leaf and fabric, by
    hostname."""
    return list(
        Node.objects.filter(assignments__lease=lease, assignments__void=False)
        .select_related("leaf_switch__fabric")
        .order_by("hostname")
        .distinct()
    )


def nodes_with_leaf(*, pks: Iterable[int]) -> QuerySet[Node]:
    """The nodes whose pk is among ``pks``, with their leaf switch."""
    return Node.objects.filter(pk__in=pks).select_related("leaf_switch")


def nodes_named(*, hostnames: Iterable[str]) -> QuerySet[Node]:
    """The nodes with these hostnames."""
    return Node.objects.filter(hostname__in=hostnames)


def ports_of(*, nodes: Iterable[Node]) -> list[NicPort]:
    """The NIC ports of these nodes (unordered)."""
    return list(nic_ports_of(nodes=nodes))


def nic_ports_of(*, nodes: Iterable[Node]) -> QuerySet[NicPort]:
    """The NIC ports of these nodes, as a lazy QuerySet (callers order it)."""
    return NicPort.objects.filter(node__in=[node.pk for node in nodes])


def witnessed_ports(*, nodes: Iterable[Node]) -> QuerySet[NicPort]:
    """The nodes' NIC ports mapped to a switch port of a leaf switch that is polled (an
    address and a community), with that switch, by node, address, device and port."""
    return (
        nic_ports_of(nodes=nodes)
        .exclude(switch_port="")
        .exclude(node__leaf_switch__snmp_community="")
        .filter(node__leaf_switch__management_address__isnull=False)
        .select_related("node__leaf_switch")
        .order_by("node_id", "address", "device", "port_number")
    )


def sites_among(*, pks: Iterable[int]) -> QuerySet[Site]:
    """The sites whose pk is among ``pks``."""
    return Site.objects.filter(pk__in=pks)


def sites_where(*, condition: Exists | Q) -> QuerySet[Site]:
    """The sites that meet ``condition`` (an Exists over their rows, or a Q)."""
    return Site.objects.filter(condition)


def tenants_by_slug() -> QuerySet[Tenant]:
    """Every tenant, by slug."""
    return Tenant.objects.order_by("slug")


# --- read by api, portal, monitoring ---


def tenants_visible_to(user: Any) -> QuerySet[Tenant]:
    """The tenants ``user`` sees (common.querysets scoping)."""
    return Tenant.objects.visible_to(user)


def leases_visible_to(user: Any) -> QuerySet[Lease]:
    """The leases ``user`` sees (common.querysets scoping)."""
    return Lease.objects.visible_to(user)


def assignments_visible_to(user: Any) -> QuerySet[NodeAssignment]:
    """The node assignments ``user`` sees (common.querysets scoping)."""
    return NodeAssignment.objects.visible_to(user)


def nic_ports_visible_to(user: Any) -> QuerySet[NicPort]:
    """The NIC ports ``user`` sees (common.querysets scoping)."""
    return NicPort.objects.visible_to(user)


def lease_terms_visible_to(user: Any) -> QuerySet[LeaseTerms]:
    """The terms versions ``user`` sees (common.querysets scoping)."""
    return LeaseTerms.objects.visible_to(user)


def terms_timeline_visible_to(*, user: Any, lease: Lease) -> TermsTimeline[LeaseTerms]:
    """The TermsTimeline of the lease's terms versions that ``user`` sees."""
    return TermsTimeline(LeaseTerms.objects.visible_to(user).filter(lease=lease))


def amendments_visible_to(user: Any) -> QuerySet[TermsAmendment]:
    """The retroactive terms amendments ``user`` sees (common.querysets scoping)."""
    return TermsAmendment.objects.visible_to(user)


def tenant_keys_visible_to(user: Any) -> QuerySet[TenantKey]:
    """The tenant signing keys ``user`` sees (common.querysets scoping)."""
    return TenantKey.objects.visible_to(user)


def tenant_settings_events_visible_to(user: Any) -> QuerySet[TenantSettingsEvent]:
    """The tenant settings changes ``user`` sees (common.querysets scoping)."""
    return TenantSettingsEvent.objects.visible_to(user)


def nodes_served_to(*, user: Any, lease_id: Any) -> QuerySet[NodeAssignment]:
    """The node ids (``values("node")``) ever assigned to lease ``lease_id`` if ``user``
    sees that lease, else none: a subquery."""
    leases = Lease.objects.visible_to(user).filter(pk=lease_id)
    return NodeAssignment.objects.filter(lease__in=leases).values("node")


def tenants_for_provider() -> QuerySet[Tenant]:
    """Every tenant, unscoped."""
    return Tenant.objects.all()


def sites_for_provider() -> QuerySet[Site]:
    """Every site, unscoped."""
    return Site.objects.all()


def fabrics_for_provider() -> QuerySet[Fabric]:
    """Every fabric, unscoped."""
    return Fabric.objects.all()


def nodes_for_provider() -> QuerySet[Node]:
    """Every node, unscoped."""
    return Node.objects.all()


def leases_for_provider() -> QuerySet[Lease]:
    """Every lease, unscoped."""
    return Lease.objects.all()


def amendments_for_provider() -> QuerySet[TermsAmendment]:
    """Every retroactive terms amendment, unscoped."""
    return TermsAmendment.objects.all()


def tenant_keys_for_provider() -> QuerySet[TenantKey]:
    """Every tenant signing key, unscoped."""
    return TenantKey.objects.all()


def assignments_with_nodes() -> QuerySet[NodeAssignment]:
    """Every node assignment with its node, oldest first: unscoped (for a Prefetch)."""
    return NodeAssignment.objects.select_related("node").order_by("assigned_from", "id")


def tenant_by_slug(*, slug: str) -> Tenant | None:
    """The tenant with this slug, or None."""
    return Tenant.objects.filter(slug=slug).first()


def tenants_where(*, condition: Q) -> QuerySet[Tenant]:
    """The tenants that meet ``condition``, each once."""
    return Tenant.objects.filter(condition).distinct()


def tenant_keys_of(*, tenant_id: int) -> QuerySet[TenantKey]:
    """Every signing key the tenant registered, revoked ones too, by registration."""
    return TenantKey.objects.filter(tenant_id=tenant_id).order_by("registered_at", "pk")


def tenant_links_of(*, lease: Lease) -> QuerySet[TenantLink]:
    """The lease's tenant links (signed by the tenant), in chain order."""
    return TenantLink.objects.filter(lease=lease).order_by("chain_index")


def tenants_joined_by(*, user_id: Any) -> QuerySet[Tenant]:
    """The tenants the user holds a membership of, by slug (unscoped by token)."""
    return Tenant.objects.filter(memberships__user_id=user_id).order_by("slug")


def leases_of_tenant(*, tenant: Tenant) -> QuerySet[Lease]:
    """The tenant's leases, by contract reference."""
    return Lease.objects.filter(tenant=tenant).order_by("reference")


def lease_of_tenant(*, tenant: Tenant, pk: int) -> Lease | None:
    """The tenant's lease ``pk``, or None when the tenant holds no such lease."""
    return Lease.objects.filter(tenant=tenant, pk=pk).first()


def assignments_in_force_for_provider(*, at: datetime) -> QuerySet[NodeAssignment]:
    """Every lease's node assignments in force at ``at``, unscoped."""
    return NodeAssignment.objects.in_force_at(at)


def leases_holding(*, nodes: Iterable[Node], at: datetime) -> list[Lease]:
    """The active leases the nodes are assigned to at ``at``, with their tenants, by pk."""
    lease_ids = (
        NodeAssignment.objects.in_force_at(at)
        .filter(node__in=list(nodes), lease__status=LeaseStatus.ACTIVE)
        .values("lease_id")
    )
    return list(Lease.objects.filter(pk__in=lease_ids).select_related("tenant").order_by("pk"))


def node_held_at(*, lease_id: Any, node_id: Any, at: Any) -> QuerySet[NodeAssignment]:
    """The lease's live assignments of the node in force at ``at`` (values or OuterRefs:
    a subquery for Exists)."""
    return NodeAssignment.objects.filter(
        lease_id=lease_id,
        node_id=node_id,
        void=False,
        assigned_from__lte=at,
    ).filter(Q(assigned_until__isnull=True) | Q(assigned_until__gt=at))


def nodes_at_host(*, host: str) -> list[Node]:
    """The nodes whose hostname or management address is ``host``."""
    return list(Node.objects.filter(Q(hostname=host) | Q(management_address=host)))


def switches_named(*, name: str, fabric: str | None = None) -> list[Switch]:
    """The switches called ``name``, only those of fabric ``fabric`` when it is given."""
    switches = Switch.objects.filter(name=name)
    if fabric:
        switches = switches.filter(fabric__name=fabric)
    return list(switches)


def nodes_behind(*, switches: Sequence[Switch]) -> list[Node]:
    """The nodes a switch fault reaches: those under the leaves, every node of the spines'
    fabrics."""
    return list(
        Node.objects.filter(
            Q(leaf_switch__in=[s for s in switches if s.role == SwitchRole.LEAF])
            | Q(
                leaf_switch__fabric_id__in=[
                    s.fabric_id for s in switches if s.role == SwitchRole.SPINE
                ]
            )
        ).distinct()
    )


def leaf_switches() -> QuerySet[Switch]:
    """Every leaf switch, unscoped (callers annotate)."""
    return Switch.objects.filter(role=SwitchRole.LEAF)


def fabrics_with_spine_counts() -> list[Fabric]:
    """Every fabric with its site and ``spines`` (its spine switch count), by site and name."""
    return list(
        Fabric.objects.select_related("site")
        .annotate(spines=Count("switches", filter=Q(switches__role=SwitchRole.SPINE)))
        .order_by("site__name", "name")
    )


def site_codes() -> dict[int, str]:
    """Every site's code, by pk."""
    return dict(Site.objects.values_list("pk", "code"))


def nic_ports_of_nodes(*, node_ids: Iterable[int]) -> QuerySet[NicPort]:
    """The NIC ports of these nodes, unscoped."""
    return NicPort.objects.filter(node_id__in=node_ids)
