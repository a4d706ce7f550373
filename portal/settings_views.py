"""The tenant's own settings page (/settings/): its contacts, incident webhook URL and
signing secret (the writes: ``leases.tenant_settings``; the deliveries:
``incidents.notifications``), and its usage and spend thresholds (``billing.thresholds``).

Every member of the tenant reads the contacts, the URL and the recent changes; only a
tenant admin changes them (a viewer's or auditor's POST is a 403 that changes nothing),
rotates the secret (after ticking the confirmation) and sends a test delivery. The new
secret is written into the rotating response only (never stored in the session, never
shown again: afterwards the page shows the masked form). A member of several tenants picks
the tenant (``?tenant=<slug>``; the forms carry it back). Provider staff never act as a
tenant user: the page does not exist for them (404), as the signing keys page."""

from decimal import Decimal
from typing import Any, cast
from zoneinfo import ZoneInfo

from django import forms
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts.choices import Role
from accounts.models import Membership
from accounts.selectors import memberships_of
from billing import selectors as billing_selectors
from billing import thresholds
from billing.choices import ThresholdKind
from billing.models import Threshold
from common.querysets import is_provider_staff
from incidents import notifications
from leases import selectors as lease_selectors
from leases import tenant_settings
from leases.models import Tenant
from portal import selectors
from portal.customer_views import _show_refusal

RECENT_CHANGES = 10


def _field(name: str) -> "models.Field[Any, Any]":
    return cast("models.Field[Any, Any]", Tenant._meta.get_field(name))


def _max_length(name: str) -> int:
    return _field(name).max_length or 0


class ContactsForm(forms.Form):
    """Plain text fields: the service checks each value by its model field and says why."""

    contact_name = forms.CharField(
        label=gettext_lazy("Contact name"), required=False, max_length=_max_length("contact_name")
    )
    contact_email = forms.CharField(
        label=gettext_lazy("Contact e-mail"),
        required=False,
        max_length=_max_length("contact_email"),
        help_text=gettext_lazy("Incident e-mail goes to this address."),
    )
    contact_phone = forms.CharField(
        label=gettext_lazy("Contact phone"),
        required=False,
        max_length=_max_length("contact_phone"),
        help_text=gettext_lazy("Such as +86 755 8888 0000 or 0755-88880000 转 801."),
    )


class WebhookForm(forms.Form):
    webhook_url = forms.CharField(
        label=gettext_lazy("Webhook URL"),
        required=False,
        max_length=_max_length("webhook_url"),
        widget=forms.URLInput(attrs={"size": 70, "spellcheck": "false"}),
        help_text=gettext_lazy(
            "Incidents opening and closing and new chain checkpoints are POSTed here. Only "
            "a public address is accepted. Leave empty to stop webhook deliveries."
        ),
    )


class RotateForm(forms.Form):
    confirm = forms.BooleanField(
        label=gettext_lazy(
            "Every delivery from now on is signed with the new secret; the current one signs "
            "beside it only for the overlap, so switch your receivers soon"
        ),
        error_messages={"required": gettext_lazy("Tick the confirmation to rotate the secret.")},
    )


class ThresholdForm(forms.Form):
    """A new threshold; the service checks the lease fits the kind and says why not."""

    kind = forms.ChoiceField(label=gettext_lazy("Figure"), choices=ThresholdKind.choices)
    value = forms.DecimalField(
        label=gettext_lazy("Threshold"),
        max_digits=14,
        decimal_places=2,
        min_value=Decimal("0.01"),
        help_text=gettext_lazy("CNY, GB or Mbit/s, by the figure."),
    )
    lease = forms.ChoiceField(label=gettext_lazy("Lease"), required=False)

    def __init__(self, *args: Any, tenant: Tenant, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        leases = lease_selectors.leases_of_tenant(tenant=tenant)
        self.fields["lease"].choices = [  # type: ignore[attr-defined]
            ("", gettext_lazy("All leases together")),
            *((str(lease.pk), lease.reference) for lease in leases),
        ]


def _memberships(request: HttpRequest) -> list[Membership]:
    if is_provider_staff(request.user):
        raise Http404  # provider staff never act as a tenant user
    return list(memberships_of(request.user))


def _chosen(memberships: list[Membership], slug: str | None) -> Membership | None:
    """The membership of the tenant named ``slug``, the first one when none is named; a
    slug of a tenant the user is not a member of is a 404."""
    if not memberships:
        return None
    if not slug:
        return memberships[0]
    for membership in memberships:
        if membership.tenant.slug == slug:
            return membership
    raise Http404


def _overlap_until(tenant: Tenant, zone: str) -> str | None:
    """When the replaced signing secret stops signing too, in the tenant's zone; None when
    only the current one signs."""
    now = timezone.now()
    if len(tenant.signing_secrets(now)) < 2:
        return None
    return timezone.localtime(tenant.previous_webhook_secret_until, ZoneInfo(zone)).strftime(
        "%Y-%m-%d %H:%M"
    )


def _page(
    request: HttpRequest,
    memberships: list[Membership],
    membership: Membership | None,
    *,
    contacts: ContactsForm | None = None,
    webhook: WebhookForm | None = None,
    rotate: RotateForm | None = None,
    new_secret: str | None = None,
    saved: list[str] | None = None,
    test_result: dict[str, Any] | None = None,
    threshold: ThresholdForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context: dict[str, Any] = {"memberships": memberships, "membership": membership}
    zone = "UTC"
    if membership is not None:
        tenant = membership.tenant
        zone = tenant.time_zone
        events = list(
            lease_selectors.tenant_settings_events_visible_to(request.user).filter(tenant=tenant)[
                :RECENT_CHANGES
            ]
        )
        for event in events:
            event.labels = [_label(name) for name in event.fields]  # type: ignore[attr-defined]
        context.update(
            tenant=tenant,
            role=membership.get_role_display(),
            is_admin=membership.role == Role.ADMIN,
            contacts=contacts
            or ContactsForm(
                initial={name: getattr(tenant, name) for name in tenant_settings.CONTACT_FIELDS}
            ),
            webhook=webhook or WebhookForm(initial={"webhook_url": tenant.webhook_url}),
            rotate=rotate or RotateForm(),
            masked_secret=tenant.webhook_secret_for(request.user),
            overlap_until=_overlap_until(tenant, zone),
            new_secret=new_secret,
            # None: nothing was saved now; []: saved, and nothing had changed.
            saved=None if saved is None else [_label(name) for name in saved],
            test_result=test_result,
            events=events,
            threshold_form=threshold or ThresholdForm(tenant=tenant),
            thresholds=billing_selectors.thresholds_visible_to(request.user)
            .filter(tenant=tenant)
            .select_related("lease")
            .prefetch_related("crossings"),
            units=thresholds.UNITS,
        )
    context["zone"] = zone
    with timezone.override(ZoneInfo(zone)):
        response = render(request, "portal/tenant_settings.html", context, status=status)
    if new_secret:
        response["Cache-Control"] = "no-store"
    return response


def _label(name: str) -> str:
    return str(_field(name).verbose_name)


@never_cache
@require_http_methods(["GET", "POST"])
@login_required
def tenant_settings_page(request: HttpRequest) -> HttpResponse:
    """GET: the chosen tenant's settings. POST (its admin), by ``action``: ``contacts``,
    ``webhook`` (set or clear the URL), ``rotate`` (a new secret, confirmed), ``test`` (a
    signed test delivery to the URL)."""
    memberships = _memberships(request)
    if request.method != "POST":
        return _page(request, memberships, _chosen(memberships, request.GET.get("tenant")))
    membership = _chosen(memberships, request.POST.get("tenant"))
    if membership is None:
        raise Http404
    if membership.role != Role.ADMIN:
        return _page(request, memberships, membership, status=403)
    tenant = membership.tenant
    action = request.POST.get("action")
    now = selectors.now()
    if action == "contacts":
        form = ContactsForm(request.POST)
        if not form.is_valid():
            return _page(request, memberships, membership, contacts=form, status=400)
        try:
            saved = tenant_settings.change_contacts(
                tenant=tenant, user=request.user, now=now, **form.cleaned_data
            )
        except ValidationError as error:
            _show_refusal(form, error)
            return _page(request, memberships, membership, contacts=form, status=400)
        return _page(request, memberships, membership, saved=saved)
    if action == "webhook":
        endpoint = WebhookForm(request.POST)
        if not endpoint.is_valid():
            return _page(request, memberships, membership, webhook=endpoint, status=400)
        try:
            saved = tenant_settings.set_webhook_url(
                tenant=tenant, user=request.user, url=endpoint.cleaned_data["webhook_url"], now=now
            )
        except ValidationError as error:
            _show_refusal(endpoint, error)
            return _page(request, memberships, membership, webhook=endpoint, status=400)
        return _page(request, memberships, membership, saved=saved)
    if action == "rotate":
        confirmation = RotateForm(request.POST)
        if not confirmation.is_valid():
            return _page(request, memberships, membership, rotate=confirmation, status=400)
        secret = tenant_settings.rotate_webhook_secret(tenant=tenant, user=request.user, now=now)
        return _page(request, memberships, membership, new_secret=secret)
    if action == "test":
        try:
            notifications.send_test(tenant=tenant)
        except notifications.WebhookFailed as failure:
            result = {"delivered": False, "reason": failure.reason}
            return _page(request, memberships, membership, test_result=result)
        return _page(request, memberships, membership, test_result={"delivered": True})
    if action == "threshold-add":
        return _add_threshold(request, memberships, membership)
    if action in ("threshold-delete", "threshold-enable", "threshold-disable"):
        chosen = _threshold(request, tenant)
        if action == "threshold-delete":
            thresholds.delete_threshold(threshold=chosen, user=request.user)
        else:
            thresholds.change_threshold(
                threshold=chosen, user=request.user, enabled=action == "threshold-enable", now=now
            )
        return _page(request, memberships, membership)
    return _page(request, memberships, membership, status=400)


def _threshold(request: HttpRequest, tenant: Tenant) -> Threshold:
    """The tenant's threshold named by ``threshold`` in the POST, else a 404."""
    raw = request.POST.get("threshold", "")
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise Http404
    found = (
        billing_selectors.thresholds_visible_to(request.user)
        .filter(pk=int(raw), tenant=tenant)
        .first()
    )
    if found is None:
        raise Http404
    return found


def _add_threshold(
    request: HttpRequest, memberships: list[Membership], membership: Membership
) -> HttpResponse:
    tenant = membership.tenant
    form = ThresholdForm(request.POST, tenant=tenant)
    if not form.is_valid():
        return _page(request, memberships, membership, threshold=form, status=400)
    chosen = form.cleaned_data["lease"]
    lease = lease_selectors.lease_of_tenant(tenant=tenant, pk=int(chosen)) if chosen else None
    try:
        thresholds.create_threshold(
            tenant=tenant,
            user=request.user,
            kind=form.cleaned_data["kind"],
            value=form.cleaned_data["value"],
            lease=lease,
            now=selectors.now(),
        )
    except ValidationError as error:
        _show_refusal(form, error)
        return _page(request, memberships, membership, threshold=form, status=400)
    return _page(request, memberships, membership)
