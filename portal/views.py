"""Customer pages: server-rendered, readable without JavaScript. Every object is looked up
through ``visible_to(request.user)``: another tenant's lease or invoice is a 404."""

import io
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils import translation
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

from billing.documents import csv_export, document_language, pdf, xlsx
from billing.documents.rows import invoice_document
from billing.evidence import can_write_for
from billing.models import (
    ChainCheckpoint,
    CreditNote,
    Evidence,
    Incident,
    Invoice,
    InvoiceLine,
)
from billing.reports import sla_report
from gpulease_verify.units import plain
from leases.models import Lease, LeaseTerms
from leases.selectors import TermsTimeline
from portal import charts, selectors

GIGA = 10**9
EVIDENCE_ON_DETAIL = 20


def _lease(request: HttpRequest, pk: int) -> Lease:
    return get_object_or_404(Lease.objects.visible_to(request.user).select_related("tenant"), pk=pk)


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    rows = selectors.lease_overview(user=request.user, instant=selectors.now())
    return render(request, "portal/overview.html", {"rows": rows})


def _x_labels(instant, zone: str, days: int = selectors.CHART_DAYS) -> list[tuple[float, str]]:  # type: ignore[no-untyped-def]
    start = instant - timedelta(days=days)
    local = ZoneInfo(zone)
    step = max(1, days // 6)
    ticks = [start + timedelta(days=day) for day in range(0, days + 1, step)]
    label = "%m-%d" if days <= 90 else "%Y-%m-%d"
    return [(t.timestamp(), t.astimezone(local).strftime(label)) for t in ticks]


def _days(request: HttpRequest) -> int:
    """The charts' window (?days=), one of CHART_WINDOWS; anything else is the default."""
    try:
        days = int(request.GET.get("days", selectors.CHART_DAYS))
    except ValueError:
        return selectors.CHART_DAYS
    return days if days in selectors.CHART_WINDOWS else selectors.CHART_DAYS


def _chart(  # type: ignore[no-untyped-def]
    series: dict, lines: list[charts.Line], zone: str, instant, title: str, days: int
) -> str:
    return charts.line_chart(
        [
            charts.Series(target, [(s.timestamp(), bps / GIGA) for s, bps in points])
            for target, points in series.items()
        ],
        lines=lines,
        x_labels=_x_labels(instant, zone, days),
        y_unit="Gbit/s",
        title=title,
    )


def _throughput_lines(terms: LeaseTerms | None) -> list[charts.Line]:
    if terms is None:
        return []
    contracted = float(terms.contracted_bandwidth_gbps)
    return [
        charts.Line(
            _("threshold %(percent)s%%") % {"percent": plain(terms.sla_threshold_percent)},
            contracted * float(terms.sla_threshold_percent) / 100,
        ),
        charts.Line(_("contracted"), contracted, dashed=False),
    ]


def _busbw_lines(terms: LeaseTerms | None) -> list[charts.Line]:
    if terms is None or terms.collective_busbw_floor_gbps is None:
        return []
    return [charts.Line(_("contracted floor"), float(terms.collective_busbw_floor_gbps))]


# The timeline's slices: 30 days in 4-hour slices (a down minute marks its whole slice).
TIMELINE_BUCKET_HOURS = 4


def _timeline(nodes: list[selectors.NodeLinks], zone: str, instant) -> tuple[str, list[dict]]:  # type: ignore[no-untyped-def]
    """The link timeline's SVG and, for reading without the picture, hours down per row."""
    start = instant - timedelta(days=selectors.CHART_DAYS)
    buckets = selectors.CHART_DAYS * 24 // TIMELINE_BUCKET_HOURS
    x0, x1 = start.timestamp(), instant.timestamp()
    local = ZoneInfo(zone)
    bands: list[charts.Band] = []
    summary: list[dict] = []

    def states(counts: list[tuple]) -> list[str]:  # type: ignore[type-arg]
        rows = [(at.timestamp(), up, down) for at, up, down in counts]
        return charts.bucket_states(rows, start=x0, end=x1, buckets=buckets)

    for node in nodes:
        bands.append(charts.Band(node.hostname, states(node.hours)))
        summary.append(
            {
                "label": node.hostname,
                "port": False,
                "down_hours": sum(1 for _at, _up, down in node.hours if down),
                "checked_hours": len(node.hours),
            }
        )
        for label, counts in node.ports.items():
            bands.append(charts.Band(label, states(counts), sub=True))
            summary.append(
                {
                    "label": label,
                    "port": True,
                    "down_hours": sum(1 for _at, _up, down in counts if down),
                    "checked_hours": len(counts),
                }
            )

    def span_text(a: float, b: float) -> str:
        first = datetime.fromtimestamp(a, UTC).astimezone(local)
        last = datetime.fromtimestamp(b, UTC).astimezone(local)
        return _("%(first)s to %(last)s") % {
            "first": f"{first:%m-%d %H:%M}",
            "last": f"{last:%m-%d %H:%M}",
        }

    svg = charts.timeline_chart(
        bands,
        start=x0,
        end=x1,
        x_labels=_x_labels(instant, zone),
        state_labels={
            charts.UP: _("link check passed, port up"),
            charts.DOWN: _("link check failed, port down"),
            charts.NO_DATA: _("no link check"),
        },
        span_text=span_text,
        title=_("Link state per node and port, last %(days)s days")
        % {"days": selectors.CHART_DAYS},
    )
    return svg, summary


@login_required
def lease_detail(request: HttpRequest, pk: int) -> HttpResponse:
    lease = _lease(request, pk)
    instant = selectors.now()
    zone = lease.tenant.time_zone
    terms = TermsTimeline(LeaseTerms.objects.visible_to(request.user).filter(lease=lease)).at(
        instant
    )
    days = _days(request)
    series = selectors.throughput_series(user=request.user, lease=lease, instant=instant, days=days)
    title = _("Measured throughput per node pair, last %(days)s days") % {"days": days}
    chart = _chart(series, _throughput_lines(terms), zone, instant, title, days)
    busbw = selectors.nccl_series(user=request.user, lease=lease, instant=instant, days=days)
    busbw_title = _("NCCL all_reduce bus bandwidth, last %(days)s days") % {"days": days}
    busbw_chart = _chart(busbw, _busbw_lines(terms), zone, instant, busbw_title, days)
    links = selectors.link_timeline(user=request.user, lease=lease, instant=instant)
    timeline, link_summary = _timeline(links, zone, instant)
    incidents = (
        Incident.objects.visible_to(request.user)
        .filter(lease=lease)
        .prefetch_related("runs")
        .order_by("-opened_at")[:50]
    )
    evidence = list(
        Evidence.objects.visible_to(request.user)
        .filter(lease=lease)
        .only("pk", "tool", "measured_at", "measured_bps", "latency_us", "verdict", "created_at")
        .order_by("-measured_at", "-pk")[:EVIDENCE_ON_DETAIL]
    )
    period = selectors.current_period(zone, instant)
    report = sla_report(lease=lease, period=period, now=instant)
    return render(
        request,
        "portal/lease_detail.html",
        {
            "lease": lease,
            "terms": terms,
            "zone": zone,
            "chart": mark_safe(chart),  # charts.py escapes every text it writes
            "has_data": bool(series),
            "busbw_chart": mark_safe(busbw_chart),
            "has_busbw": bool(busbw),
            "timeline": mark_safe(timeline),
            "link_summary": link_summary,
            "has_links": bool(links),
            "evidence": evidence,
            "can_write": can_write_for(request.user, lease),
            "incidents": incidents,
            "report": report,
            "period": period,
            "days": days,
            "windows": selectors.CHART_WINDOWS,
        },
    )


@login_required
def lease_sla(request: HttpRequest, pk: int) -> HttpResponse:
    lease = _lease(request, pk)
    rows = selectors.sla_history(user=request.user, lease=lease, instant=selectors.now())
    checkpoints = ChainCheckpoint.objects.visible_to(request.user).filter(lease=lease)
    return render(
        request,
        "portal/lease_sla.html",
        {"lease": lease, "rows": rows, "checkpoints": checkpoints.order_by("-period")},
    )


@login_required
def invoice_list(request: HttpRequest) -> HttpResponse:
    invoices = Invoice.objects.visible_to(request.user).select_related("tenant")
    return render(request, "portal/invoice_list.html", {"invoices": invoices})


def _invoice(request: HttpRequest, pk: int) -> tuple[Invoice, list[InvoiceLine]]:
    invoice = get_object_or_404(
        Invoice.objects.visible_to(request.user).select_related("tenant"), pk=pk
    )
    lines = list(
        InvoiceLine.objects.visible_to(request.user)
        .filter(invoice=invoice)
        .select_related("lease")
        .order_by("position")
    )
    return invoice, lines


@login_required
def invoice_detail(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, lines = _invoice(request, pk)
    credit_notes = (
        CreditNote.objects.visible_to(request.user)
        .filter(invoice=invoice)
        .prefetch_related("lines")
        .order_by("issued_at", "pk")
    )
    return render(
        request,
        "portal/invoice_detail.html",
        {"invoice": invoice, "lines": lines, "credit_notes": credit_notes},
    )


def _attachment(body: bytes | str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
def invoice_csv(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, _lines = _invoice(request, pk)
    document = invoice_document(invoice)
    body = io.StringIO()
    csv_export.write(document, body)
    return _attachment(body.getvalue(), "text/csv; charset=utf-8", document.filename("csv"))


@login_required
def invoice_pdf(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, _lines = _invoice(request, pk)
    language = document_language(request.LANGUAGE_CODE)
    with translation.override(language):
        document = invoice_document(invoice)
        body = pdf.render(document)
    return _attachment(body, "application/pdf", document.filename("pdf"))


@login_required
def invoice_xlsx(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, _lines = _invoice(request, pk)
    with translation.override(document_language(request.LANGUAGE_CODE)):
        document = invoice_document(invoice)
        body = xlsx.render(document)
    return _attachment(body, xlsx.CONTENT_TYPE, document.filename("xlsx"))
