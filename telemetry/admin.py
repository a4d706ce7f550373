from django.contrib import admin

from common.admin import ReadOnlyAdmin
from telemetry.models import NodeReading, PortClearance, PortSample, SwitchReading


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
