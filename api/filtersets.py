"""Query filters of the list endpoints (django-filter). Ids are plain numbers, matched
inside the rows the user may see: another tenant's id simply matches nothing."""

import django_filters as filters
from django import forms
from django.db.models import Exists, OuterRef, Q
from django.utils.dateparse import parse_datetime

from accounts.models import ApiToken
from benchmarks import selectors as run_selectors
from benchmarks.choices import Pattern, RunState, Trigger, Verdict
from benchmarks.models import ProbeRun
from billing.choices import InvoiceStatus
from billing.models import CreditNote, Invoice, Voucher
from common.instants import FILTER_YEARS, instant_problem
from incidents.choices import FabricIncidentKind, IncidentState, MeteringIncidentKind
from incidents.models import Incident
from leases import selectors as lease_selectors
from leases.choices import GpuModel, LeaseStatus, NodeStatus, ProbeKind
from leases.models import Fabric, Lease, Node


class IdFilter(filters.NumberFilter):
    """A row id: a whole number within the range of a database id."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(*args, **kwargs)


class _BoundedIsoDateTimeField(filters.fields.IsoDateTimeField):
    """An ISO 8601 instant with its UTC offset that the database can hold
    (common.instants, FILTER_YEARS)."""

    def to_python(self, value):  # type: ignore[no-untyped-def]
        # Checked as sent, before Django reads a naive value in the server's zone.
        try:
            parsed = parse_datetime(value.strip()) if isinstance(value, str) else None
        except ValueError:
            parsed = None  # not a real date (February 30th): super() says so
        problem = instant_problem(parsed, FILTER_YEARS) if parsed is not None else None
        if problem:
            raise forms.ValidationError(problem, code="invalid")
        return super().to_python(value)


class _BoundedIsoDateTimeRangeField(filters.fields.RangeField):
    widget = filters.widgets.DateRangeWidget

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__((_BoundedIsoDateTimeField(), _BoundedIsoDateTimeField()), *args, **kwargs)


class InstantRangeFilter(filters.IsoDateTimeFromToRangeFilter):
    """`<name>_after` / `<name>_before` as ISO 8601 instants; out-of-range ones are a 400
    before any query (PostgreSQL would refuse them mid-request)."""

    field_class = _BoundedIsoDateTimeRangeField


class FabricFilterSet(filters.FilterSet):
    site = filters.CharFilter(field_name="site__code", help_text="Site code.")

    class Meta:
        model = Fabric
        fields = ["site", "technology"]


class NodeFilterSet(filters.FilterSet):
    site = filters.CharFilter(field_name="leaf_switch__fabric__site__code", help_text="Site code.")
    fabric = IdFilter(field_name="leaf_switch__fabric_id")
    gpu_model = filters.ChoiceFilter(choices=GpuModel.choices)
    status = filters.ChoiceFilter(choices=NodeStatus.choices)
    lease = IdFilter(method="served_lease", help_text="Nodes that served a lease.")

    class Meta:
        model = Node
        fields = ["site", "fabric", "gpu_model", "status", "lease"]

    def served_lease(self, queryset, name, value):  # type: ignore[no-untyped-def]
        """Matched through the user's own leases only: a node that moved from one tenant's
        lease to another's is visible to both, and must not confirm the other's lease id."""
        return queryset.filter(
            pk__in=lease_selectors.nodes_served_to(user=self.request.user, lease_id=value)
        )


class LeaseFilterSet(filters.FilterSet):
    tenant = filters.CharFilter(field_name="tenant__slug", help_text="Tenant slug.")
    status = filters.ChoiceFilter(choices=LeaseStatus.choices)
    reference = filters.CharFilter()

    class Meta:
        model = Lease
        fields = ["tenant", "status", "reference"]


class ProbeRunFilterSet(filters.FilterSet):
    lease = IdFilter(field_name="lease_id")
    kind = filters.ChoiceFilter(choices=ProbeKind.choices)
    state = filters.ChoiceFilter(choices=RunState.choices)
    trigger = filters.ChoiceFilter(choices=Trigger.choices)
    verdict = filters.ChoiceFilter(choices=Verdict.choices)
    node = IdFilter(
        method="involving",
        help_text="Runs that involved this node: the pairs and collectives it took part in, "
        "and the link and counters sweeps of its lease while the lease held it.",
    )
    batch = filters.UUIDFilter()
    slot_at = InstantRangeFilter(
        help_text="slot_at_after / slot_at_before: ISO 8601 instants, both inclusive."
    )

    class Meta:
        model = ProbeRun
        fields = ["lease", "kind", "state", "trigger", "verdict", "node", "batch", "slot_at"]

    def involving(self, queryset, name, value):  # type: ignore[no-untyped-def]
        linked = run_selectors.run_node_links().filter(proberun_id=OuterRef("pk"), node_id=value)
        held = lease_selectors.node_held_at(
            lease_id=OuterRef("lease_id"), node_id=value, at=OuterRef("slot_at")
        )
        return queryset.filter(Exists(linked) | (Q(pattern=Pattern.SWEEP) & Exists(held)))


class IncidentFilterSet(filters.FilterSet):
    lease = IdFilter(field_name="lease_id")
    state = filters.ChoiceFilter(choices=IncidentState.choices)
    kind = filters.ChoiceFilter(
        choices=[*ProbeKind.choices, *FabricIncidentKind.choices, *MeteringIncidentKind.choices]
    )
    opened_at = InstantRangeFilter()

    class Meta:
        model = Incident
        fields = ["lease", "state", "kind", "opened_at"]


class InvoiceFilterSet(filters.FilterSet):
    tenant = filters.CharFilter(field_name="tenant__slug", help_text="Tenant slug.")
    period = filters.CharFilter(help_text="YYYY-MM.")
    status = filters.ChoiceFilter(choices=InvoiceStatus.choices)
    number = filters.CharFilter(help_text="Invoice number, e.g. GL-2026-000123.")

    class Meta:
        model = Invoice
        fields = ["tenant", "period", "status", "number"]


class CreditNoteFilterSet(filters.FilterSet):
    tenant = filters.CharFilter(field_name="tenant__slug", help_text="Tenant slug.")
    invoice = IdFilter(field_name="invoice_id", help_text="Original invoice id.")

    class Meta:
        model = CreditNote
        fields = ["tenant", "invoice"]


class VoucherFilterSet(filters.FilterSet):
    tenant = filters.CharFilter(field_name="tenant__slug", help_text="Tenant slug.")
    lease = IdFilter(field_name="lease_id", help_text="Lease id.")
    source_invoice = IdFilter(field_name="source_invoice_id", help_text="Issuing invoice id.")

    class Meta:
        model = Voucher
        fields = ["tenant", "lease", "source_invoice"]


class ApiTokenFilterSet(filters.FilterSet):
    prefix = filters.CharFilter()
    user = filters.CharFilter(field_name="user__username", help_text="Username.")
    tenant = filters.CharFilter(field_name="tenant__slug", help_text="Tenant slug.")
    issuer = filters.CharFilter(field_name="issuer__username", help_text="Issuer's username.")

    class Meta:
        model = ApiToken
        fields = ["prefix", "user", "tenant", "issuer"]
