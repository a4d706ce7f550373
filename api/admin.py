from django import forms
from django.contrib import admin
from rest_framework import serializers

from api.models import ApiToken
from api.serializers import terms_changes
from billing import admin as billing_admin
from leases import admin as leases_admin
from leases.models import TermsAmendment


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


class TermsAmendmentForm(leases_admin.TermsAmendmentForm):
    def check_changes(self, changes: dict) -> None:
        try:  # the rules the API applies to the same changes
            terms_changes(changes)
        except serializers.ValidationError as refused:
            raise forms.ValidationError({"changes": list(refused.detail)}) from None


# The API's rules for an amendment's changes extend the amendment page (of the leases app,
# with billing's re-rate action), which cannot know the API.
admin.site.unregister(TermsAmendment)


@admin.register(TermsAmendment)
class TermsAmendmentAdmin(billing_admin.TermsAmendmentAdmin):
    form = TermsAmendmentForm
