"""The admin action "Re-rate from the corrected terms" (``billing.rerate``), for the admin
of acknowledged retroactive amendments (``TermsAmendment``) or of terms versions
(``LeaseTerms``): each selected one re-rates its lease from its ``effective_from`` to now.
Wired in ``billing/admin.py``, which extends the leases app's two admins with it, offered
to holders of ``billing.rerate_lease``."""

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from billing.rerate import rerate
from leases.models import LeaseTerms, TermsAmendment


def _version(item: Any) -> LeaseTerms | None:
    """The terms version a selected row stands for: itself, or the version an amendment
    became once acknowledged (None while it waits)."""
    if isinstance(item, TermsAmendment):
        return item.terms
    return item


@admin.action(description=_("Re-rate from the corrected terms"), permissions=["rerate_lease"])
def rerate_from_corrected_terms(modeladmin, request, queryset):  # type: ignore[no-untyped-def]
    now = timezone.now()
    done = 0
    for item in queryset.select_related("lease__tenant"):
        version = _version(item)
        if version is None:
            modeladmin.message_user(
                request,
                _(
                    "The amendment of lease %(lease)s waits for a tenant admin's "
                    "acknowledgement; re-rate once it is acknowledged."
                )
                % {"lease": item.lease.reference},
                messages.ERROR,
            )
            continue
        try:
            result = rerate(item.lease, version.effective_from, now, user=request.user, now=now)
        except ValidationError as error:
            modeladmin.message_user(request, " ".join(error.messages), messages.ERROR)
            continue
        done += 1
        modeladmin.message_user(
            request,
            _(
                "Lease %(lease)s re-rated under terms v%(version)s: %(runs)d run(s) judged "
                "again, %(up)d fail -> pass, %(down)d pass -> fail, %(drafts)d draft(s) rebuilt."
            )
            % {
                "lease": item.lease.reference,
                "version": version.version,
                "runs": result.runs_rejudged,
                "up": result.fail_to_pass,
                "down": result.pass_to_fail,
                "drafts": len(result.drafts),
            },
            messages.SUCCESS,
        )
    if done > 1:
        modeladmin.message_user(
            request,
            ngettext("%(n)d lease re-rated.", "%(n)d leases re-rated.", done) % {"n": done},
            messages.SUCCESS,
        )
