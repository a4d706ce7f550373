"""The lease's SLA page, month by month, and what an auditor takes away from it.

- ``leases/<pk>/sla/[?period=YYYY-MM]``: the month's SLA report with previous/next
  links, then every month with links to its report, its incidents and its invoice, the
  signed chain checkpoints and, for those who may audit, the month's downloads with the
  command that verifies them.
- ``leases/<pk>/audit/<period>.json``: the month's signed audit bundle, built and signed
  by billing.audit.signed_bundle exactly as GET /api/v1/leases/{id}/audit/ answers it.
- ``leases/<pk>/checkpoint.json[?period=]``: the newest signed chain checkpoint (or that
  month's), the document GET /api/v1/leases/{id}/checkpoints/?period= answers.

The lease is found through ``visible_to`` (another tenant's is a 404). The downloads are
for the roles that read audits over the API (api.views_audit.AUDIT_READERS: tenant
admin and auditor of the lease's tenant) and provider staff; any other member gets 403."""

import json
import shlex
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from accounts.selectors import has_role
from api.views_audit import AUDIT_READERS
from billing import audit
from billing import selectors as billing_selectors
from billing.lease_month import lease_month
from billing.reports import sla_report
from common.attachments import attachment
from common.querysets import is_provider_staff
from leases import selectors as lease_selectors
from leases.models import Lease
from portal import month_header, months, selectors

VERIFIER = "gpulease-verify"


def can_audit(user: Any, lease: Lease) -> bool:
    """Provider staff, or a tenant admin or auditor of the lease's tenant."""
    if is_provider_staff(user):
        return True
    if not (user and user.is_authenticated and user.is_active):
        return False
    return has_role(user, lease.tenant_id, AUDIT_READERS)


def _lease(request: HttpRequest, pk: int) -> Lease:
    return get_object_or_404(
        lease_selectors.leases_visible_to(request.user).select_related("tenant"), pk=pk
    )


def _audited_lease(request: HttpRequest, pk: int) -> Lease:
    lease = _lease(request, pk)
    if not can_audit(request.user, lease):
        raise PermissionDenied(
            _(
                "Only a tenant admin, an auditor of the tenant or provider staff can "
                "download audits."
            )
        )
    return lease


def bundle_filename(lease: Lease, period: str) -> str:
    return f"{lease.reference}-{period}-audit.json"


def verify_command(lease: Lease, period: str, fingerprint: str) -> str:
    """The command that checks a downloaded bundle against the published key
    (verifier/gpulease_verify/cli.py), each word quoted for a POSIX shell: a reference
    stored before references were checked cannot add a command or drop the fingerprint."""
    return shlex.join([VERIFIER, bundle_filename(lease, period), "--fingerprint", fingerprint])


@login_required
def lease_sla(request: HttpRequest, pk: int) -> HttpResponse:
    lease = _lease(request, pk)
    instant = selectors.now()
    try:
        month = months.month_of(request, lease, instant)
    except selectors.PeriodRefused as refusal:
        return months.refused(request, lease, refusal)
    rows = selectors.sla_history(user=request.user, lease=lease, instant=instant)
    checkpoints = list(
        billing_selectors.chain_checkpoints_of(user=request.user, lease=lease)
        .select_related("lease")
        .order_by("-period")
    )
    may_audit = can_audit(request.user, lease)
    fingerprint = audit.published_key_info()["fingerprint"] if may_audit else ""
    month_checkpoint = next((c for c in checkpoints if c.period == month.period), None)
    read = lease_month(lease, month.period, instant=instant)
    return render(
        request,
        "portal/lease_sla.html",
        {
            "lease": lease,
            "zone": lease.tenant.time_zone,
            "month": month,
            "header": month_header.lease_header(user=request.user, month=read),
            "report": sla_report(lease=lease, period=month.period, now=instant, month=read),
            "rows": rows,
            "checkpoints": checkpoints,
            "latest_checkpoint": checkpoints[0] if checkpoints else None,
            "month_checkpoint": month_checkpoint,
            "may_audit": may_audit,
            "fingerprint": fingerprint,
            "bundle_filename": bundle_filename(lease, month.period),
            "verify_command": verify_command(lease, month.period, fingerprint),
        },
    )


def _json_download(document: dict[str, Any], filename: str) -> HttpResponse:
    body = json.dumps(document, ensure_ascii=False, indent=2)
    return attachment(body, "application/json; charset=utf-8", filename)


@require_GET
@login_required
def audit_bundle(request: HttpRequest, pk: int, period: str) -> HttpResponse:
    lease = _audited_lease(request, pk)
    instant = selectors.now()
    try:
        month = selectors.chosen_period(period, lease.tenant.time_zone, instant)
    except selectors.PeriodRefused as refusal:
        return months.refused(request, lease, refusal)
    document = audit.signed_bundle(lease=lease, period=str(month), now=instant)
    return _json_download(document, bundle_filename(lease, str(month)))


@require_GET
@login_required
def checkpoint(request: HttpRequest, pk: int) -> HttpResponse:
    lease = _audited_lease(request, pk)
    rows = billing_selectors.chain_checkpoints_of(user=request.user, lease=lease)
    if request.GET.get("period"):
        try:
            month = selectors.chosen_period(
                request.GET["period"], lease.tenant.time_zone, selectors.now()
            )
        except selectors.PeriodRefused as refusal:
            return months.refused(request, lease, refusal)
        rows = rows.filter(period=str(month))
    row = rows.select_related("lease").order_by("-period").first()
    if row is None:
        raise Http404(_("This lease has no checkpoint for that month yet."))
    return _json_download(row.document(), f"{lease.reference}-{row.period}-checkpoint.json")
