"""The incident pages: read-only, with the repair statements (acknowledged, mitigated).
telemetry/admin.py extends them with the actions that need the layers above incidents:
resolving measurement-integrity disputes (benchmarks) and clearing flapping ports
(telemetry)."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import gettext_lazy as _

from common.admin import ReadOnlyAdmin, requires
from gpulease_verify.units import format_bps
from incidents import repair
from incidents.models import Incident

INCIDENT_FIELDS = (
    "lease",
    "kind",
    "target",
    "pattern",
    "state",
    "opened_at",
    "source",
    "opened_by",
    "acknowledged_at",
    "acknowledged_by",
    "mitigated_at",
    "mitigated_by",
    "closed_at",
    "closed_source",
    "closed_by",
    "repair_note",
    "violations",
    "worst_bps",
    "worst_latency_us",
    "rule",
    "detail",
    "terms",
    "evidence",
    "notified_open_at",
    "notified_close_at",
)


@admin.register(Incident)
class IncidentAdmin(ReadOnlyAdmin):
    list_display = [
        "opened_at",
        "lease",
        "kind",
        "target",
        "state",
        "closed_at",
        "violations",
        "worst",
        "rule",
    ]
    list_filter = ["state", "kind"]
    search_fields = ["lease__reference", "target", "rule"]
    list_select_related = ["lease"]
    date_hierarchy = "opened_at"
    fields = INCIDENT_FIELDS
    readonly_fields = INCIDENT_FIELDS

    actions = ["acknowledge", "mitigate"]
    has_acknowledge_incident_permission = requires("incidents.acknowledge_incident")
    has_mitigate_incident_permission = requires("incidents.mitigate_incident")

    def _repair_statement(self, request, queryset, service, done: str):  # type: ignore[no-untyped-def]
        stated, refused = 0, []
        for incident in queryset:
            try:
                service(incident_id=incident.pk, user=request.user)
            except repair.RepairError as error:
                refused.append(" ".join(error.messages))
            else:
                stated += 1
        self.message_user(request, done % {"n": stated})
        for message in refused:
            self.message_user(request, message, level=messages.WARNING)

    @admin.action(
        description=_("Acknowledge the selected network faults"),
        permissions=["acknowledge_incident"],
    )
    def acknowledge(self, request, queryset):  # type: ignore[no-untyped-def]
        self._repair_statement(
            request, queryset, repair.acknowledge, _("%(n)s incident(s) acknowledged.")
        )

    @admin.action(
        description=_("Mark the selected network faults mitigated"),
        permissions=["mitigate_incident"],
    )
    def mitigate(self, request, queryset):  # type: ignore[no-untyped-def]
        self._repair_statement(
            request, queryset, repair.mitigate, _("%(n)s incident(s) marked mitigated.")
        )

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        # The list's resolve and clear actions (telemetry/admin.py) need it; an incident
        # itself is never edited.
        return obj is None and admin.ModelAdmin.has_change_permission(self, request)

    @admin.display(description=_("worst"))
    def worst(self, incident: Incident) -> str:
        if incident.worst_bps is not None:
            return format_bps(incident.worst_bps)
        if incident.worst_latency_us is not None:
            return f"{incident.worst_latency_us:.1f} µs"
        return "-"

    @admin.display(description=_("evidence runs"))
    def evidence(self, incident: Incident) -> str:
        runs = incident.runs.order_by("slot_at", "pk")
        if not runs:
            return "-"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "",
                '<li><a href="{}">{}</a> {} {}</li>',
                (
                    (
                        reverse("admin:benchmarks_proberun_change", args=[run.pk]),
                        str(run),
                        run.state,
                        run.verdict,
                    )
                    for run in runs
                ),
            ),
        )
