from django.contrib import admin

from accounts.models import ApiToken, Membership
from common.admin import StampedAdmin


@admin.register(Membership)
class MembershipAdmin(StampedAdmin):
    list_display = ["user", "tenant", "role"]
    list_filter = ["role", "tenant"]
    search_fields = ["user__username", "user__email", "tenant__name"]
    autocomplete_fields = ["user", "tenant"]
    list_select_related = ["user", "tenant"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Read-only: tokens are issued by create_api_token or the API, never typed in."""

    list_display = [
        "prefix",
        "name",
        "user",
        "tenant",
        "role",
        "issuer",
        "scopes",
        "created_at",
        "expires_at",
        "revoked_at",
    ]
    list_filter = ["revoked_at", "holder_is_staff"]
    search_fields = ["prefix", "name", "user__username"]
    readonly_fields = [
        "user",
        "issuer",
        "tenant",
        "role",
        "holder_is_staff",
        "name",
        "prefix",
        "scopes",
        "created_at",
        "expires_at",
        "revoked_at",
        "last_used_at",
    ]
    exclude = ["secret_hash"]

    def has_add_permission(self, request) -> bool:  # type: ignore[no-untyped-def]
        return False
