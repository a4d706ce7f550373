from django.contrib import admin, messages
from django.utils.translation import gettext_lazy as _

from benchmarks import services
from benchmarks.models import NodeLock, ProbeRun, SiteAlert
from common.admin import requires
from gpulease_verify.units import format_bps
from leases.admin import LeaseAdmin
from leases.models import Lease


@admin.register(ProbeRun)
class ProbeRunAdmin(admin.ModelAdmin):
    """Runs are evidence: shown in full, never edited."""

    list_display = [
        "slot_at",
        "lease",
        "kind",
        "tool",
        "target",
        "pattern",
        "state",
        "verdict",
        "measured",
        "trigger",
    ]
    list_filter = ["state", "verdict", "kind", "tool", "trigger", "pattern", "site"]
    search_fields = ["lease__reference", "target", "verdict_reason", "error", "raw_sha256"]
    list_select_related = ["lease"]
    date_hierarchy = "slot_at"
    show_full_result_count = False  # a year of 5-minute runs: skip the COUNT(*)
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "lease",
                    "site",
                    "kind",
                    "tool",
                    "target",
                    "pattern",
                    "trigger",
                    "batch",
                    "nodes",
                ]
            },
        ),
        (
            _("when"),
            {
                "fields": [
                    "slot_at",
                    "deadline_at",
                    "claimed_at",
                    "started_at",
                    "finished_at",
                    "attempts",
                    "state",
                ]
            },
        ),
        (
            _("verdict"),
            {
                "fields": [
                    "terms",
                    "verdict",
                    "rule",
                    "verdict_reason",
                    "measured_bps",
                    "latency_us",
                    "error",
                ]
            },
        ),
        (
            _("evidence"),
            {
                "fields": [
                    "command",
                    "exit_code",
                    "raw_sha256",
                    "output_truncated",
                    "raw_output",
                    "stderr",
                    "parsed",
                ]
            },
        ),
    ]

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return [field for fieldset in self.fieldsets for field in fieldset[1]["fields"]]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    @admin.display(description=_("measured"))
    def measured(self, run: ProbeRun) -> str:
        if run.measured_bps is not None:
            return format_bps(run.measured_bps)
        if run.latency_us is not None:
            return f"{run.latency_us:.1f} µs"
        return "-"


@admin.register(NodeLock)
class NodeLockAdmin(admin.ModelAdmin):
    list_display = ["node", "batch", "acquired_at", "expires_at"]
    search_fields = ["node__hostname", "batch"]
    list_select_related = ["node"]


@admin.register(SiteAlert)
class SiteAlertAdmin(admin.ModelAdmin):
    list_display = ["raised_at", "site", "kind", "cleared_at", "message"]
    list_filter = ["kind", "site", ("cleared_at", admin.EmptyFieldListFilter)]
    search_fields = ["message", "site__name"]
    list_select_related = ["site"]
    readonly_fields = ["site", "kind", "message", "raised_at", "cleared_at"]

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False


@admin.action(description=_("Run all probes now"), permissions=["run_probes_now"])
def run_probes_now(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    queued = 0
    for lease in queryset:
        try:
            asked = services.run_now(lease=lease, tenant_request=False)
        except ValueError as error:
            modeladmin.message_user(request, str(error), messages.ERROR)
            continue
        if asked.already_pending:
            modeladmin.message_user(
                request,
                _("%(lease)s: its earlier run-now runs are still pending; nothing new queued.")
                % {"lease": lease.reference},
                messages.WARNING,
            )
        else:
            queued += len(asked.batches)
    if queued:
        modeladmin.message_user(
            request,
            _("%(n)d probe batches queued; their runs appear under probe runs.") % {"n": queued},
            messages.SUCCESS,
        )


# Probes extend the lease page of the leases app (which cannot know about them).
admin.site.unregister(Lease)


@admin.register(Lease)
class LeaseWithProbesAdmin(LeaseAdmin):
    actions = [*LeaseAdmin.actions, run_probes_now]
    has_run_probes_now_permission = requires("benchmarks.run_probes_now")
