"""The provider staff group: what a day-to-day operator of the provider holds (docs/api.md,
"Staff permission matrix"). Every model's view permission, and the writes of running
leases and billing; not the keys: a tenant's webhook signing secret
(leases.view_webhook_secret), other users' API tokens (accounts.issue_any_token,
accounts.revoke_any_token), users, groups and deletions stay with the superuser."""

from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db.models import Q

PROVIDER_STAFF_GROUP = "provider staff"

PROVIDER_STAFF_WRITES = (
    "leases.add_site",
    "leases.change_site",
    "leases.add_fabric",
    "leases.change_fabric",
    "leases.add_switch",
    "leases.change_switch",
    "leases.add_node",
    "leases.change_node",
    "leases.add_nicport",
    "leases.change_nicport",
    "leases.add_lease",
    "leases.change_lease",
    "leases.transition_lease",
    "leases.add_leaseterms",
    "leases.add_termsamendment",
    "benchmarks.run_probes_now",
    "billing.add_evidence",
    "incidents.change_incident",
    "incidents.acknowledge_incident",
    "incidents.mitigate_incident",
    "billing.issue_invoice",
    "billing.mark_invoice_paid",
    "billing.void_invoice",
    "billing.recompute_invoice",
    "billing.rerate_lease",
    "billing.issue_credit_note",
    "billing.accept_dispute",
    "billing.reject_dispute",
)


def _dotted(permissions: tuple[str, ...]) -> Q:
    match = Q(pk__in=[])
    for dotted in permissions:
        app_label, codename = dotted.split(".")
        match |= Q(content_type__app_label=app_label, codename=codename)
    return match


def view_permissions() -> Q:
    """Each model's standard view_<model> permission (not leases.view_webhook_secret)."""
    match = Q(pk__in=[])
    for content_type in ContentType.objects.all():
        match |= Q(content_type=content_type, codename=f"view_{content_type.model}")
    return match


def ensure_provider_staff_group() -> Group:
    """Create the group, or bring its permissions back to the matrix above."""
    group, _created = Group.objects.get_or_create(name=PROVIDER_STAFF_GROUP)
    wanted = Permission.objects.filter(view_permissions() | _dotted(PROVIDER_STAFF_WRITES))
    missing = set(PROVIDER_STAFF_WRITES) - {
        f"{p.content_type.app_label}.{p.codename}" for p in wanted.select_related("content_type")
    }
    if missing:
        raise LookupError(f"no such permission(s): {', '.join(sorted(missing))}")
    group.permissions.set(wanted)
    return group
