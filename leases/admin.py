from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.forms.models import BaseInlineFormSet
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from accounts.models import Membership
from common.admin import StampedAdmin, requires
from leases import selectors, services, tenant_settings
from leases.choices import LeaseStatus
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
    TenantSettingsEvent,
    TermsAmendment,
)
from leases.models.tenants import MASKED_SECRET, WEBHOOK_SECRET_PERMISSION


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class TenantSettingsEventInline(admin.TabularInline):
    """Who changed the contacts and webhook, on the portal's settings page or here."""

    model = TenantSettingsEvent
    extra = 0
    can_delete = False
    fields = ("at", "actor_username", "fields")
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(Tenant)
class TenantAdmin(StampedAdmin):
    list_display = ["name", "slug", "contact_name", "contact_email", "time_zone", "currency"]
    list_filter = ["time_zone", "currency"]
    search_fields = ["name", "slug", "contact_name", "contact_email"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline, TenantSettingsEventInline]

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        """A staff correction of the contacts or webhook is recorded as the tenant's own
        changes are (leases.tenant_settings): the fields whose stored value changed."""
        fields = tenant_settings.SETTINGS_FIELDS
        before = Tenant.objects.filter(pk=obj.pk).values(*fields).first() if change else None
        if before is not None and before["webhook_secret"] != obj.webhook_secret:
            # A new secret replaces the old as a rotation does: the old signs on beside it.
            replacement, obj.webhook_secret = obj.webhook_secret, before["webhook_secret"]
            obj.replace_webhook_secret(replacement, at=timezone.now())
        super().save_model(request, obj, form, change)
        if before is not None:
            changed = [name for name in fields if before[name] != getattr(obj, name)]
            tenant_settings.record_change(tenant=obj, actor=request.user, fields=changed)

    # The signing secret is shown (and editable) only with WEBHOOK_SECRET_PERMISSION;
    # anybody else sees it masked, and their form has no field for it.
    def get_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        fields = list(super().get_fields(request, obj))
        if request.user.has_perm(WEBHOOK_SECRET_PERMISSION):
            return fields
        return [name for name in fields if name != "webhook_secret"] + ["masked_webhook_secret"]

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        fields = tuple(super().get_readonly_fields(request, obj))
        if request.user.has_perm(WEBHOOK_SECRET_PERMISSION):
            return fields
        return (*fields, "masked_webhook_secret")

    @admin.display(description=_("webhook signing secret"))
    def masked_webhook_secret(self, tenant: Tenant) -> str:
        return MASKED_SECRET


def _changes(form: forms.ModelForm) -> dict:  # type: ignore[type-arg]
    return {name: form.cleaned_data[name] for name in form.changed_data}


def _fields(form: forms.ModelForm) -> dict:  # type: ignore[type-arg]
    return {name: form.cleaned_data[name] for name in form.fields if name in form.cleaned_data}


@admin.register(Site)
class SiteAdmin(StampedAdmin):
    list_display = ["name", "code", "city", "region"]
    list_filter = ["region", "city"]
    search_fields = ["name", "code", "city"]

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        if change:
            services.update_site(site=obj, changes=_changes(form))
        else:
            obj.pk = services.create_site(**_fields(form)).pk
            obj._state.adding = False


class SwitchInline(admin.TabularInline):
    model = Switch
    extra = 0


@admin.register(Fabric)
class FabricAdmin(StampedAdmin):
    list_display = [
        "name",
        "site",
        "technology",
        "port_speed_gbps",
        "topology",
        "oversubscription_display",
        "adaptive_routing",
    ]
    list_filter = ["technology", "topology", "adaptive_routing", "site"]
    search_fields = ["name", "site__name", "site__city"]
    list_select_related = ["site"]
    inlines = [SwitchInline]

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        if change:
            services.update_fabric(fabric=obj, changes=_changes(form))
        else:
            obj.pk = services.create_fabric(**_fields(form)).pk
            obj._state.adding = False

    @admin.display(description=_("oversubscription ratio (收敛比)"), ordering="oversubscription")
    def oversubscription_display(self, fabric: Fabric) -> str:
        return fabric.oversubscription_label


@admin.register(Switch)
class SwitchAdmin(StampedAdmin):
    list_display = ["name", "role", "fabric"]
    list_filter = ["role", "fabric__technology", "fabric__site"]
    search_fields = ["name", "fabric__name"]
    list_select_related = ["fabric__site"]


class NicPortInline(admin.TabularInline):
    model = NicPort
    extra = 0


@admin.register(Node)
class NodeAdmin(StampedAdmin):
    list_display = [
        "hostname",
        "gpu_model",
        "gpu_count",
        "status",
        "leaf_switch",
        "fabric",
        "site",
        "management_address",
    ]
    list_filter = [
        "status",
        "gpu_model",
        "leaf_switch__fabric__technology",
        "leaf_switch__fabric__site",
        "leaf_switch__fabric",
    ]
    search_fields = ["hostname", "management_address", "leaf_switch__name"]
    list_select_related = ["leaf_switch__fabric__site"]
    autocomplete_fields = ["leaf_switch"]
    inlines = [NicPortInline]

    @admin.display(description=_("fabric"), ordering="leaf_switch__fabric__name")
    def fabric(self, node: Node) -> Fabric:
        return node.leaf_switch.fabric

    @admin.display(description=_("site"), ordering="leaf_switch__fabric__site__name")
    def site(self, node: Node) -> Site:
        return node.leaf_switch.fabric.site


@admin.register(NicPort)
class NicPortAdmin(StampedAdmin):
    list_display = ["node", "device", "port_number", "netdev", "address", "rate_gbps", "link_layer"]
    list_filter = ["link_layer", "rate_gbps"]
    search_fields = ["node__hostname", "device", "netdev"]
    list_select_related = ["node"]
    autocomplete_fields = ["node"]


class AssignmentForm(forms.ModelForm):
    """A new row picks a node and its period; an existing row can only be ended earlier
    (its node and start are history: a swap is ending one row and adding another)."""

    class Meta:
        model = NodeAssignment
        fields = ["node", "assigned_from", "assigned_until"]

    def __init__(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            for name in ("node", "assigned_from"):
                self.fields[name].disabled = True
            if self.instance.void:
                self.fields["assigned_until"].disabled = True


class AssignmentFormSet(BaseInlineFormSet):
    """The rules services.assign_node and services.release_node apply, checked before
    anything is saved so that a refusal reads as a sentence in the form; save_formset
    then calls those services, which record the lease's events."""

    def clean(self) -> None:
        super().clean()
        lease: Lease = self.instance
        if lease.pk is None and not lease.starts_at:
            return
        rows = []
        for form in self.forms:
            data = getattr(form, "cleaned_data", None)
            if not data or not data.get("node"):
                continue
            if form.instance.pk is not None:
                self._check_release(form, data)
                continue
            node, start = data["node"], data.get("assigned_from")
            if start is None:
                continue
            # Empty means "until the lease ends", as services.assign_node stores it.
            end = data.get("assigned_until") or lease.ends_at
            try:
                services.ensure_lease_open(lease)
                services.validate_assignment_period(lease=lease, node=node, start=start, end=end)
                services.ensure_node_free(node=node, start=start, end=end)
            except ValidationError as error:
                form.add_error(None, error)
            rows.append((form, node, start, end))
        for index, (form, node, start, end) in enumerate(rows):
            for _other, other_node, other_start, other_end in rows[index + 1 :]:
                if (
                    node == other_node
                    and (other_end is None or start < other_end)
                    and (end is None or other_start < end)
                ):
                    form.add_error(
                        None,
                        _("Node %(node)s appears twice in this lease over overlapping time.")
                        % {"node": node.hostname},
                    )

    @staticmethod
    def _check_release(form: forms.ModelForm, data: dict) -> None:  # type: ignore[type-arg]
        if "assigned_until" not in form.changed_data:
            return
        stored = NodeAssignment.objects.get(pk=form.instance.pk)
        until = data.get("assigned_until")
        if until is None:
            form.add_error(
                "assigned_until",
                _("An assignment is ended at an instant; to extend it, add a new row."),
            )
            return
        try:
            services.validate_release(assignment=stored, at=until)
        except ValidationError as error:
            form.add_error("assigned_until", error)


class NodeAssignmentInline(admin.TabularInline):
    model = NodeAssignment
    form = AssignmentForm
    formset = AssignmentFormSet
    extra = 0
    can_delete = False  # history: end a row instead
    autocomplete_fields = ["node"]
    fields = ["node", "assigned_from", "assigned_until", "void"]
    readonly_fields = ["void"]


class LeaseTermsInline(admin.TabularInline):
    """Versions are history: shown here, added on the terms page, never edited."""

    model = LeaseTerms
    extra = 0
    can_delete = False
    show_change_link = True
    fields = [
        "version",
        "effective_from",
        "contracted_bandwidth_gbps",
        "technology",
        "sla_threshold_percent",
        "billing_mode",
        "node_rent_per_month",
        "network_fee_per_month",
        "amendment_reason",
    ]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


class LeaseEventInline(admin.TabularInline):
    model = LeaseEvent
    extra = 0
    can_delete = False
    fields = ["at", "action", "actor", "detail"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


def _transition(modeladmin, request, queryset, to: str) -> None:  # type: ignore[no-untyped-def]
    done = 0
    for lease in queryset:
        try:
            services.transition_lease(lease=lease, to=to, actor=request.user)
            done += 1
        except ValidationError as error:
            modeladmin.message_user(request, " ".join(error.messages), messages.ERROR)
    if done:
        modeladmin.message_user(
            request,
            ngettext("%(n)d lease is now %(s)s.", "%(n)d leases are now %(s)s.", done)
            % {"n": done, "s": LeaseStatus(to).label},
            messages.SUCCESS,
        )


@admin.action(description=_("Activate selected leases"), permissions=["transition_lease"])
def activate(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    _transition(modeladmin, request, queryset, LeaseStatus.ACTIVE)


@admin.action(description=_("End selected leases now"), permissions=["transition_lease"])
def end(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    _transition(modeladmin, request, queryset, LeaseStatus.ENDED)


@admin.action(description=_("Cancel selected leases"), permissions=["transition_lease"])
def cancel(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    _transition(modeladmin, request, queryset, LeaseStatus.CANCELLED)


@admin.register(Lease)
class LeaseAdmin(StampedAdmin):
    list_display = [
        "reference",
        "name",
        "tenant",
        "status",
        "starts_at",
        "ends_at",
        "probes_enabled",
    ]
    list_filter = ["status", "probes_enabled", "tenant", "terms__billing_mode", "terms__technology"]
    search_fields = ["reference", "name", "tenant__name", "assignments__node__hostname"]
    list_select_related = ["tenant"]
    date_hierarchy = "starts_at"
    autocomplete_fields = ["tenant"]
    readonly_fields = ["status"]
    actions = [activate, end, cancel]
    inlines = [NodeAssignmentInline, LeaseTermsInline, LeaseEventInline]

    has_transition_lease_permission = requires("leases.transition_lease")

    def get_search_results(self, request, queryset, search_term):  # type: ignore[no-untyped-def]
        queryset, _may_have_duplicates = super().get_search_results(request, queryset, search_term)
        return queryset.distinct(), False

    def save_formset(self, request, form, formset, change):  # type: ignore[no-untyped-def]
        if formset.model is NodeAssignment:
            # Through the services, which record the lease's events. Ends first: they only
            # free nodes, so the additions checked in clean() still hold.
            formset.changed_objects, formset.new_objects, formset.deleted_objects = [], [], []
            for row in formset.initial_forms:
                if "assigned_until" in row.changed_data:
                    services.release_node(
                        assignment=row.instance,
                        at=row.cleaned_data["assigned_until"],
                        actor=request.user,
                    )
                    formset.changed_objects.append((row.instance, ["assigned_until"]))
            for row in formset.extra_forms:
                if row.has_changed() and not row.cleaned_data.get("DELETE"):
                    data = row.cleaned_data
                    row.instance = services.assign_node(
                        lease=form.instance,
                        node=data["node"],
                        assigned_from=data["assigned_from"],
                        assigned_until=data.get("assigned_until"),
                        actor=request.user,
                    )
                    formset.new_objects.append(row.instance)
            return
        super().save_formset(request, form, formset, change)

    def change_view(self, request, object_id, form_url="", extra_context=None):  # type: ignore[no-untyped-def]
        lease = self.get_object(request, object_id)
        if lease is not None and request.method == "GET":
            for warning in selectors.contract_warnings(lease=lease):
                messages.warning(request, warning)
        return super().change_view(request, object_id, form_url, extra_context)


# Set by the services when a version is created: its place in the chain, and who
# acknowledged it (a tenant admin, through the API; never typed in here).
LINK_FIELDS = [
    "chain_index",
    "prev_hash",
    "terms_hash",
    "acknowledged_by",
    "acknowledged_by_username",
    "acknowledged_by_role",
    "acknowledged_at",
    "acknowledgement_reason",
]


class LeaseTermsForm(forms.ModelForm):
    class Meta:
        model = LeaseTerms
        exclude = ["version", *LINK_FIELDS]  # noqa: DJ006 (every other field belongs here)

    def clean(self):  # type: ignore[no-untyped-def]
        data = super().clean()
        lease, effective_from = data.get("lease"), data.get("effective_from")
        if lease is not None and effective_from is not None and self.instance.pk is None:
            services.validate_new_terms_version(
                lease=lease, effective_from=effective_from, reason=data.get("amendment_reason", "")
            )
        return data


@admin.register(LeaseTerms)
class LeaseTermsAdmin(StampedAdmin):
    """Add a version to amend a lease; an existing version is read-only."""

    list_display = [
        "lease",
        "version",
        "effective_from",
        "contracted_bandwidth_gbps",
        "technology",
        "billing_mode",
        "sla_threshold_percent",
    ]
    list_filter = ["billing_mode", "technology", "heavy_probe_policy"]
    search_fields = ["lease__reference", "lease__tenant__name", "amendment_reason"]
    list_select_related = ["lease"]
    autocomplete_fields = ["lease"]
    form = LeaseTermsForm

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        fields = super().get_readonly_fields(request, obj)
        return (*fields, "version", *LINK_FIELDS) if obj else fields

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        services.add_terms_version(terms=obj, actor=request.user)
        for warning in selectors.contract_warnings(lease=obj.lease, terms=obj):
            messages.warning(request, warning)


class TermsAmendmentForm(forms.ModelForm):
    class Meta:
        model = TermsAmendment
        fields = ["lease", "effective_from", "changes", "reason"]

    def check_changes(self, changes: dict) -> None:
        """The rules the API applies to the same changes: the api app's admin checks them
        (api.admin.TermsAmendmentForm), as this app cannot know the API."""

    def clean(self):  # type: ignore[no-untyped-def]
        data = super().clean()
        if not self.errors:
            self.check_changes(data["changes"] or {})
            services.validate_retroactive_amendment(
                lease=data["lease"],
                effective_from=data["effective_from"],
                changes=data["changes"],
                reason=data["reason"],
            )
        return data


@admin.register(TermsAmendment)
class TermsAmendmentAdmin(StampedAdmin):
    """Propose a retroactive amendment; a tenant admin acknowledges it through the API
    (POST /api/v1/terms-amendments/<id>/acknowledge/), which makes it a terms version."""

    list_display = ["lease", "effective_from", "status", "proposed_by", "terms", "created_at"]
    list_filter = ["status"]
    search_fields = ["lease__reference", "reason"]
    list_select_related = ["lease", "proposed_by", "terms"]
    autocomplete_fields = ["lease"]
    form = TermsAmendmentForm

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        fields = super().get_readonly_fields(request, obj)
        return (*fields, "status", "proposed_by", "terms")

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def save_model(self, request, obj, form, change):  # type: ignore[no-untyped-def]
        saved = services.propose_retroactive_amendment(
            lease=obj.lease,
            effective_from=obj.effective_from,
            changes=obj.changes or {},
            reason=obj.reason,
            actor=request.user,
        )
        obj.pk, obj._state.adding = saved.pk, False


@admin.register(NodeAssignment)
class NodeAssignmentAdmin(StampedAdmin):
    list_display = ["node", "lease", "assigned_from", "assigned_until", "void"]
    list_filter = ["void", "lease__status", "node__gpu_model"]
    search_fields = ["node__hostname", "lease__reference"]
    list_select_related = ["node", "lease"]
    date_hierarchy = "assigned_from"

    # Assignments change on their lease's page, where overlaps are checked as a whole.
    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False


@admin.register(LeaseEvent)
class LeaseEventAdmin(admin.ModelAdmin):
    list_display = ["at", "lease", "action", "actor"]
    list_filter = ["action"]
    search_fields = ["lease__reference"]
    list_select_related = ["lease", "actor"]
    readonly_fields = ["lease", "at", "actor", "action", "detail"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False
