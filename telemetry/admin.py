from django import forms
from django.contrib import admin
from django.template.response import TemplateResponse
from django.utils.translation import gettext_lazy as _

from benchmarks.witness import resolve_integrity_incidents
from common.admin import ReadOnlyAdmin
from incidents import admin as incidents_admin
from incidents.models import Incident
from telemetry.models import NodeReading, PortClearance, PortSample, SwitchReading
from telemetry.services import clear_incidents


@admin.register(PortSample)
class PortSampleAdmin(ReadOnlyAdmin):
    list_display = ["at", "node", "port", "seconds", "up", "down_cycles", "reset", "disputed"]
    list_filter = ["up", "reset"]
    search_fields = ["node__hostname", "port"]
    list_select_related = ["node"]
    date_hierarchy = "at"
    show_full_result_count = False


@admin.register(SwitchReading)
class SwitchReadingAdmin(ReadOnlyAdmin):
    list_display = ["at", "switch", "if_name", "in_octets", "out_octets", "oper_up", "in_errors"]
    list_filter = ["oper_up"]
    search_fields = ["switch__name", "if_name"]
    list_select_related = ["switch"]
    date_hierarchy = "at"
    show_full_result_count = False


@admin.register(NodeReading)
class NodeReadingAdmin(ReadOnlyAdmin):
    list_display = ["node", "at", "failed_at", "error"]
    search_fields = ["node__hostname", "error"]
    list_select_related = ["node"]


@admin.register(PortClearance)
class PortClearanceAdmin(ReadOnlyAdmin):
    list_display = ["at", "node", "port", "by", "reason"]
    search_fields = ["node__hostname", "port", "by"]
    list_select_related = ["node"]
    date_hierarchy = "at"


class ReasonForm(forms.Form):
    reason = forms.CharField(label=_("reason"), widget=forms.Textarea, max_length=2000)


# The incident pages of the incidents app (which cannot know about the layers above it)
# gain the two actions that need them.
admin.site.unregister(Incident)


@admin.register(Incident)
class IncidentAdmin(incidents_admin.IncidentAdmin):
    actions = ["resolve_disputes", "clear_ports", "acknowledge", "mitigate"]

    @admin.action(
        description=_("Resolve the selected measurement-integrity incidents"),
        permissions=["change"],
    )
    def resolve_disputes(self, request, queryset):  # type: ignore[no-untyped-def]
        """A person looked at what the switch and the node each said. The disputed runs
        keep no verdict: they never pass and never earn a credit."""
        resolved = resolve_integrity_incidents(queryset, by=request.user.get_username())
        self.message_user(
            request,
            _(
                "%(n)s measurement-integrity incident(s) resolved; their disputed runs stay "
                "without a verdict."
            )
            % {"n": resolved},
        )

    @admin.action(
        description=_("Clear the ports of the selected flap and drop incidents (asks why)"),
        permissions=["change"],
    )
    def clear_ports(self, request, queryset):  # type: ignore[no-untyped-def]
        """An operator inspected the link (a cable reseated, a transceiver replaced): the
        port's sticky flap finding ends now and its rules count afresh, as after gpud's
        set-healthy. Who and why go into the lease's chain."""
        form = ReasonForm(request.POST if "reason" in request.POST else None)
        if form.is_valid():
            cleared = clear_incidents(
                queryset, by=request.user.get_username(), reason=form.cleaned_data["reason"]
            )
            self.message_user(
                request,
                _("%(n)s port(s) cleared; their flap and drop incidents are closed.")
                % {"n": cleared},
            )
            return None
        return TemplateResponse(
            request,
            "admin/telemetry/clear_ports.html",
            {
                **self.admin_site.each_context(request),
                "title": _("Clear flapping ports"),
                "incidents": queryset,
                "form": form,
                "opts": self.model._meta,
                "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
            },
        )
