"""A usage-billed lease's month so far (pay-per-use: per GB, 95th percentile), for the
lease page: the traffic samples, the running 95th percentile and the month-to-date
estimate.

The estimate is the invoice's own usage line (``billing.invoicing.lines``), asked for the
billed window cut at ``instant`` instead of at the month's end: per GB, the GB sent so far
x price; 95th percentile, the p95 of the samples so far (by the terms' direction and
window, ``calculations.p95_bandwidth``) x price x the elapsed share of the month. So once
the month is over it is the invoice's figure to the fen. Each terms version's segment is
priced on its own, as the invoice does.

The projection is the month at the rate so far: the estimate x the usage seconds of the
whole month's billed window / those billed so far, half-up to the fen. Per GB, the traffic
so far extrapolated linearly; 95th percentile, the 95th so far for the whole month (its
line is prorated by time, so the ratio undoes exactly that). Once the month is over the
projection is the estimate. ``document`` is what the API answers.

``refresh_running`` stores the same figures per lease and month (``RunningFigure``) for
``/metrics``, which reads them in one query instead of a month of samples per lease per
scrape: ingest calls it once per batch for the leases whose traffic samples it rewrote,
for the months (the tenant's calendar) of the slots rewritten. So the samples of 30 Nov
23:55 +08:00, ingested on 1 December, refresh November's row; December's row starts with
the first December sample. A lease with no sample ingested in a month has no row for it
(the API answers zeros meanwhile); one that nothing bills by usage that month, or whose
billed window has not begun (awaiting acceptance), has none either. An ingest that finds
no new run refreshes nothing; refreshing again at the same instant writes the same row.
Anything else that changes the month (an amendment, an acceptance) shows at the lease's
next ingested sample."""

from bisect import insort
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_EVEN, Context, Decimal, localcontext
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import Q

from billing import metering
from billing.invoicing.computed import ComputedLine, Month, fraction
from billing.invoicing.lines import usage_line
from billing.invoicing.windows import Segment, Window, billed_window, segments
from billing.models import RunningFigure
from common.locks import intake_lock
from gpulease_verify.calculations import (
    P95_DROP_PERCENT,
    P95Direction,
    P95Window,
    TrafficRate,
)
from gpulease_verify.money import to_fen
from gpulease_verify.periods import Period
from leases.choices import BillingMode
from leases.models import Lease
from leases.selectors import TermsTimeline

PER_GB = BillingMode.PER_GB
USAGE_MODES = (BillingMode.PER_GB, BillingMode.P95)
# The daily average's context, as ``calculations.p95_bandwidth`` takes it (50 digits).
AVERAGE_CONTEXT = Context(prec=50, rounding=ROUND_HALF_EVEN)


@dataclass(frozen=True)
class UsagePart:
    """One terms version's stretch of the month so far and its usage line."""

    segment: Segment
    line: ComputedLine
    p95_bps: Decimal | None  # 95th percentile billing only: the line's p95 of the samples
    running_p95: list[tuple[datetime, Decimal]]  # (slot, p95 of the samples up to it)


@dataclass(frozen=True)
class MonthToDate:
    period: str
    start: datetime  # the billed window so far; start == end: nothing billed yet
    end: datetime
    month_seconds: int
    parts: list[UsagePart]
    samples: list[tuple[datetime, int, Decimal]]  # (slot, seconds, bit/s sent) in slot order
    awaiting_acceptance: bool
    in_progress: bool  # the month has not ended: the amount is an estimate
    full_usage_seconds: int = 0  # the usage segments of the whole month's billed window

    @property
    def amount(self) -> Decimal:
        """The estimate: the sum of the parts' usage lines (each already rounded to 0.01)."""
        return sum((part.line.amount for part in self.parts), Decimal("0.00"))

    @property
    def projected_amount(self) -> Decimal | None:
        """The month at the rate so far (module docstring); None before anything is billed."""
        elapsed = sum(part.segment.seconds for part in self.parts)
        return projection(self.amount, elapsed, self.full_usage_seconds, self.in_progress)

    @property
    def elapsed_share(self) -> Decimal:
        """The share of the month billed so far, as the invoice prints it (6 decimals)."""
        return fraction(sum(part.segment.seconds for part in self.parts), self.month_seconds)

    @property
    def mode(self) -> str:
        return self.parts[-1].segment.terms.billing_mode if self.parts else ""

    @property
    def usage_gb(self) -> Decimal | None:
        """GB sent so far: the per-GB lines' quantity, summed (None: no per-GB line)."""
        gb = [p.line.quantity for p in self.parts if p.segment.terms.billing_mode == PER_GB]
        return sum(gb, Decimal(0)) if gb else None

    @property
    def p95_part(self) -> UsagePart | None:
        """The 95th-percentile part billing the most Mbit/s (the last of equals); None:
        no 95th-percentile line."""
        found = None
        for part in self.parts:
            if part.segment.terms.billing_mode == BillingMode.P95 and (
                found is None or part.line.quantity >= found.line.quantity
            ):
                found = part
        return found

    @property
    def p95_mbps(self) -> Decimal | None:
        """The 95th so far as billed, Mbit/s: the highest when the terms changed."""
        part = self.p95_part
        return None if part is None else part.line.quantity


def projection(
    amount: Decimal, elapsed_seconds: int, full_seconds: int, in_progress: bool
) -> Decimal | None:
    """The usage of the whole billed window at the rate so far: ``amount`` (the usage lines
    of the ``elapsed_seconds`` billed so far) x ``full_seconds`` / ``elapsed_seconds``,
    half-up to the fen; ``amount`` itself once the month is over; None before any usage
    second is billed."""
    if not in_progress:
        return amount
    if elapsed_seconds <= 0:
        return None
    return to_fen(amount * full_seconds / elapsed_seconds)


def _rates(lease: Lease, start: datetime, end: datetime) -> list[TrafficRate]:
    """The samples of [start, end) in slot order (``metering.traffic_rates``)."""
    return metering.traffic_rates(lease_id=lease.pk, start=start, end=end)


def _p95_of(ordered: list[Decimal]) -> Decimal | None:
    """``percentile_95`` of an ascending list: the top ``n x P95_DROP_PERCENT // 100``
    dropped, the next one billed."""
    if not ordered:
        return None
    return ordered[-1 - len(ordered) * P95_DROP_PERCENT // 100]


def running_p95(
    samples: list[TrafficRate],
    *,
    direction: str = P95Direction.TX,
    window: str = P95Window.MONTHLY,
    zone_name: str = "Asia/Shanghai",
) -> list[tuple[datetime, Decimal]]:
    """After each sample, what ``calculations.p95_bandwidth`` bills for the samples so far
    (its direction and window rules), kept sorted as the samples arrive instead of sorting
    the month again for every point (``calculations.percentile_95``'s rule on each series:
    sorted from highest, the top ``n x P95_DROP_PERCENT // 100`` dropped, the next one
    billed); the tests check each point against ``p95_bandwidth`` itself. A point before
    any figure (only unmeasured received bytes so far) is left out."""
    rule, span = P95Direction(direction), P95Window(window)
    clock = ZoneInfo(zone_name)
    series: dict[str, dict[str, list[Decimal]]] = {}  # group -> series -> ascending rates
    figures: dict[str, Decimal] = {}  # group -> its figure so far
    points: list[tuple[datetime, Decimal]] = []
    for sample in samples:
        if sample.seconds <= 0:
            continue
        group = (
            sample.slot_at.astimezone(clock).date().isoformat()
            if span == P95Window.DAILY_AVERAGE
            else ""
        )
        lists = series.setdefault(group, {"tx": [], "rx": [], "max": []})
        tx, rx = sample.tx_bps, sample.rx_bps
        insort(lists["tx"], tx)
        if rx is not None:
            insort(lists["rx"], rx)
        insort(lists["max"], tx if rx is None else max(tx, rx))
        if rule == P95Direction.MAX_OF_P95:
            known = [v for v in (_p95_of(lists["tx"]), _p95_of(lists["rx"])) if v is not None]
            figure = max(known) if known else None
        else:
            figure = _p95_of(lists[str(rule)])
        if figure is not None:
            figures[group] = figure
        if figures:
            with localcontext(AVERAGE_CONTEXT):
                points.append((sample.slot_at, sum(figures.values(), Decimal(0)) / len(figures)))
    return points


def month_to_date(
    *,
    lease: Lease,
    period: str,
    instant: datetime,
    window: Window | None = None,
    series: bool = True,
) -> MonthToDate | None:
    """The month so far (up to ``instant``, the whole month once it is over) of a lease
    that terms in force during the month bill by usage; None for any other lease. The
    billed window is the invoice's (``invoicing.billed_window``; ``billing.lease_month``
    passes the one it read), cut at ``instant``. ``series=False`` leaves out what only the
    lease page's chart reads (``samples`` and each part's ``running_p95``): the figures
    are the same, for one read of the samples fewer (``refresh_running``)."""
    zone = lease.tenant.time_zone
    month = Month.of(period, zone)
    timeline = TermsTimeline.for_lease(lease)
    whole = segments(timeline=timeline, start=month.start, end=month.end)
    if not any(segment.terms.billing_mode in USAGE_MODES for segment in whole):
        return None
    if window is None:
        window = billed_window(lease=lease, period=period, timeline=timeline)
    cut_at = min(month.end, max(instant, month.start))
    start, end = window.so_far(instant) or (cut_at, cut_at)
    parts = segments(timeline=timeline, start=start, end=end) if start < end else []
    usage = [segment for segment in parts if segment.terms.billing_mode in USAGE_MODES]
    rates = _rates(lease, start, end) if usage and series else []
    samples = [(rate.slot_at, rate.seconds, rate.tx_bps) for rate in rates]
    out: list[UsagePart] = []
    for segment in usage:
        line = usage_line(lease, segment, month)
        if line is None:  # pragma: no cover (usage modes always give a line)
            continue
        p95 = line.detail.get("p95_bps")
        running: list[tuple[datetime, Decimal]] = []
        if series and segment.terms.billing_mode == BillingMode.P95:
            running = running_p95(
                [s for s in rates if segment.start <= s.slot_at < segment.end],
                direction=segment.terms.p95_direction,
                window=segment.terms.p95_window,
                zone_name=zone,
            )
        out.append(UsagePart(segment, line, None if p95 is None else Decimal(p95), running))
    full = 0
    if window.start is not None and window.end is not None:
        full = sum(
            part.seconds
            for part in segments(timeline=timeline, start=window.start, end=window.end)
            if part.terms.billing_mode in USAGE_MODES
        )
    return MonthToDate(
        period=period,
        start=start,
        end=end,
        month_seconds=month.seconds,
        parts=out,
        samples=samples,
        awaiting_acceptance=window.awaiting_acceptance,
        in_progress=instant < month.end,
        full_usage_seconds=full,
    )


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def document(*, lease: Lease, month: MonthToDate | None, period: str) -> dict[str, Any]:
    """The running figures as the API answers them (``usage`` null for a lease that no
    terms in force during the month bill by usage)."""
    body: dict[str, Any] = {"lease": lease.reference, "period": period, "usage": None}
    if month is None:
        return body
    body["usage"] = {
        "billing_mode": month.mode,
        "in_progress": month.in_progress,
        "awaiting_acceptance": month.awaiting_acceptance,
        "billed_from": month.start.isoformat(),
        "billed_until": month.end.isoformat(),
        "elapsed_share": str(month.elapsed_share),
        "amount_so_far": str(month.amount),
        "projected_amount": _text(month.projected_amount),
        "parts": [
            {
                "terms_version": part.segment.terms.version,
                "segment_start": part.segment.start.isoformat(),
                "segment_end": part.segment.end.isoformat(),
                "quantity": str(part.line.quantity),
                "unit": part.line.unit,
                "unit_price": str(part.line.unit_price),
                "amount": str(part.line.amount),
                "p95_bps": _text(part.p95_bps),
                "samples": part.line.detail.get("samples"),
                "samples_above_the_95th": part.line.detail.get("dropped_samples"),
            }
            for part in month.parts
        ],
    }
    return body


# --- the stored row, for /metrics ------------------------------------------------------

MILLI = Decimal("0.001")
FIGURES = [
    "billing_mode",
    "quantity",
    "unit",
    "p95_bps",
    "slots_above_p95",
    "samples",
    "amount",
    "projected_amount",
    "samples_through",
    "computed_at",
]


def running_figure(*, lease: Lease, month: MonthToDate, instant: datetime) -> RunningFigure | None:
    """The row ``/metrics`` reads for a month so far (None: nothing billed yet). Its mode
    and unit are those of the terms version in force last; the quantity is the month's
    in that unit, as the thresholds read it too: GB sent (every per-GB line), or the 95th
    so far as billed in Mbit/s (the highest line when the terms changed), with that
    line's 95th and the samples above it. The amounts are the month's."""
    if not month.parts:
        return None
    p95 = month.p95_part
    if month.mode == BillingMode.P95:
        unit, quantity = "Mbps", month.p95_mbps
    else:
        unit, quantity = "GB", month.usage_gb
    assert quantity is not None  # the last part is a line of that unit
    through = max(
        (
            datetime.fromisoformat(part.line.detail["last_slot"])
            for part in month.parts
            if part.line.detail.get("last_slot")
        ),
        default=None,
    )
    return RunningFigure(
        lease=lease,
        period=month.period,
        billing_mode=month.mode,
        quantity=quantity,
        unit=unit,
        p95_bps=None if p95 is None or p95.p95_bps is None else p95.p95_bps.quantize(MILLI),
        slots_above_p95=None if p95 is None else p95.line.detail.get("dropped_samples"),
        samples=sum(part.line.detail.get("samples") or 0 for part in month.parts),
        amount=month.amount,
        projected_amount=month.projected_amount,
        samples_through=through,
        computed_at=instant,
    )


def periods_of(zone: str, start: datetime, end: datetime) -> list[str]:
    """The tenant's months that the samples of [start, end) fall in."""
    first = Period.containing(start, zone)
    last = Period.containing(max(start, end - timedelta(microseconds=1)), zone)
    return [str(period) for period in Period.span(first, last)]


def refresh_running(
    windows: Mapping[int, tuple[Lease, datetime, datetime]], *, instant: datetime
) -> int:
    """Store the running figures (``RunningFigure``) of each lease in ``windows`` (lease id
    -> (lease, start, end): the traffic slots of [start, end) ingest just rewrote; the
    lease with its tenant) for every month that window reaches, as of ``instant``:
    ``month_to_date`` per lease and month, then one upsert for all the rows and one
    delete for the months that no longer have figures, in the caller's transaction. An
    empty window (a first reading,
    no sample written) refreshes nothing. Returns the rows written."""
    rows: list[RunningFigure] = []
    gone = Q(pk__in=[])
    for lease_id, (lease, start, end) in sorted(windows.items()):
        if end <= start:
            continue
        # Two ingests refreshing one lease take turns, in lease order: the later reads the
        # month once the earlier has committed, so older figures never land last.
        intake_lock(f"running-figures:{lease_id}")
        for period in periods_of(lease.tenant.time_zone, start, end):
            month = month_to_date(lease=lease, period=period, instant=instant, series=False)
            row = (
                None if month is None else running_figure(lease=lease, month=month, instant=instant)
            )
            if row is None:
                gone |= Q(lease_id=lease.pk, period=period)
            else:
                rows.append(row)
    RunningFigure.objects.filter(gone).delete()
    RunningFigure.objects.bulk_create(
        rows,
        update_conflicts=True,
        unique_fields=["lease", "period"],
        update_fields=FIGURES,
    )
    return len(rows)
