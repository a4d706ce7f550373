from django.contrib import admin


class StampedAdmin(admin.ModelAdmin):
    """Created/updated stamps shown, never edited."""

    stamp_fields = ("created_at", "updated_at")

    def get_readonly_fields(self, request, obj=None):  # type: ignore[no-untyped-def]
        return tuple(super().get_readonly_fields(request, obj)) + self.stamp_fields
