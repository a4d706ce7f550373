"""Customer pages: server-rendered, readable without JavaScript. Every object is looked up
through ``visible_to(request.user)``: another tenant's lease or invoice is a 404."""

import csv
from datetime import timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

from billing.models import Incident, Invoice, InvoiceLine
from billing.reports import sla_report
from common.units import plain
from leases.models import Lease, LeaseTerms
from portal import charts, selectors

GIGA = 10**9


def _lease(request: HttpRequest, pk: int) -> Lease:
    return get_object_or_404(Lease.objects.visible_to(request.user).select_related("tenant"), pk=pk)


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    rows = selectors.lease_overview(user=request.user, instant=selectors.now())
    return render(request, "portal/overview.html", {"rows": rows})


def _chart(series: dict, terms: LeaseTerms | None, zone: str, instant, title: str) -> str:  # type: ignore[no-untyped-def]
    start = instant - timedelta(days=selectors.CHART_DAYS)
    local = ZoneInfo(zone)
    lines = []
    if terms is not None:
        contracted = float(terms.contracted_bandwidth_gbps)
        lines = [
            charts.Line(
                _("threshold %(percent)s%%") % {"percent": plain(terms.sla_threshold_percent)},
                contracted * float(terms.sla_threshold_percent) / 100,
            ),
            charts.Line(_("contracted"), contracted, dashed=False),
        ]
    ticks = [start + timedelta(days=day) for day in range(0, selectors.CHART_DAYS + 1, 5)]
    return charts.line_chart(
        [
            charts.Series(target, [(s.timestamp(), bps / GIGA) for s, bps in points])
            for target, points in series.items()
        ],
        lines=lines,
        x_labels=[(t.timestamp(), t.astimezone(local).strftime("%m-%d")) for t in ticks],
        y_unit="Gbit/s",
        title=title,
    )


@login_required
def lease_detail(request: HttpRequest, pk: int) -> HttpResponse:
    lease = _lease(request, pk)
    instant = selectors.now()
    zone = lease.tenant.time_zone
    terms = selectors.terms_at(
        list(LeaseTerms.objects.visible_to(request.user).filter(lease=lease).order_by("version")),
        instant,
    )
    series = selectors.throughput_series(user=request.user, lease=lease, instant=instant)
    title = _("Measured throughput per node pair, last %(days)s days") % {
        "days": selectors.CHART_DAYS
    }
    chart = _chart(series, terms, zone, instant, title)
    incidents = (
        Incident.objects.visible_to(request.user)
        .filter(lease=lease)
        .prefetch_related("runs")
        .order_by("-opened_at")[:50]
    )
    period = selectors.current_period(zone, instant)
    report = sla_report(lease=lease, period=period)
    return render(
        request,
        "portal/lease_detail.html",
        {
            "lease": lease,
            "terms": terms,
            "zone": zone,
            "chart": mark_safe(chart),  # charts.py escapes every text it writes
            "has_data": bool(series),
            "incidents": incidents,
            "report": report,
            "period": period,
        },
    )


@login_required
def lease_sla(request: HttpRequest, pk: int) -> HttpResponse:
    lease = _lease(request, pk)
    rows = selectors.sla_history(user=request.user, lease=lease, instant=selectors.now())
    return render(request, "portal/lease_sla.html", {"lease": lease, "rows": rows})


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
    return render(request, "portal/invoice_detail.html", {"invoice": invoice, "lines": lines})


@login_required
def invoice_csv(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, lines = _invoice(request, pk)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    filename = f"invoice-{invoice.tenant.slug}-{invoice.period}.csv"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.write("\ufeff")  # a BOM, so that spreadsheet programs read UTF-8 Chinese text
    writer = csv.writer(response)
    writer.writerow(
        [
            _("position"),
            _("lease"),
            _("kind"),
            _("description"),
            _("quantity"),
            _("unit"),
            _("unit price (¥)"),
            _("amount (¥)"),
        ]
    )
    for line in lines:
        writer.writerow(
            [
                line.position,
                line.lease.reference if line.lease else "",
                line.get_kind_display(),
                line.description,
                f"{line.quantity.normalize():f}",
                line.unit,
                line.unit_price,
                line.amount,
            ]
        )
    for label, amount in (
        (_("subtotal (¥)"), invoice.subtotal),
        (_("tax (¥)"), invoice.tax),
        (_("total (¥)"), invoice.total),
    ):
        writer.writerow(["", "", "", label, "", "", "", Decimal(amount)])
    return response
