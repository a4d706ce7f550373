from django import forms
from django.contrib import admin
from rest_framework import serializers

from api.serializers import terms_changes
from billing import admin as billing_admin
from leases import admin as leases_admin
from leases.models import TermsAmendment


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
