"""Writes to leases. Each service is one transaction that records a LeaseEvent; admin
actions, commands and (later) the API call these, never model.save() directly."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.translation import gettext as _

from accounts.selectors import require_tenant_admin
from common.locks import locking
from gpulease_verify import cosign as cosign_rules
from gpulease_verify.canonical import iso_utc
from gpulease_verify.terms import TENANT_ADMIN, is_retroactive
from leases import cosign, validators
from leases.choices import LEASE_TRANSITIONS, LeaseStatus, NodeStatus, SwitchRole
from leases.links import link_terms
from leases.models import (
    Fabric,
    Lease,
    LeaseEvent,
    LeaseTerms,
    NicPort,
    Node,
    NodeAssignment,
    Site,
    Switch,
    Tenant,
    TermsAmendment,
)


def _when(instant: datetime | None) -> str:
    if instant is None:
        return _("further notice")
    return date_format(timezone.localtime(instant), "Y-m-d H:i")


def _utc_text(instant: datetime | None) -> str | None:
    """An instant in an event's detail: ISO 8601 in UTC, whichever zone the caller (the
    API's body, the admin's form) wrote it in."""
    return instant.astimezone(UTC).isoformat() if instant is not None else None


def _record(lease: Lease, action: str, actor: Any, **detail: Any) -> None:
    record_event(lease=lease, action=action, actor=actor, detail=detail)


def ensure_node_free(
    *, node: Node, start: datetime, end: datetime | None, exclude_pk: int | None = None
) -> None:
    """Refuse, in a sentence, a node that another live assignment holds in [start, end)."""
    clash = (
        NodeAssignment.objects.overlapping(node_id=node.pk, start=start, end=end)
        .exclude(pk=exclude_pk)
        .select_related("lease")
        .order_by("assigned_from")
        .first()
    )
    if clash is not None:
        raise ValidationError(
            _("Node %(node)s is already leased from %(start)s to %(end)s under lease %(lease)s.")
            % {
                "node": node.hostname,
                "start": _when(clash.assigned_from),
                "end": _when(clash.assigned_until),
                "lease": clash.lease.reference,
            }
        )


def validate_assignment_period(
    *, lease: Lease, node: Node, start: datetime, end: datetime | None
) -> None:
    if end is not None and end <= start:
        raise ValidationError(_("A node assignment must end after it starts."))
    if start < lease.starts_at:
        raise ValidationError(
            _("Node %(node)s cannot join lease %(lease)s before the lease starts (%(start)s).")
            % {"node": node.hostname, "lease": lease.reference, "start": _when(lease.starts_at)}
        )
    if lease.ends_at is not None and start >= lease.ends_at:
        raise ValidationError(
            _("Node %(node)s cannot join lease %(lease)s after the lease ends (%(end)s).")
            % {"node": node.hostname, "lease": lease.reference, "end": _when(lease.ends_at)}
        )
    if lease.ends_at is not None and (end is None or end > lease.ends_at):
        raise ValidationError(
            _("Node %(node)s cannot stay in lease %(lease)s past the lease's end (%(end)s).")
            % {"node": node.hostname, "lease": lease.reference, "end": _when(lease.ends_at)}
        )
    if node.status == NodeStatus.RETIRED:
        raise ValidationError(
            _("Node %(node)s is retired and cannot be leased.") % {"node": node.hostname}
        )


def ensure_lease_open(lease: Lease) -> None:
    """Refuse, in a sentence, a node joining an ended or cancelled lease."""
    if lease.status in (LeaseStatus.ENDED, LeaseStatus.CANCELLED):
        raise ValidationError(
            _("Lease %(lease)s is %(status)s; nodes can no longer be added.")
            % {"lease": lease.reference, "status": lease.get_status_display()}
        )


def validate_release(*, assignment: NodeAssignment, at: datetime) -> None:
    """Refuse, in a sentence, ending an assignment at ``at``: only inside it, and only
    earlier than it ends (a longer stay is a new assignment, checked as one)."""
    if at <= assignment.assigned_from:
        raise ValidationError(_("A node can only be released after its assignment starts."))
    if assignment.assigned_until is not None and at >= assignment.assigned_until:
        raise ValidationError(_("This assignment already ends before that instant."))


@transaction.atomic
def create_lease(
    *,
    tenant: Tenant,
    reference: str,
    starts_at: datetime,
    terms: dict[str, Any],
    ends_at: datetime | None = None,
    name: str = "",
    notes: str = "",
    probes_enabled: bool = True,
    actor: Any = None,
) -> Lease:
    """A draft lease with its first terms version, in force from the lease's start."""
    lease = Lease(
        tenant=tenant,
        reference=reference,
        name=name,
        starts_at=starts_at,
        ends_at=ends_at,
        notes=notes,
        probes_enabled=probes_enabled,
    )
    lease.full_clean()
    lease.save()
    add_terms_version(terms=LeaseTerms(lease=lease, effective_from=starts_at, **terms), actor=actor)
    return lease


@transaction.atomic
def assign_node(
    *,
    lease: Lease,
    node: Node,
    assigned_from: datetime | None = None,
    assigned_until: datetime | None = None,
    actor: Any = None,
) -> NodeAssignment:
    lease = locking(Lease.objects).get(pk=lease.pk)
    start = assigned_from or lease.starts_at
    end = assigned_until if assigned_until is not None else lease.ends_at
    ensure_lease_open(lease)
    validate_assignment_period(lease=lease, node=node, start=start, end=end)
    # Lock the node so two concurrent assignments of it queue up behind each other.
    locking(Node.objects).filter(pk=node.pk).first()
    ensure_node_free(node=node, start=start, end=end)
    assignment = NodeAssignment(lease=lease, node=node, assigned_from=start, assigned_until=end)
    try:
        with transaction.atomic():
            assignment.save()
    except IntegrityError:
        # The database's own guard fired (a race the check above could not see).
        ensure_node_free(node=node, start=start, end=end)
        raise
    if lease.status == LeaseStatus.ACTIVE and start <= timezone.now():
        Node.objects.filter(pk=node.pk).update(status=NodeStatus.LEASED)
    _record(
        lease,
        LeaseEvent.Action.NODE_ASSIGNED,
        actor,
        node=node.hostname,
        start=_utc_text(start),
        end=_utc_text(end),
    )
    return assignment


@transaction.atomic
def release_node(*, assignment: NodeAssignment, at: datetime, actor: Any = None) -> None:
    """End an assignment at ``at`` (read back from the database: the caller's copy may
    carry an edited end already)."""
    locked = locking(NodeAssignment.objects).get(pk=assignment.pk)
    validate_release(assignment=locked, at=at)
    locked.assigned_until = assignment.assigned_until = at
    locked.save(update_fields=["assigned_until", "updated_at"])
    if at <= timezone.now():
        Node.objects.filter(pk=locked.node_id, status=NodeStatus.LEASED).update(
            status=NodeStatus.AVAILABLE
        )
    _record(
        locked.lease,
        LeaseEvent.Action.NODE_RELEASED,
        actor,
        node=locked.node.hostname,
        at=_utc_text(at),
    )


@transaction.atomic
def swap_node(
    *, lease: Lease, old_node: Node, new_node: Node, at: datetime, actor: Any = None
) -> NodeAssignment:
    """Replace a node from ``at`` on; the old assignment ends there, so history stays."""
    current = lease.assignments.in_force_at(at).filter(node=old_node).first()
    if current is None:
        raise ValidationError(
            _("Node %(node)s is not in lease %(lease)s at %(at)s.")
            % {"node": old_node.hostname, "lease": lease.reference, "at": _when(at)}
        )
    until = current.assigned_until
    release_node(assignment=current, at=at, actor=actor)
    return assign_node(
        lease=lease, node=new_node, assigned_from=at, assigned_until=until, actor=actor
    )


def _amended(
    *, lease: Lease, effective_from: datetime, changes: dict[str, Any], reason: str
) -> LeaseTerms:
    """An unsaved next version: the one in force at ``effective_from`` with ``changes``."""
    base = LeaseTerms.objects.in_force(lease.pk, effective_from)
    if base is None:
        raise ValidationError(
            _("No terms are in force at %(at)s to amend; the lease starts at %(start)s.")
            % {"at": _when(effective_from), "start": _when(lease.starts_at)}
        )
    unknown = set(changes) - set(LeaseTerms.CONTRACT_FIELDS)
    if unknown:
        raise ValidationError(
            _("Not a contract field: %(fields)s. An amendment changes only the contract's terms.")
            % {"fields": ", ".join(sorted(unknown))}
        )
    amended = LeaseTerms.objects.get(pk=base.pk)
    amended.pk = None
    amended._state.adding = True
    for field, value in changes.items():
        setattr(amended, field, value)
    amended.effective_from = effective_from
    amended.amendment_reason = reason
    return amended


def _clear_link(terms: LeaseTerms) -> None:
    for name in (
        "chain_index",
        "acknowledged_by",
        "acknowledged_at",
        "acknowledged_by_staff",
        "proposed_at",
    ):
        setattr(terms, name, None)
    for name in (
        "prev_hash",
        "terms_hash",
        "acknowledged_by_username",
        "acknowledged_by_role",
        "acknowledged_by_tenant",
    ):
        setattr(terms, name, "")
    terms.acknowledgement_reason = ""


def _changes_text(changes: dict[str, Any]) -> dict[str, Any]:
    """Changes as JSON: decimals and instants as text, windows and tiers as they are."""
    return {
        key: value if isinstance(value, list | dict | bool | int | None) else str(value)
        for key, value in changes.items()
    }


@transaction.atomic
def amend_terms(
    *,
    lease: Lease,
    effective_from: datetime,
    changes: dict[str, Any],
    reason: str,
    actor: Any = None,
) -> LeaseTerms:
    """Add the next terms version: the one in force at ``effective_from`` with ``changes``.
    One taking effect in the past is refused: see ``propose_retroactive_amendment``."""
    amended = _amended(lease=lease, effective_from=effective_from, changes=changes, reason=reason)
    return add_terms_version(terms=amended, actor=actor, changes=_changes_text(changes))


def validate_retroactive_amendment(
    *, lease: Lease, effective_from: datetime, changes: dict[str, Any], reason: str
) -> None:
    """Refuse, in a sentence, an amendment that is not in the past or would not make a
    valid next version."""
    if not is_retroactive(effective_from, timezone.now()):
        raise ValidationError(
            _(
                "This amendment takes effect %(at)s, not in the past: add it as the next terms "
                "version; it needs no acknowledgement."
            )
            % {"at": _when(effective_from)}
        )
    candidate = _amended(lease=lease, effective_from=effective_from, changes=changes, reason=reason)
    validate_new_terms_version(
        lease=lease, effective_from=effective_from, reason=reason, acknowledged=True
    )
    try:
        candidate.full_clean(exclude=["lease", "version"])
    except ValidationError as error:
        if not hasattr(error, "error_dict"):
            raise
        raise ValidationError(
            {
                "changes": [
                    f"{field}: {message}"
                    for field, messages in error.message_dict.items()
                    for message in messages
                ]
            }
        ) from error


@transaction.atomic
def propose_retroactive_amendment(
    *,
    lease: Lease,
    effective_from: datetime,
    changes: dict[str, Any],
    reason: str,
    actor: Any = None,
) -> TermsAmendment:
    """Store an amendment taking effect in the past, pending: not in force and not in the
    chain until a tenant admin of the lease's tenant acknowledges it."""
    lease = locking(Lease.objects).get(pk=lease.pk)
    validate_retroactive_amendment(
        lease=lease, effective_from=effective_from, changes=changes, reason=reason
    )
    amendment = TermsAmendment.objects.create(
        lease=lease,
        effective_from=effective_from,
        changes=_changes_text(changes),
        reason=reason,
        proposed_by=actor if getattr(actor, "pk", None) else None,
    )
    _record(
        lease,
        LeaseEvent.Action.AMENDMENT_PROPOSED,
        actor,
        amendment=amendment.pk,
        effective_from=effective_from.isoformat(),
        reason=reason,
        changes=amendment.changes,
    )
    return amendment


def acknowledgement_content(
    *, amendment: TermsAmendment, user: Any, reason: str, at: datetime
) -> dict[str, Any]:
    """What a tenant admin signs to acknowledge ``amendment`` (``gpulease_verify.cosign``):
    the amendment, the terms version it amends (in force at its effective_from), who, when
    and why."""
    lease = amendment.lease
    base = LeaseTerms.objects.in_force(lease.pk, amendment.effective_from)
    if base is None:
        raise ValidationError(
            _("No terms are in force at %(at)s to amend; the lease starts at %(start)s.")
            % {"at": _when(amendment.effective_from), "start": _when(lease.starts_at)}
        )
    return cosign_rules.acknowledgement_content(
        tenant=lease.tenant.slug,
        lease=lease.reference,
        by=user.get_username(),
        role=TENANT_ADMIN,
        at=iso_utc(at) or "",
        amendment=amendment.pk,
        amends={
            "version": base.version,
            "chain_index": base.chain_index,
            "terms_hash": base.terms_hash,
        },
        effective_from=iso_utc(amendment.effective_from) or "",
        changes=amendment.changes,
        amendment_reason=amendment.reason,
        reason=reason,
    )


@transaction.atomic
def acknowledge_amendment(
    *,
    amendment: TermsAmendment,
    user: Any,
    reason: str,
    signed_at: datetime | None = None,
    signature: str | None = None,
) -> LeaseTerms:
    """A tenant admin of the lease's tenant acknowledges a retroactive amendment: it becomes
    the lease's next terms version, in force from its effective_from, linked into the
    chain with who acknowledged it, when and why. A tenant with a signing key signs
    ``acknowledgement_content`` (at ``signed_at``, the acknowledgement's time) and the
    signature becomes a tenant link after the version (``leases.cosign``)."""
    lease = locking(Lease.objects).select_related("tenant").get(pk=amendment.lease_id)
    amendment = locking(TermsAmendment.objects).get(pk=amendment.pk)
    amendment.lease = lease
    if amendment.status != TermsAmendment.Status.PENDING:
        raise ValidationError(
            _("This amendment was already acknowledged: it is terms v%(v)s.")
            % {"v": amendment.terms.version if amendment.terms else "?"}
        )
    role = require_tenant_admin(
        user,
        lease.tenant,
        _("Only a tenant admin of %(tenant)s can acknowledge an amendment of its lease.")
        % {"tenant": lease.tenant.name},
    )
    if not reason.strip():
        raise ValidationError(_("An acknowledgement needs a reason."))
    at = signed_at or timezone.now()
    signed = acknowledgement_content(amendment=amendment, user=user, reason=reason, at=at)
    key = cosign.cosignature(tenant=lease.tenant, content=signed, signature=signature)
    terms = _amended(
        lease=lease,
        effective_from=amendment.effective_from,
        changes=amendment.changes,
        reason=amendment.reason,
    )
    _clear_link(terms)
    terms.acknowledged_by = user
    terms.acknowledged_by_username = user.get_username()
    terms.acknowledged_by_role = role
    terms.acknowledged_by_tenant = lease.tenant.slug
    terms.acknowledged_by_staff = user.is_staff
    terms.proposed_at = amendment.created_at
    terms.acknowledged_at = at
    terms.acknowledgement_reason = reason
    terms = _add_version(
        terms,
        actor=user,
        acknowledged=True,
        detail={
            "changes": amendment.changes,
            "amendment": amendment.pk,
            "acknowledged_by": terms.acknowledged_by_username,
            "acknowledgement_reason": reason,
            **({"signed_with": key} if key else {}),
        },
    )
    amendment.status, amendment.terms = TermsAmendment.Status.ACKNOWLEDGED, terms
    amendment.save(update_fields=["status", "terms", "updated_at"])
    if key is not None:
        cosign.record(
            lease=lease,
            kind=cosign_rules.ACKNOWLEDGEMENT,
            signed=signed,
            signature=signature,
            key=key,
            extra={"terms_version": terms.version},
        )
    return terms


_ACTION_FOR = {
    LeaseStatus.ACTIVE: LeaseEvent.Action.ACTIVATED,
    LeaseStatus.ENDED: LeaseEvent.Action.ENDED,
    LeaseStatus.CANCELLED: LeaseEvent.Action.CANCELLED,
}


@transaction.atomic
def transition_lease(
    *, lease: Lease, to: str, actor: Any = None, at: datetime | None = None
) -> Lease:
    """Move a lease to another status, if that move is allowed; see LEASE_TRANSITIONS."""
    lease = locking(Lease.objects).get(pk=lease.pk)
    if to not in LEASE_TRANSITIONS[lease.status]:
        raise ValidationError(
            _("Lease %(lease)s is %(status)s and cannot become %(to)s.")
            % {
                "lease": lease.reference,
                "status": lease.get_status_display(),
                "to": LeaseStatus(to).label,
            }
        )
    now = at or timezone.now()
    live = lease.assignments.filter(void=False)
    if to == LeaseStatus.ACTIVE:
        if not live.exists():
            raise ValidationError(
                _("Lease %(lease)s has no nodes; assign nodes before activating it.")
                % {"lease": lease.reference}
            )
        if not lease.terms.exists():
            raise ValidationError(_("Lease %(lease)s has no terms.") % {"lease": lease.reference})
        Node.objects.filter(pk__in=live.in_force_at(now).values("node")).update(
            status=NodeStatus.LEASED
        )
    elif to == LeaseStatus.ENDED:
        end = min(lease.ends_at, now) if lease.ends_at else now
        if end <= lease.starts_at:
            end = now
        live.filter(assigned_from__gte=end).update(void=True)
        for open_assignment in live.filter(assigned_from__lt=end).exclude(assigned_until__lte=end):
            open_assignment.assigned_until = end
            open_assignment.save(update_fields=["assigned_until", "updated_at"])
        if lease.ends_at is None or lease.ends_at > end:
            lease.ends_at = end
        Node.objects.filter(
            pk__in=lease.assignments.values("node"), status=NodeStatus.LEASED
        ).exclude(
            pk__in=NodeAssignment.objects.in_force_at(now).exclude(lease=lease).values("node")
        ).update(status=NodeStatus.AVAILABLE)
    elif to == LeaseStatus.CANCELLED:
        live.update(void=True)
    lease.status = to
    lease.save(update_fields=["status", "ends_at", "updated_at"])
    _record(lease, _ACTION_FOR[LeaseStatus(to)], actor, at=now.isoformat())
    return lease


def _refuse_retroactive(lease: Lease, effective_from: datetime, created: datetime) -> None:
    if is_retroactive(effective_from, created):
        raise ValidationError(
            _(
                "This amendment would take effect %(at)s, before it is recorded (%(now)s). An "
                "amendment in the past needs a tenant admin of %(tenant)s to acknowledge it: "
                "propose it as a retroactive amendment."
            )
            % {"at": _when(effective_from), "now": _when(created), "tenant": lease.tenant.name}
        )


def validate_new_terms_version(
    *, lease: Lease, effective_from: datetime, reason: str, acknowledged: bool = False
) -> None:
    """The first version is in force when the lease starts; each later one takes effect
    after the latest, says why, and (unless a tenant admin acknowledged it) not in the
    past: ``RETROACTIVE_TOLERANCE`` (60 s) before now at most, for clock skew. The first
    version is the contract itself, created with the lease, and starts with it."""
    latest = lease.terms.order_by("-version").first()
    if latest is None:
        if effective_from > lease.starts_at:
            raise ValidationError(
                _("The first terms version must be in force when the lease starts (%(start)s).")
                % {"start": _when(lease.starts_at)}
            )
    elif effective_from <= latest.effective_from:
        raise ValidationError(
            _("An amendment must take effect after the latest version (v%(v)s, from %(at)s).")
            % {"v": latest.version, "at": _when(latest.effective_from)}
        )
    elif not reason.strip():
        raise ValidationError(_("An amendment needs a reason."))
    elif not acknowledged:
        _refuse_retroactive(lease, effective_from, timezone.now())


@transaction.atomic
def add_terms_version(*, terms: LeaseTerms, actor: Any = None, **detail: Any) -> LeaseTerms:
    """Save an unsaved, filled LeaseTerms as the lease's next version, linked into the
    lease's chain. One taking effect in the past is refused (acknowledge_amendment)."""
    _clear_link(terms)
    return _add_version(terms, actor=actor, acknowledged=False, detail=detail)


def _add_version(
    terms: LeaseTerms, *, actor: Any, acknowledged: bool, detail: dict[str, Any]
) -> LeaseTerms:
    lease = locking(Lease.objects).get(pk=terms.lease_id)
    validate_new_terms_version(
        lease=lease,
        effective_from=terms.effective_from,
        reason=terms.amendment_reason,
        acknowledged=acknowledged,
    )
    latest = lease.terms.order_by("-version").first()
    terms.version = latest.version + 1 if latest else 1
    terms.full_clean(exclude=["lease"])
    terms.save()
    if latest is not None and not acknowledged:  # the rule, on the instant stored
        _refuse_retroactive(lease, terms.effective_from, terms.created_at)
    link_terms(terms)
    action = LeaseEvent.Action.AMENDED if latest else LeaseEvent.Action.CREATED
    _record(
        lease,
        action,
        actor,
        version=terms.version,
        effective_from=terms.effective_from.isoformat(),
        reason=terms.amendment_reason,
        terms_hash=terms.terms_hash,
        **detail,
    )
    return terms


def _checked_save(obj: Any, changes: dict[str, Any] | None = None) -> Any:
    """Apply ``changes``, check the row as the model does (fields and constraints, as
    sentences), then save it."""
    for name, value in (changes or {}).items():
        setattr(obj, name, value)
    obj.full_clean()
    obj.save()
    return obj


@transaction.atomic
def create_site(**fields: Any) -> Site:
    """A data centre; the API and the admin add sites through this."""
    return _checked_save(Site(**fields))


@transaction.atomic
def update_site(*, site: Site, changes: dict[str, Any]) -> Site:
    return _checked_save(locking(Site.objects).get(pk=site.pk), changes)


@transaction.atomic
def create_fabric(**fields: Any) -> Fabric:
    """An inter-node network of a site; the API and the admin add fabrics through this."""
    return _checked_save(Fabric(**fields))


@transaction.atomic
def update_fabric(*, fabric: Fabric, changes: dict[str, Any]) -> Fabric:
    return _checked_save(locking(Fabric.objects).get(pk=fabric.pk), changes)


@dataclass(frozen=True)
class PortSpec:
    device: str
    netdev: str
    rate_gbps: int
    link_layer: str
    address: str | None = None
    port_number: int = 1


@dataclass(frozen=True)
class NodeSpec:
    hostname: str
    leaf: str
    management_address: str
    ssh_port: int
    ssh_user: str
    ssh_host_key: str
    gpu_model: str
    gpu_count: int
    ports: tuple[PortSpec, ...]


@transaction.atomic
def register_cluster(
    *,
    site_code: str,
    site_name: str,
    city: str,
    fabric_name: str,
    technology: str,
    port_speed_gbps: int,
    topology: str,
    oversubscription: Decimal,
    spines: Sequence[str],
    nodes: Sequence[NodeSpec],
) -> list[Node]:
    """Create or update a site, its fabric, switches, nodes and NIC ports as described:
    used to register hosts that announce themselves (the network lab). Host keys and
    addresses are updated, so a rebuilt host is pinned to its new key. Names that will
    reach a shell are checked first, as the model fields would check them in a form."""
    try:
        for spec in nodes:
            validators.check_hostname(spec.hostname)
            validators.check_host_address(spec.management_address)
            for port in spec.ports:
                validators.check_rdma_device_name(port.device)
                if port.netdev:
                    validators.check_interface_name(port.netdev)
                if port.address:
                    validators.check_ip_address(port.address)
    except ValueError as refusal:
        raise ValidationError(str(refusal)) from None
    site, _ = Site.objects.update_or_create(
        code=site_code, defaults={"name": site_name, "city": city}
    )
    fabric, _ = Fabric.objects.update_or_create(
        site=site,
        name=fabric_name,
        defaults={
            "technology": technology,
            "port_speed_gbps": port_speed_gbps,
            "topology": topology,
            "oversubscription": oversubscription,
        },
    )
    for name in spines:
        Switch.objects.update_or_create(
            fabric=fabric, name=name, defaults={"role": SwitchRole.SPINE}
        )
    registered = []
    for spec in nodes:
        leaf, _ = Switch.objects.update_or_create(
            fabric=fabric, name=spec.leaf, defaults={"role": SwitchRole.LEAF}
        )
        node, _ = Node.objects.update_or_create(
            hostname=spec.hostname,
            defaults={
                "leaf_switch": leaf,
                "management_address": spec.management_address,
                "ssh_port": spec.ssh_port,
                "ssh_user": spec.ssh_user,
                "ssh_host_key": spec.ssh_host_key,
                "gpu_model": spec.gpu_model,
                "gpu_count": spec.gpu_count,
            },
        )
        for port in spec.ports:
            NicPort.objects.update_or_create(
                node=node,
                device=port.device,
                port_number=port.port_number,
                defaults={
                    "netdev": port.netdev,
                    "rate_gbps": port.rate_gbps,
                    "link_layer": port.link_layer,
                    "address": port.address,
                },
            )
        registered.append(node)
    return registered


# --- read by billing, benchmarks, telemetry, demo ---


def lock_lease(*, pk: int) -> Lease:
    """The lease ``pk`` with its tenant, its row locked until the transaction ends (the
    lock of its chain: ``common.locks``)."""
    return locking(Lease.objects).select_related("tenant").get(pk=pk)


def lock_tenant(*, pk: int) -> Tenant:
    """The tenant ``pk``, its row locked until the transaction ends (the lock drafting and
    issuing its invoices take)."""
    return locking(Tenant.objects).get(pk=pk)


def record_event(*, lease: Lease, action: str, actor: Any, detail: dict[str, Any]) -> LeaseEvent:
    """A new LeaseEvent of the lease (``actor`` a user or None), returned."""
    return LeaseEvent.objects.create(lease=lease, action=action, actor=actor, detail=detail)


def ensure_tenant(*, slug: str, name: str) -> Tenant:
    """The tenant with this slug, created with ``name`` when there is none."""
    tenant, _created = Tenant.objects.get_or_create(slug=slug, defaults={"name": name})
    return tenant


def set_switch_snmp(
    *,
    site_code: str,
    fabric_name: str,
    names: Iterable[str],
    management_address: str | None,
    snmp_port: int,
    snmp_community: str,
) -> int:
    """Where to read the named switches of a fabric over SNMP; how many were updated."""
    switches = Switch.objects.filter(fabric__site__code=site_code, fabric__name=fabric_name)
    return switches.filter(name__in=names).update(
        management_address=management_address,
        snmp_port=snmp_port,
        snmp_community=snmp_community,
    )


def set_switch_port(*, hostname: str, device: str, switch_port: str) -> int:
    """The switch port a node's NIC port is cabled to; how many ports were updated."""
    return NicPort.objects.filter(node__hostname=hostname, device=device).update(
        switch_port=switch_port
    )
