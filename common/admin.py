from django.contrib import admin
from django.db import models

from common.models import PartitionArchive


class StampedAdmin(admin.ModelAdmin):
    """Created/updated stamps shown, never edited."""

    stamp_fields = ("created_at", "updated_at")
    # A URL typed without a scheme is https (Django 6's default, chosen now).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return tuple(super().get_readonly_fields(request, obj)) + self.stamp_fields


@admin.register(PartitionArchive)
class PartitionArchiveAdmin(admin.ModelAdmin):
    """Months archived to files (``manage.py partitions``): read-only, never deleted here."""

    list_display = ("month", "path", "size_bytes", "archived_at", "restored_at", "seconds")
    readonly_fields = (
        "month",
        "path",
        "sha256",
        "size_bytes",
        "rows",
        "archived_at",
        "seconds",
        "restored_at",
    )

    def has_add_permission(self, request):  # type: ignore[no-untyped-def]
        return False

    def has_change_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False

    def has_delete_permission(self, request, obj=None):  # type: ignore[no-untyped-def]
        return False
