"""Customer pages that write: their own measurements (evidence) and API tokens.

Writes go through the services (billing.evidence.submit_evidence, accounts.services) and reads
through ``visible_to(request.user)``, so another tenant's lease, evidence or token is a 404.
A refusal of a service (ValidationError by field) is shown on the form, with what the user
typed kept."""

import json
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.translation import gettext_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_POST

from accounts import selectors as token_selectors
from accounts import services as tokens
from accounts.choices import Role, Scope, TokenState
from accounts.selectors import role_scopes
from api.permissions import roles_of
from benchmarks.probes import guide as measuring_guide
from benchmarks.selectors import plan_nodes
from billing import selectors as billing_selectors
from billing.evidence import can_write_for, submit_evidence
from billing.models import EvidenceTool
from common.instants import InstantFormField
from common.querysets import is_provider_staff
from leases import selectors as lease_selectors
from leases.models import Lease, LeaseTerms
from portal import month_header, selectors, verdict_wording

# --- forms ----------------------------------------------------------------------------


class EvidenceForm(forms.Form):
    tool = forms.ChoiceField(label=gettext_lazy("Tool"), choices=EvidenceTool.choices)
    nodes = forms.MultipleChoiceField(
        label=gettext_lazy("Nodes it ran on"),
        widget=forms.CheckboxSelectMultiple,
        help_text=gettext_lazy(
            "Two nodes for iperf3, perftest and ping (client first); every node of the run "
            "for nccl-tests."
        ),
    )
    raw_output = forms.CharField(
        label=gettext_lazy("Raw output"),
        strip=False,
        widget=forms.Textarea(attrs={"rows": 18, "cols": 100, "spellcheck": "false"}),
        help_text=gettext_lazy("Paste the whole output, unedited (iperf3 with -J: the JSON)."),
    )
    measured_at = InstantFormField(
        label=gettext_lazy("Measured at"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text=gettext_lazy("In the tenant's time zone; leave empty for now."),
    )
    note = forms.CharField(
        label=gettext_lazy("Note"),
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 100}),
    )

    def __init__(self, *args: Any, hostnames: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["nodes"].choices = [(name, name) for name in hostnames]


class TokenForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), required=False, max_length=100)
    scopes = forms.MultipleChoiceField(
        label=gettext_lazy("Scopes"),
        choices=Scope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[Scope.READ],
    )
    expires_at = InstantFormField(
        label=gettext_lazy("Expires at"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M"),
        help_text=gettext_lazy("Leave empty for the default expiry."),
    )

    def __init__(self, *args: Any, tenants: Any = None, **kwargs: Any) -> None:
        """``tenants``: the user's tenants; with more than one, the token names its own."""
        super().__init__(*args, **kwargs)
        if tenants is not None and len(tenants) > 1:
            self.fields["tenant"] = forms.ModelChoiceField(
                label=gettext_lazy("Acts for tenant"),
                queryset=tenants,
                to_field_name="slug",
                help_text=gettext_lazy("A token acts for one tenant only."),
            )


def _show_refusal(form: forms.Form, error: ValidationError) -> None:
    """A service's ValidationError on the form: by field where the form has that field."""
    if hasattr(error, "error_dict"):
        for field, errors in error.error_dict.items():
            form.add_error(field if field in form.fields else None, errors)
    else:
        form.add_error(None, error)


# --- evidence -------------------------------------------------------------------------


def _lease(request: HttpRequest, pk: int) -> Lease:
    return get_object_or_404(
        lease_selectors.leases_visible_to(request.user).select_related("tenant"), pk=pk
    )


def _current_hostnames(request: HttpRequest, lease: Lease) -> list[str]:
    return sorted(
        lease_selectors.assignments_visible_to(request.user)
        .filter(lease=lease)
        .in_force_at(selectors.now())
        .values_list("node__hostname", flat=True)
    )


# The guide's bandwidth tiers (DOMAIN.md: 25 Gbps RoCE the multi-node floor, 100G the
# value choice, 400G InfiniBand for the largest clusters).
GUIDE_TIERS_GBPS = (Decimal(25), Decimal(100), Decimal(200), Decimal(400))


def _guide(request: HttpRequest, lease: Lease) -> dict[str, Any]:
    """What the measuring guide fills in: the probes' own commands for the lease's nodes
    and ports in force now (``benchmarks.probes.guide``), the terms in force now, and the
    figure each tier passes at under the default SLA threshold."""
    instant = selectors.now()
    nodes = [
        assignment.node
        for assignment in lease_selectors.assignments_visible_to(request.user)
        .filter(lease=lease)
        .in_force_at(instant)
        .select_related("node__leaf_switch")
        .order_by("node__hostname")
    ]
    ports = lease_selectors.nic_ports_visible_to(request.user).filter(
        node__in=[node.pk for node in nodes]
    )
    terms = lease_selectors.terms_timeline_visible_to(user=request.user, lease=lease).at(instant)
    default = LeaseTerms._meta.get_field("sla_threshold_percent").get_default()
    return {
        "terms": terms,
        "guide": measuring_guide.build(list(plan_nodes(nodes, ports).values())),
        "default_threshold": default,
        "tiers": [(tier, tier * default / 100) for tier in GUIDE_TIERS_GBPS],
    }


@login_required
def evidence_upload(request: HttpRequest, pk: int) -> HttpResponse:
    """The form for a measurement of one's own, beside a guide to making one. Viewers and
    auditors read the guide and are told that only a tenant admin submits (403)."""
    lease = _lease(request, pk)
    zone = lease.tenant.time_zone
    context: dict[str, Any] = {
        "lease": lease,
        "zone": zone,
        "header": month_header.current_header(
            user=request.user, lease=lease, instant=selectors.now()
        ),
        **_guide(request, lease),
    }
    if not can_write_for(request.user, lease):
        context["read_only"] = True
        return render(request, "portal/evidence_upload.html", context, status=403)
    hostnames = _current_hostnames(request, lease)
    with timezone.override(ZoneInfo(zone)):  # the form reads and writes times in the tenant's zone
        if request.method == "POST":
            form = EvidenceForm(request.POST, hostnames=hostnames)
            if form.is_valid():
                data = form.cleaned_data
                try:
                    evidence = submit_evidence(
                        lease=lease,
                        user=request.user,
                        tool=data["tool"],
                        raw_output=data["raw_output"],
                        nodes=data["nodes"],
                        measured_at=data["measured_at"],
                        note=data["note"],
                        now=selectors.now(),
                    )
                except ValidationError as error:
                    _show_refusal(form, error)
                else:
                    return redirect("portal:evidence", pk=lease.pk, evidence_pk=evidence.pk)
        else:
            form = EvidenceForm(hostnames=hostnames)
        context["form"] = form
        return render(
            request,
            "portal/evidence_upload.html",
            context,
            status=400 if form.is_bound else 200,
        )


@login_required
def evidence_detail(request: HttpRequest, pk: int, evidence_pk: int) -> HttpResponse:
    lease = _lease(request, pk)
    evidence = get_object_or_404(
        billing_selectors.evidence_visible_to(request.user)
        .filter(lease=lease)
        .select_related("terms", "submitted_by")
        .prefetch_related("nodes"),
        pk=evidence_pk,
    )
    return render(
        request,
        "portal/evidence_detail.html",
        {
            "lease": lease,
            "zone": lease.tenant.time_zone,
            "evidence": evidence,
            "header": month_header.current_header(
                user=request.user, lease=lease, instant=selectors.now()
            ),
            "wording": verdict_wording.wording(evidence),
            "parsed": json.dumps(evidence.parsed, indent=2, ensure_ascii=False, sort_keys=True),
            "can_write": can_write_for(request.user, lease),
        },
    )


# --- API tokens -----------------------------------------------------------------------


# Who may create a token here: provider staff, a tenant admin (as the API's
# ApiTokenViewSet.write_roles) and an auditor, for their own audit work. Every token is the
# user's own, and accounts.services.issue_token applies the API's rules: scopes within what the
# user's roles allow (accounts.models.ROLE_SCOPES: an auditor read and audit), expiry within
# API_TOKEN_MAX_DAYS.
ISSUING_ROLES = frozenset({Role.ADMIN, Role.AUDITOR})


def _may_issue(request: HttpRequest) -> bool:
    if is_provider_staff(request.user):
        return True
    return not ISSUING_ROLES.isdisjoint(roles_of(request).values())  # type: ignore[arg-type]


def _token_form(request: HttpRequest, data: Any = None) -> "TokenForm":
    """The form, ticking by default what the user's roles allow to read: read, and for an
    auditor without write, audit too; a member of several tenants chooses the tenant."""
    allowed = role_scopes(request.user)
    if Scope.WRITE in allowed:
        initial = [Scope.READ]
    else:
        initial = [scope for scope in (Scope.READ, Scope.AUDIT) if scope in allowed]
    tenants = None
    if not request.user.is_staff:
        member: Any = request.user.pk
        tenants = lease_selectors.tenants_joined_by(user_id=member)
    return TokenForm(data, initial={"scopes": initial}, tenants=tenants)


def _zone(request: HttpRequest) -> str:
    """The time zone of the user's first tenant, else the site's."""
    tenant_ids = sorted(roles_of(request))  # type: ignore[arg-type]
    zone = (
        lease_selectors.tenants_visible_to(request.user)
        .filter(pk__in=tenant_ids[:1])
        .values_list("time_zone", flat=True)
        .first()
    )
    return zone or settings.TIME_ZONE


def _tokens_page(
    request: HttpRequest,
    form: TokenForm,
    issued: tokens.IssuedToken | None = None,
    status: int = 200,
) -> HttpResponse:
    zone = _zone(request)
    allowed = role_scopes(request.user)
    listed = list(
        token_selectors.tokens_visible_to(request.user).select_related("user", "issuer", "tenant")
    )
    for token in listed:
        token.state_label = TokenState(token.state).label  # type: ignore[attr-defined]
    response = render(
        request,
        "portal/tokens.html",
        {
            "form": form,
            "tokens": listed,
            "issued": issued,
            "may_issue": _may_issue(request),
            "allowed_scopes": [scope for scope in Scope.values if scope in allowed],
            "max_days": settings.API_TOKEN_MAX_DAYS,
            "default_days": settings.API_TOKEN_DEFAULT_DAYS,
            "zone": zone,
            "scope_labels": dict(Scope.choices),
        },
        status=status,
    )
    return response


@never_cache
@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    """Your tokens (a tenant admin: every token of the tenant), and a form for a
    new one. The new token's secret is written into this one response only: it is not
    kept in the session, and the database keeps only its hash."""
    with timezone.override(ZoneInfo(_zone(request))):
        if request.method != "POST":
            return _tokens_page(request, _token_form(request))
        if not _may_issue(request):
            return _tokens_page(request, _token_form(request), status=403)
        form = _token_form(request, request.POST)
        if not form.is_valid():
            return _tokens_page(request, form, status=400)
        data = form.cleaned_data
        try:
            issued = tokens.issue_token(
                user=request.user,
                scopes=data["scopes"],
                name=data["name"],
                expires_at=data["expires_at"],
                issuer=request.user,
                tenant=data.get("tenant"),
            )
        except ValidationError as error:
            _show_refusal(form, error)
            return _tokens_page(request, form, status=400)
        response = _tokens_page(request, _token_form(request), issued=issued, status=200)
        response["Cache-Control"] = "no-store"
        return response


@require_POST
@login_required
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    """Revoke at once. Whose tokens one may revoke is whose one sees (ApiToken.visible_to:
    one's own, every token of a tenant one administers, staff all); any other is a 404."""
    token = get_object_or_404(token_selectors.tokens_visible_to(request.user), pk=pk)
    tokens.revoke_token(token=token, actor=request.user)
    return redirect("portal:tokens")
