"""The tenant's signing keys and what it signs in the portal (issue 29; the rules:
``gpulease_verify.cosign``, the writes: ``leases.cosign`` and ``leases.services``).

The signing keys page lists each of the user's tenants' keys; a tenant admin registers a
key (pasting its public half, then the signature of the registration content the page
shows, or generating one in the browser: portal/static/portal/cosign.js) and revokes one.
The amendment page lets a tenant admin acknowledge a pending amendment; when the tenant
holds a key it shows the content to sign (with the reason typed) and takes the signature,
made in the browser with the key file or on the command line. Provider staff never act as
a tenant user: the keys page does not exist for them."""

import shlex
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts.choices import Role
from accounts.models import Membership
from accounts.selectors import has_role, memberships_of
from common.querysets import is_provider_staff
from gpulease_verify.canonical import canonical_json, parse_instant
from leases import cosign, services
from leases import selectors as lease_selectors
from leases.models import TermsAmendment

SIGN_COMMAND = "gpulease-verify sign --key KEY.pem content.json"


class SignedAtField(forms.CharField):
    """The signed content's ``at``, exactly as it was shown (ISO 8601 UTC)."""

    def clean(self, value: Any) -> Any:
        text = super().clean(value)
        if not text:
            return None
        try:
            return parse_instant(text)
        except (TypeError, ValueError):
            raise ValidationError(
                _("Not an instant: give it as the content to sign shows it.")
            ) from None


class KeyForm(forms.Form):
    public_key = forms.CharField(
        label=gettext_lazy("Public key"),
        max_length=400,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 70, "spellcheck": "false"}),
        help_text=gettext_lazy("Ed25519: PEM, or the base64 of its 32 bytes."),
    )
    label = forms.CharField(label=gettext_lazy("Label"), max_length=100, required=False)
    signed_at = SignedAtField(required=False, widget=forms.HiddenInput)
    signature = forms.CharField(
        label=gettext_lazy("Signature"),
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"size": 90, "spellcheck": "false"}),
    )


class AcknowledgeForm(forms.Form):
    reason = forms.CharField(
        label=gettext_lazy("Reason"),
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text=gettext_lazy("Why the tenant accepts the amendment from its date."),
    )
    signed_at = SignedAtField(required=False, widget=forms.HiddenInput)
    signature = forms.CharField(
        label=gettext_lazy("Signature"),
        max_length=100,
        required=False,
        widget=forms.TextInput(attrs={"size": 90, "spellcheck": "false"}),
    )


def to_sign(content: dict[str, Any]) -> dict[str, Any]:
    """What a page shows to sign: the canonical text and the command line that signs it."""
    canonical = canonical_json(content)
    return {
        "content": content,
        "canonical": canonical,
        "signed_at": content["at"],
        "save_command": f"printf '%s' {shlex.quote(canonical)} > content.json",
        "sign_command": SIGN_COMMAND,
    }


def _show_refusal(form: forms.Form, error: ValidationError) -> None:
    if hasattr(error, "error_dict"):
        for field, messages in error.message_dict.items():
            form.add_error(field if field in form.fields else None, messages)
    else:
        form.add_error(None, error.messages)


# --- the keys page ------------------------------------------------------------------------


def _memberships(request: HttpRequest) -> list[Membership]:
    if is_provider_staff(request.user):
        raise Http404  # provider staff never act as a tenant user
    return list(memberships_of(request.user))


def _keys_page(
    request: HttpRequest,
    forms_by_tenant: dict[int, KeyForm] | None = None,
    prepared: dict[int, dict[str, Any]] | None = None,
    status: int = 200,
) -> HttpResponse:
    memberships = _memberships(request)
    keys = lease_selectors.tenant_keys_visible_to(request.user).filter(
        tenant__in=[m.tenant_id for m in memberships]
    )
    sections = []
    for membership in memberships:
        tenant = membership.tenant
        sections.append(
            {
                "tenant": tenant,
                "is_admin": membership.role == Role.ADMIN,
                "role": membership.get_role_display(),
                "keys": [key for key in keys if key.tenant_id == tenant.pk],
                "form": (forms_by_tenant or {}).get(tenant.pk) or KeyForm(prefix=tenant.slug),
                "prepared": (prepared or {}).get(tenant.pk),
            }
        )
    zone = memberships[0].tenant.time_zone if memberships else "UTC"
    return render(
        request,
        "portal/signing_keys.html",
        {"sections": sections, "zone": zone, "sign_command": SIGN_COMMAND},
        status=status,
    )


@never_cache
@login_required
def signing_keys(request: HttpRequest) -> HttpResponse:
    """GET: the keys of each tenant of the user. POST (a tenant admin): ``prepare`` shows
    the registration content to sign for the public key pasted; ``register`` registers it
    with the signature."""
    memberships = {m.tenant.slug: m for m in _memberships(request)}
    if request.method != "POST":
        return _keys_page(request)
    membership = memberships.get(request.POST.get("tenant", ""))
    if membership is None or membership.role != Role.ADMIN:
        return _keys_page(request, status=403)
    tenant = membership.tenant
    form = KeyForm(request.POST, prefix=tenant.slug)
    if not form.is_valid():
        return _keys_page(request, {tenant.pk: form}, status=400)
    data = form.cleaned_data
    try:
        if request.POST.get("action") == "register" and data["signature"]:
            if data["signed_at"] is None:
                raise ValidationError(
                    {"signature": _("A signature needs the signed content's time.")}
                )
            cosign.register_key(
                tenant=tenant,
                user=request.user,
                public_key=data["public_key"],
                signature=data["signature"],
                signed_at=data["signed_at"],
                label=data["label"],
            )
            return redirect("portal:signing-keys")
        content = cosign.registration_content(
            tenant=tenant, user=request.user, public_key=data["public_key"], at=timezone.now()
        )
    except ValidationError as error:
        _show_refusal(form, error)
        return _keys_page(request, {tenant.pk: form}, status=400)
    prepared = to_sign(content)
    form = KeyForm(
        initial={**data, "signed_at": prepared["signed_at"], "signature": ""}, prefix=tenant.slug
    )
    return _keys_page(request, {tenant.pk: form}, {tenant.pk: prepared})


@require_POST
@login_required
def signing_key_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke a key from now on, once the admin ticked the confirmation."""
    _memberships(request)
    key = get_object_or_404(lease_selectors.tenant_keys_visible_to(request.user), pk=pk)
    if request.POST.get("confirm") != "yes":
        return HttpResponse(
            _("Tick the confirmation to revoke key %(key)s.") % {"key": key.fingerprint},
            status=400,
            content_type="text/plain; charset=utf-8",
        )
    cosign.revoke_key(key=key, user=request.user)
    return redirect("portal:signing-keys")


# --- acknowledging an amendment -----------------------------------------------------------


def _may_acknowledge(request: HttpRequest, amendment: TermsAmendment) -> bool:
    if is_provider_staff(request.user):
        return False
    return has_role(request.user, amendment.lease.tenant_id, [Role.ADMIN])


def _amendment_page(
    request: HttpRequest,
    amendment: TermsAmendment,
    form: AcknowledgeForm | None = None,
    prepared: dict[str, Any] | None = None,
    status: int = 200,
) -> HttpResponse:
    tenant = amendment.lease.tenant
    return render(
        request,
        "portal/amendment.html",
        {
            "amendment": amendment,
            "lease": amendment.lease,
            "zone": tenant.time_zone,
            "changes": sorted(amendment.changes.items()),
            "may_acknowledge": amendment.status == TermsAmendment.Status.PENDING
            and _may_acknowledge(request, amendment),
            "needs_signature": bool(cosign.keys_valid_at(tenant, timezone.now())),
            "form": form or AcknowledgeForm(),
            "prepared": prepared,
        },
        status=status,
    )


@never_cache
@login_required
def amendment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A retroactive amendment of a lease one sees. POST (its tenant's admin): ``prepare``
    shows the acknowledgement to sign (the tenant holds a key); ``acknowledge`` makes it."""
    amendment = get_object_or_404(
        lease_selectors.amendments_visible_to(request.user).select_related("lease__tenant"), pk=pk
    )
    with timezone.override(ZoneInfo(amendment.lease.tenant.time_zone)):
        if request.method != "POST":
            return _amendment_page(request, amendment)
        if not _may_acknowledge(request, amendment):
            return _amendment_page(request, amendment, status=403)
        form = AcknowledgeForm(request.POST)
        if not form.is_valid():
            return _amendment_page(request, amendment, form, status=400)
        data = form.cleaned_data
        signed = bool(cosign.keys_valid_at(amendment.lease.tenant, timezone.now()))
        try:
            if request.POST.get("action") == "acknowledge" and (data["signature"] or not signed):
                services.acknowledge_amendment(
                    amendment=amendment,
                    user=request.user,
                    reason=data["reason"],
                    signed_at=data["signed_at"] if data["signature"] else None,
                    signature=data["signature"] or None,
                )
                return redirect("portal:lease", pk=amendment.lease_id)
            content = services.acknowledgement_content(
                amendment=amendment, user=request.user, reason=data["reason"], at=timezone.now()
            )
        except ValidationError as error:
            _show_refusal(form, error)
            return _amendment_page(request, amendment, form, status=400)
        prepared = to_sign(content)
        form = AcknowledgeForm(
            initial={"reason": data["reason"], "signed_at": prepared["signed_at"]}
        )
        return _amendment_page(request, amendment, form, prepared)
