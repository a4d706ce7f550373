"""Customer pages: server-rendered, readable without JavaScript. Every object is looked up
through ``visible_to(request.user)``: another tenant's lease or invoice is a 404."""

import io
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import translation
from django.utils.safestring import mark_safe
from django.utils.translation import gettext as _

from billing import selectors as billing_selectors
from billing import vouchers
from billing.balance import balance
from billing.documents import csv_export, document_language, einvoice, pdf, xlsx
from billing.documents.cells import CsvWriter
from billing.documents.rows import credit_note_document, invoice_document
from billing.evidence import can_write_for
from billing.lease_month import LeaseMonth, lease_month
from billing.models import Invoice, InvoiceLine, Voucher
from billing.reports import sla_report
from common.attachments import attachment
from gpulease_verify.units import plain
from incidents import selectors as incident_selectors
from leases import selectors as lease_selectors
from leases.choices import ProbeKind
from leases.contract_rules import DEFAULT_PROBE_CADENCE_S
from leases.models import Lease, LeaseTerms, TermsAmendment
from leases.selectors import TermsTimeline
from portal import chart_ranges, charts, month_header, months, selectors
from portal.chart_ranges import ChartRange

GIGA = 10**9
MEGA = 10**6
EVIDENCE_ON_DETAIL = 20
BANDS_MAX = 200  # incidents drawn on one chart; a year of a bad lease stays readable


def _lease(request: HttpRequest, pk: int) -> Lease:
    return get_object_or_404(
        lease_selectors.leases_visible_to(request.user).select_related("tenant"), pk=pk
    )


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    instant = selectors.now()
    rows = selectors.lease_overview(user=request.user, instant=instant)
    header = month_header.for_rows(rows)
    return render(request, "portal/overview.html", {"rows": rows, "now": instant, "header": header})


def _x_labels(start: datetime, end: datetime, zone: str) -> list[tuple[float, str]]:
    """About six ticks over [start, end]: dates, or hours within two days."""
    local = ZoneInfo(zone)
    span = end - start
    if span <= timedelta(days=2):
        step = timedelta(hours=max(1, round(span / timedelta(hours=1) / 6)))
        label = "%m-%d %H:%M"
    else:
        days = span / timedelta(days=1)
        step = timedelta(days=max(1, int(days // 6)))
        label = "%m-%d" if days <= 92 else "%Y-%m-%d"
    ticks = []
    tick = start
    while tick <= end:
        ticks.append(tick)
        tick += step
    return [(t.timestamp(), t.astimezone(local).strftime(label)) for t in ticks]


GBIT = "Gbit/s"  # the portal's one spelling, as portal_units' gbps and bps filters write
MBIT = "Mbit/s"
MAX_STEPS = 31 * 24  # a running 95th percentile line changes at most hourly beyond this
INVOICE_UNITS = {"GB": "GB", "Mbps": MBIT}  # an invoice line's unit, as the portal spells it
HOUR_S, DAY_S = 3600, 86400


@dataclass(frozen=True)
class Figure:
    """A chart: the SVG every reader gets and the data the interactive chart is drawn from
    (json_script, portal/assets/charts.js)."""

    svg: str
    data: dict[str, Any]
    series: list[charts.Series]
    lines: list[charts.Line]
    unit: str

    @property
    def html(self) -> str:
        return mark_safe(self.svg)  # charts.py escapes every text it writes


def _figure(  # type: ignore[no-untyped-def]
    series: list[charts.Series],
    lines: list[charts.Line],
    *,
    zone: str,
    x_range: tuple[float, float],
    x_labels: list[tuple[float, str]],
    max_gap: float,
    title: str,
    unit: str = GBIT,
    bands: list[charts.Span] | None = None,
) -> Figure:
    shape = {
        "lines": lines,
        "x_range": x_range,
        "max_gap": max_gap,
        "y_unit": unit,
        "bands": bands or [],
    }
    return Figure(
        charts.line_chart(series, x_labels=x_labels, title=title, **shape),
        charts.chart_data(series, title=title, zone=zone, bands_label=_("incidents"), **shape),
        series,
        lines,
        unit,
    )


def _term_steps(  # type: ignore[no-untyped-def]
    timeline: TermsTimeline, start: datetime, end: datetime, value
) -> list[charts.Step]:
    """A reference line as steps: ``value(terms)`` of the version in force at ``start``
    (TermsTimeline.at, the terms-in-force rule), then of each version from the moment it
    takes effect; None where no version is in force or the version sets no value."""
    first = timeline.at(start)
    steps: list[charts.Step] = [(start.timestamp(), None if first is None else value(first))]
    steps += [
        (terms.effective_from.timestamp(), value(terms))
        for terms in timeline
        if start < terms.effective_from < end
    ]
    return steps


def _max_gap(
    timeline: TermsTimeline, start: datetime, end: datetime, kind: str, days: float
) -> float:
    """How far apart two points may lie before the line breaks: GAP_FACTOR x the larger of
    the chart's bucket (an hour, a day beyond CHART_DAYS) and the slowest cadence the
    window's terms measure ``kind`` at."""
    bucket = HOUR_S if days <= selectors.CHART_DAYS else DAY_S
    cadences = [
        int((terms.probe_cadence_s or {}).get(kind) or DEFAULT_PROBE_CADENCE_S[kind])
        for terms in timeline.during(start, end)
    ] or [DEFAULT_PROBE_CADENCE_S[kind]]
    return charts.GAP_FACTOR * max(bucket, *cadences)


def _series(series: dict, rename: Callable[[str], str] = str) -> list[charts.Series]:  # type: ignore[type-arg]
    return [
        charts.Series(rename(target), [(s.timestamp(), bps / GIGA) for s, bps in points])
        for target, points in series.items()
    ]


def _throughput_lines(
    timeline: TermsTimeline, terms: LeaseTerms | None, start: datetime, end: datetime
) -> list[charts.Line]:
    """The SLA threshold (dashed) and the contracted bandwidth as steps over the window:
    the 100 Gbit/s a week was contracted at, not today's 200."""
    if terms is None and not timeline.during(start, end):
        return []
    label = terms or timeline.during(start, end)[-1]
    return [
        charts.Line(
            _("threshold %(percent)s%%") % {"percent": plain(label.sla_threshold_percent)},
            _term_steps(
                timeline,
                start,
                end,
                lambda t: float(t.contracted_bandwidth_gbps * t.sla_threshold_percent / 100),
            ),
        ),
        charts.Line(
            _("contracted"),
            _term_steps(timeline, start, end, lambda t: float(t.contracted_bandwidth_gbps)),
            dashed=False,
            colour=charts.CONTRACT_COLOUR,
        ),
    ]


def _busbw_lines(timeline: TermsTimeline, start: datetime, end: datetime) -> list[charts.Line]:
    steps = _term_steps(
        timeline,
        start,
        end,
        lambda t: (
            None if t.collective_busbw_floor_gbps is None else float(t.collective_busbw_floor_gbps)
        ),
    )
    if all(y is None for _x, y in steps):
        return []
    return [charts.Line(_("contracted floor"), steps)]


def _titled(chart_range: ChartRange, by_days: str, by_range: str) -> str:
    """A chart's title or caption: the wording of ?days=N since issue 17, else the range's."""
    if chart_range.preset_days is not None:
        return by_days % {"days": chart_range.preset_days}
    return by_range % {"range": chart_range.title}


def _incident_bands(lease: Lease, chart_range: ChartRange) -> list[charts.Span]:
    """The lease's incidents in the range (one query) as bands from opening to closing, or
    to the range's end while open, each named by its kind and linking to its page."""
    rows = (
        incident_selectors.overlapping(lease=lease, start=chart_range.start, end=chart_range.end)
        .only("pk", "kind", "target", "opened_at", "closed_at")
        .order_by("opened_at", "pk")[:BANDS_MAX]
    )
    return [
        charts.Span(
            incident.opened_at.timestamp(),
            (incident.closed_at or chart_range.end).timestamp(),
            _("incident: %(kind)s, %(target)s")
            % {"kind": incident.get_kind_display(), "target": incident.target},
            reverse("portal:incident", args=[lease.pk, incident.pk]),
        )
        for incident in rows
    ]


def _figures(  # type: ignore[no-untyped-def]
    user,
    lease: Lease,
    timeline: TermsTimeline,
    terms: LeaseTerms | None,
    chart_range: ChartRange,
    bands: list[charts.Span],
) -> dict[str, Figure]:
    """The throughput chart (with the incidents' ``bands``, ``_incident_bands``) and the
    NCCL bus bandwidth chart over the range."""
    zone = lease.tenant.time_zone
    start, instant, days = chart_range.start, chart_range.end, chart_range.days
    shape = {
        "zone": zone,
        "x_range": (start.timestamp(), instant.timestamp()),
        "x_labels": _x_labels(start, instant, zone),
    }
    series = selectors.throughput_series(user=user, lease=lease, instant=instant, days=days)
    throughput = _figure(
        _series(series),
        _throughput_lines(timeline, terms, start, instant),
        max_gap=_max_gap(timeline, start, instant, ProbeKind.THROUGHPUT, days),
        title=_titled(
            chart_range,
            _("Measured throughput per node pair, last %(days)s days"),
            _("Measured throughput per node pair, %(range)s"),
        ),
        bands=bands,
        **shape,
    )
    busbw = selectors.nccl_series(user=user, lease=lease, instant=instant, days=days)
    # One run measures the whole lease (target "all"); beyond a month the days' extremes
    # are one series too: either way it is the bus bandwidth, not "all".
    name = _("bus bandwidth")
    nccl = _figure(
        _series(busbw, lambda t: name if t == "all" or days > selectors.CHART_DAYS else t),
        _busbw_lines(timeline, start, instant),
        max_gap=_max_gap(timeline, start, instant, ProbeKind.COLLECTIVE, days),
        title=_titled(
            chart_range,
            _("NCCL all_reduce bus bandwidth, last %(days)s days"),
            _("NCCL all_reduce bus bandwidth, %(range)s"),
        ),
        **shape,
    )
    return {"throughput": throughput, "busbw": nccl}


def _figure_context(figures: dict[str, Figure]) -> dict[str, Any]:
    throughput, nccl = figures["throughput"], figures["busbw"]
    return {
        "chart": throughput.html,
        "chart_data": throughput.data,
        "has_data": bool(throughput.series),
        "busbw_chart": nccl.html,
        "busbw_data": nccl.data,
        "has_busbw": bool(nccl.series),
    }


def _month_labels(start: datetime, end: datetime, zone: str) -> list[tuple[float, str]]:
    """Ticks at local midnights of [start, end], about six of them."""
    local = ZoneInfo(zone)
    first = start.astimezone(local).replace(hour=0, minute=0, second=0, microsecond=0)
    days = max(1, (end - start).days)
    step = max(1, round(days / 6))
    ticks = [first + timedelta(days=day) for day in range(0, days + 2, step)]
    return [(t.timestamp(), f"{t:%m-%d}") for t in ticks if start <= t <= end]


def _usage(lease: Lease, lease_month: LeaseMonth) -> dict[str, Any]:
    """A usage-billed lease's month: the traffic chart with the running 95th percentile
    (billing.running) and the month-to-date estimate's rows, from the lease month."""
    month = lease_month.usage
    if month is None:
        return {"usage": None}
    rows = [
        {
            "terms": part.segment.terms,
            "start": part.segment.start,
            "end": part.segment.end,
            "p95_bps": part.p95_bps,
            "quantity": f"{plain(part.line.quantity)} {INVOICE_UNITS.get(part.line.unit, '')}",
            "amount": part.line.amount,
        }
        for part in month.parts
    ]
    context: dict[str, Any] = {"usage": month, "usage_rows": rows, "usage_chart": None}
    figure = _traffic_figure(lease, lease_month)
    if figure is not None:
        context.update(usage_chart=figure.html, usage_data=figure.data)
    return context


def _traffic_figure(lease: Lease, lease_month: LeaseMonth) -> Figure | None:
    """The month's traffic sent and its running 95th percentile; None without a sample."""
    month = lease_month.usage
    if month is None or not month.samples:
        return None
    zone = lease.tenant.time_zone
    peak = max(rate for _slot, _seconds, rate in month.samples)
    factor, unit = (GIGA, GBIT) if peak >= 10 * GIGA else (MEGA, MBIT)  # 1-4 digits
    traffic = charts.Series(
        _("traffic sent"),
        [(slot.timestamp(), float(rate / factor)) for slot, _seconds, rate in month.samples],
    )
    lines = []
    steps: list[charts.Step] = []
    for part in month.parts:
        changes = [
            (slot, value)
            for index, (slot, value) in enumerate(part.running_p95)
            if index == 0 or part.running_p95[index - 1][1] != value
        ]
        if len(changes) > MAX_STEPS:  # keep the last figure of each hour
            hourly = {
                slot.replace(minute=0, second=0, microsecond=0): (slot, value)
                for slot, value in changes
            }
            changes = list(hourly.values())
        steps += [(slot.timestamp(), float(value / factor)) for slot, value in changes]
        steps.append((part.segment.end.timestamp(), None))
    if any(part.running_p95 for part in month.parts):
        lines.append(
            charts.Line(
                _("95th percentile so far"), steps, dashed=False, colour=charts.THRESHOLD_COLOUR
            )
        )
    return _figure(
        [traffic],
        lines,
        zone=zone,
        x_range=(month.start.timestamp(), month.end.timestamp()),
        x_labels=_month_labels(month.start, month.end, zone),
        max_gap=charts.GAP_FACTOR * max(seconds for _slot, seconds, _rate in month.samples),
        title=_("Traffic sent in %(period)s") % {"period": lease_month.period},
        unit=unit,
    )


# The timeline's slices: about this many over any window (30 days: 4-hour slices; a down
# minute marks its whole slice).
TIMELINE_SLICES = 180


LINK_UNIT = "1 up / 0 down"  # the link chart's CSV: a row's state in each hour it has one


def _link_series(nodes: list[selectors.NodeLinks]) -> list[charts.Series]:
    """The link chart's rows as series for its CSV: each node, then each of its ports
    ("node port"), 1 for each hour up and 0 for each hour down (``HourStates.hours``);
    an hour without a link check has no row, as a gap in a line chart has no point."""
    return [
        charts.Series(label, [(hour.timestamp(), float(up)) for hour, up, _down in row.hours])
        for node in nodes
        for label, row in [(node.hostname, node.states)]
        + [(f"{node.hostname} {port}", states) for port, states in node.ports.items()]
    ]


def _timeline(  # type: ignore[no-untyped-def]
    nodes: list[selectors.NodeLinks],
    zone: str,
    chart_range: ChartRange,
    bands: list[charts.Span],
) -> tuple[Figure, list[dict]]:  # type: ignore[type-arg]
    """The link timeline over the range, with the incidents' ``bands`` as on the
    throughput chart, as a Figure (its SVG, and its rows as series for the CSV) and, for
    reading without the picture, hours down per row."""
    start, instant = chart_range.start, chart_range.end
    hours = max(1, round((instant - start) / timedelta(hours=1)))
    slice_hours = max(1, hours // TIMELINE_SLICES)
    buckets = max(1, hours // slice_hours)
    x0, x1 = start.timestamp(), instant.timestamp()
    local = ZoneInfo(zone)
    rows: list[charts.Band] = []
    summary: list[dict] = []

    base = charts.hour_counts(nodes[0].states.checked if nodes else [], x0, x1, buckets)

    def states(row: selectors.HourStates) -> list[str]:
        return charts.hour_states(
            base, row.checked_set, row.down, row.silent, start=x0, end=x1, buckets=buckets
        )

    for node in nodes:
        for label, row, sub in [(node.hostname, node.states, False)] + [
            (label, row, True) for label, row in node.ports.items()
        ]:
            rows.append(charts.Band(label, states(row), sub=sub))
            summary.append(
                {
                    "label": label,
                    "port": sub,
                    "down_hours": row.down_hours,
                    "checked_hours": row.judged_hours,
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
        rows,
        start=x0,
        end=x1,
        x_labels=_x_labels(start, instant, zone),
        state_labels={
            charts.UP: _("link check passed, port up"),
            charts.DOWN: _("link check failed, port down"),
            charts.NO_DATA: _("no link check"),
        },
        span_text=span_text,
        title=_titled(
            chart_range,
            _("Link state per node and port, last %(days)s days"),
            _("Link state per node and port, %(range)s"),
        ),
        incidents=bands,
    )
    data = {"x_min": x0 * 1000, "bands": [band.href for band in bands]}
    return Figure(svg, data, _link_series(nodes), [], LINK_UNIT), summary


@login_required
def lease_detail(request: HttpRequest, pk: int) -> HttpResponse:
    lease = _lease(request, pk)
    instant = selectors.now()
    zone = lease.tenant.time_zone
    try:
        month = months.month_of(request, lease, instant)
    except selectors.PeriodRefused as refusal:
        return months.refused(request, lease, refusal)
    versions = lease_selectors.terms_timeline_visible_to(user=request.user, lease=lease)
    terms = versions.at(instant)
    chart_range = chart_ranges.chart_range(request, zone, instant)
    bands = _incident_bands(lease, chart_range)
    figures = _figure_context(_figures(request.user, lease, versions, terms, chart_range, bands))
    links = selectors.link_timeline(
        user=request.user, lease=lease, instant=chart_range.end, days=chart_range.days
    )
    timeline, link_summary = _timeline(links, zone, chart_range, bands)
    incidents = incident_selectors.visible_to(request.user).filter(lease=lease)
    if month.chosen:  # that month's, as its SLA report counts them
        incidents = selectors.incidents_in(incidents, month.start, month.end)
    incidents = incidents.annotate(run_count=Count("runs")).order_by("-opened_at")[:50]
    evidence = list(
        billing_selectors.evidence_visible_to(request.user)
        .filter(lease=lease)
        .only("pk", "tool", "measured_at", "measured_bps", "latency_us", "verdict", "created_at")
        .order_by("-measured_at", "-pk")[:EVIDENCE_ON_DETAIL]
    )
    read = lease_month(lease, month.period, instant=instant, usage=True)
    report = sla_report(lease=lease, period=month.period, now=instant, month=read)
    return render(
        request,
        "portal/lease_detail.html",
        {
            "lease": lease,
            "header": month_header.lease_header(user=request.user, month=read),
            "terms": terms,
            "zone": zone,
            **figures,
            **_usage(lease, read),
            "probe_tax": selectors.probe_tax(lease=lease, period=month.period),
            "probe_tax_rows": selectors.PROBE_TAX_ROWS,
            "timeline": timeline.html,
            "link_bands": timeline.data["bands"],
            "link_summary": link_summary,
            "has_links": bool(links),
            "evidence": evidence,
            "pending_amendments": lease_selectors.amendments_visible_to(request.user)
            .filter(lease=lease, status=TermsAmendment.Status.PENDING)
            .order_by("effective_from", "pk"),
            "can_write": can_write_for(request.user, lease),
            "incidents": incidents,
            "report": report,
            "month": month,
            "days": chart_range.preset_days,
            "range": chart_range,
            "windows": selectors.CHART_WINDOWS,
            "presets": chart_ranges.PRESETS,
        },
    )


@login_required
def invoice_list(request: HttpRequest) -> HttpResponse:
    invoices = list(billing_selectors.invoices_for_balance(user=request.user))
    rows = [
        (invoice, balance(invoice, invoice.credit_notes.all(), invoice.voucher_redemptions.all()))
        for invoice in invoices
    ]
    header = month_header.leases_header(user=request.user, instant=selectors.now())
    return render(request, "portal/invoice_list.html", {"rows": rows, "header": header})


def _voucher_row(voucher: Voucher, now: datetime) -> dict[str, Any]:
    """A voucher with its standing now and the invoices that used it (not void ones)."""
    return {
        "voucher": voucher,
        "standing": vouchers.standing(voucher, now),
        "invoices": [
            redemption.invoice
            for redemption in voucher.redemptions.all()
            if redemption.invoice.status != "void"
        ],
    }


@login_required
def voucher_list(request: HttpRequest) -> HttpResponse:
    """The vouchers (代金券) the user's tenants hold: amount, used, what is left, expiry in
    the tenant's zone, state, and the invoices that used each (``billing.vouchers``)."""
    now = selectors.now()
    found = vouchers.with_ledger(
        billing_selectors.vouchers_visible_to(request.user).select_related("tenant")
    ).order_by("-issued_at", "-id")
    return render(
        request,
        "portal/voucher_list.html",
        {"rows": [_voucher_row(voucher, now) for voucher in found]},
    )


@login_required
def voucher_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One voucher and its ledger: issue, uses, what credit notes gave back, what late
    results took off or added (supplements)."""
    voucher = get_object_or_404(
        vouchers.with_ledger(
            billing_selectors.vouchers_visible_to(request.user).select_related("tenant")
        ),
        pk=pk,
    )
    now = selectors.now()
    supplements = vouchers.with_ledger(
        billing_selectors.vouchers_visible_to(request.user).filter(supplements=voucher)
    ).order_by("issued_at", "number")
    return render(
        request,
        "portal/voucher_detail.html",
        {
            **_voucher_row(voucher, now),
            "ledger": vouchers.ledger_rows(voucher),
            "supplemented_by": [_voucher_row(other, now) for other in supplements],
        },
    )


def _invoice(request: HttpRequest, pk: int) -> tuple[Invoice, list[InvoiceLine]]:
    invoice = get_object_or_404(
        billing_selectors.invoices_visible_to(request.user).select_related("tenant"), pk=pk
    )
    lines = list(billing_selectors.invoice_lines_of(user=request.user, invoice=invoice))
    return invoice, lines


@login_required
def invoice_detail(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, lines = _invoice(request, pk)
    credit_notes = list(billing_selectors.credit_notes_of(user=request.user, invoice=invoice))
    redemptions = vouchers.applied(invoice)
    return render(
        request,
        "portal/invoice_detail.html",
        {
            "invoice": invoice,
            "lines": lines,
            "credit_notes": credit_notes,
            "balance": balance(invoice, credit_notes, redemptions),
            "redemptions": redemptions,
            "vouchers_issued": list(invoice.vouchers_issued.select_related("lease")),
        },
    )


@login_required
def invoice_csv(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, _lines = _invoice(request, pk)
    document = invoice_document(invoice)
    body = io.StringIO()
    csv_export.write(document, body)
    return attachment(body.getvalue(), "text/csv; charset=utf-8", document.filename("csv"))


@login_required
def invoice_pdf(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, _lines = _invoice(request, pk)
    language = document_language(request.LANGUAGE_CODE)
    with translation.override(language):
        document = invoice_document(invoice)
        body = pdf.render(document)
    return attachment(body, "application/pdf", document.filename("pdf"))


@login_required
def credit_note_pdf(request: HttpRequest, pk: int) -> HttpResponse:
    """A credit note (红字发票) as a PDF, looked up like its invoice: another tenant's is a
    404."""
    note = get_object_or_404(
        billing_selectors.credit_notes_visible_to(request.user).select_related("tenant", "invoice"),
        pk=pk,
    )
    with translation.override(document_language(request.LANGUAGE_CODE)):
        document = credit_note_document(note)
        body = pdf.render(document)
    return attachment(body, "application/pdf", document.filename("pdf"))


def _einvoice(build: Callable[[], dict[str, Any]]) -> HttpResponse:
    """The 数电票 payload as a JSON download, or 400 with the reason it was refused."""
    try:
        payload = build()
    except einvoice.EInvoiceRefused as refused:
        return HttpResponse(str(refused), status=400, content_type="text/plain; charset=utf-8")
    return attachment(einvoice.as_json(payload), "application/json", einvoice.filename(payload))


@login_required
def invoice_einvoice(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, _lines = _invoice(request, pk)
    return _einvoice(lambda: einvoice.invoice_payload(invoice))


@login_required
def credit_note_einvoice(request: HttpRequest, pk: int) -> HttpResponse:
    note = get_object_or_404(
        billing_selectors.credit_notes_visible_to(request.user).select_related("tenant", "invoice"),
        pk=pk,
    )
    return _einvoice(lambda: einvoice.credit_note_payload(note))


@login_required
def invoice_xlsx(request: HttpRequest, pk: int) -> HttpResponse:
    invoice, _lines = _invoice(request, pk)
    with translation.override(document_language(request.LANGUAGE_CODE)):
        document = invoice_document(invoice)
        body = xlsx.render(document)
    return attachment(body, xlsx.CONTENT_TYPE, document.filename("xlsx"))


def _csv_number(value: float | None) -> str:
    """A figure as a plain number: 97.5, 40 (never 4E+1 or 40.0); empty where none."""
    if value is None:
        return ""
    text = format(Decimal(repr(value)).normalize(), "f")
    return text


def _csv_time(x: float) -> str:
    return datetime.fromtimestamp(x, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


CSV_CHARTS = ("throughput", "busbw", "links", "traffic")


@login_required
def chart_csv(request: HttpRequest, pk: int, chart: str) -> HttpResponse:
    """A chart's data as CSV: the series it draws over the same range (the picker's, or the
    month's for the traffic chart), each measured point and each step of a reference line,
    one row each: time (ISO 8601, UTC), series, value (a plain number), unit. The link
    chart's rows are its nodes and ports, 1 for an hour up and 0 for an hour down."""
    if chart not in CSV_CHARTS:
        raise Http404
    lease = _lease(request, pk)
    instant = selectors.now()
    zone = lease.tenant.time_zone
    if chart == "traffic":
        try:
            month = months.month_of(request, lease, instant)
        except selectors.PeriodRefused as refusal:
            return months.refused(request, lease, refusal)
        read = lease_month(lease, month.period, instant=instant, usage=True)
        figure = _traffic_figure(lease, read)
        name = f"{lease.reference}-traffic-{month.period}.csv"
    else:
        chart_range = chart_ranges.chart_range(request, zone, instant)
        if chart == "links":
            links = selectors.link_timeline(
                user=request.user, lease=lease, instant=chart_range.end, days=chart_range.days
            )
            figure = _timeline(links, zone, chart_range, [])[0]
        else:
            versions = lease_selectors.terms_timeline_visible_to(user=request.user, lease=lease)
            figure = _figures(request.user, lease, versions, versions.at(instant), chart_range, [])[
                chart
            ]
        start, end = (instant.astimezone(UTC) for instant in (chart_range.start, chart_range.end))
        name = f"{lease.reference}-{chart}-{start:%Y%m%dT%H%MZ}-{end:%Y%m%dT%H%MZ}.csv"
    body = io.StringIO()
    writer = CsvWriter(body)
    writer.writerow(["time", "series", "value", "unit"])
    if figure is not None:
        x_min = figure.data["x_min"] / 1000
        for one in figure.series:
            for x, y in one.points:
                writer.writerow([_csv_time(x), one.label, _csv_number(y), figure.unit])
        for line in figure.lines:
            for x, y in sorted(line.steps, key=lambda step: step[0]):
                writer.writerow([_csv_time(max(x, x_min)), line.label, _csv_number(y), figure.unit])
    return attachment(body.getvalue(), "text/csv; charset=utf-8", name)
