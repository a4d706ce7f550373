from django.contrib import admin
from django.db import models


class StampedAdmin(admin.ModelAdmin):
    """Created/updated stamps shown, never edited."""

    stamp_fields = ("created_at", "updated_at")
    # A URL typed without a scheme is https (Django 6's default, chosen now).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return tuple(super().get_readonly_fields(request, obj)) + self.stamp_fields
