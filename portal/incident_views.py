"""An incident's page (issue 33 item 4): what happened and when, on which nodes and pairs,
the runs that prove it (each with its raw output), and what it did to the month's SLA
figures and credit, read from the month's SLA report (``billing.reports.sla_report``,
itself from ``billing.lease_month``): nothing of the credit rule is computed here.

The incident is looked up through the lease (``visible_to``, as the lease page) and then
among that lease's incidents the user sees: another tenant's incident, or one of another
lease in the URL, is a 404."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext as _

from benchmarks import selectors as run_selectors
from benchmarks.choices import Verdict
from benchmarks.models import ProbeRun
from billing.lease_month import LeaseMonth, lease_month
from billing.reports import sla_report
from gpulease_verify.periods import Period
from incidents import repair
from incidents import selectors as incident_selectors
from incidents.models import Incident
from leases import selectors as lease_selectors
from leases.models import Lease
from portal import month_header, selectors

# The months an incident's credit effect is shown for: the latest ones it reaches into
# (an integrity dispute stays open until a person closes it); the SLA page has the rest.
CREDIT_MONTHS = 3


@dataclass(frozen=True)
class Event:
    at: datetime
    label: str
    run: ProbeRun | None = None


@dataclass(frozen=True)
class MonthEffect:
    """The incident in one billing month: its minutes inside the billed window so far, its
    row of the month's SLA report and the report's month figures."""

    period: str
    billed: bool
    minutes: int
    report: dict[str, Any]
    row: dict[str, Any] | None


def _runs(user: Any, incident: Incident) -> list[ProbeRun]:
    return list(
        run_selectors.runs_visible_to(user)
        .filter(incidents=incident)
        .only(
            "pk",
            "kind",
            "tool",
            "target",
            "pattern",
            "slot_at",
            "started_at",
            "measured_bps",
            "latency_us",
            "verdict",
            "lease_id",
        )
        .prefetch_related("nodes")
        .order_by("slot_at", "pk")
    )


def _timeline(incident: Incident, runs: list[ProbeRun]) -> list[Event]:
    events = [Event(incident.opened_at, _("opened"))]
    for run in runs:
        label = _("violating run") if run.verdict == Verdict.FAIL else run.get_verdict_display()
        events.append(Event(run.started_at or run.slot_at, label, run))
    if incident.acknowledged_at:
        events.append(Event(incident.acknowledged_at, _("acknowledged by the provider")))
    if incident.mitigated_at:
        events.append(Event(incident.mitigated_at, _("mitigated by the provider")))
    if incident.closed_at:
        events.append(Event(incident.closed_at, _("closed")))
    # Stable: at the same instant the opening comes first and the closing last.
    return sorted(events, key=lambda event: event.at)


def _credit_effect(
    lease: Lease, incident: Incident, instant: datetime
) -> tuple[list[MonthEffect], dict[str, LeaseMonth]]:
    """The incident's effect on the months it reaches into, newest first, and those
    months as read (the month header reuses the month in progress)."""
    zone = lease.tenant.time_zone
    end = incident.closed_at or instant
    first = Period.containing(incident.opened_at, zone)
    last = Period.containing(min(end, instant), zone)
    periods = list(Period.span(first, last))[-CREDIT_MONTHS:]
    effects = []
    reads: dict[str, LeaseMonth] = {}
    for period in reversed(periods):
        read = reads[str(period)] = lease_month(lease, str(period), instant=instant)
        report = sla_report(lease=lease, period=str(period), now=instant, month=read)
        row = next((item for item in report["incidents"] if item["id"] == incident.pk), None)
        minutes = 0
        elapsed = read.elapsed if read.billed else None
        if elapsed is not None:
            a, b = max(incident.opened_at, elapsed[0]), min(end, elapsed[1])
            minutes = max(0, int((b - a).total_seconds() // 60))
        effects.append(MonthEffect(str(period), read.billed, minutes, report, row))
    return effects, reads


@login_required
def incident_detail(request: HttpRequest, pk: int, incident_pk: int) -> HttpResponse:
    lease = get_object_or_404(
        lease_selectors.leases_visible_to(request.user).select_related("tenant"), pk=pk
    )
    incident = get_object_or_404(
        incident_selectors.visible_to(request.user)
        .filter(lease=lease)
        .select_related("terms", "lease"),
        pk=incident_pk,
    )
    instant = selectors.now()
    runs = _runs(request.user, incident)
    pairs = sorted({(run.target, run.get_pattern_display()) for run in runs})
    nodes = sorted({node.hostname for run in runs for node in run.nodes.all()})
    effects, reads = _credit_effect(lease, incident, instant)
    current = reads.get(selectors.current_period(lease.tenant.time_zone, instant))
    return render(
        request,
        "portal/incident_detail.html",
        {
            "lease": lease,
            "incident": incident,
            "zone": lease.tenant.time_zone,
            "repair_minutes": repair.repair_minutes(incident),
            "timeline": _timeline(incident, runs),
            "runs": runs,
            "pairs": pairs,
            "nodes": nodes,
            "effects": effects,
            "header": month_header.current_header(
                user=request.user, lease=lease, instant=instant, month=current
            ),
            "lease_url": reverse("portal:lease", args=[lease.pk]),
        },
    )
