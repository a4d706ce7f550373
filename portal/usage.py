"""A usage-billed lease's month so far (pay-per-use: per GB, 95th percentile), for the
lease page: the traffic samples, the running 95th percentile and the month-to-date
estimate.

The estimate is the invoice's own usage line (``billing.invoicing.lines``), asked for the
billed window cut at ``instant`` instead of at the month's end: per GB, the GB sent so far
x price; 95th percentile, the p95 of the samples so far x price x the elapsed share of the
month. So once the month is over it is the invoice's figure to the fen. Each terms
version's segment is priced on its own, as the invoice does."""

from bisect import insort
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from billing import metering
from billing.invoicing.computed import ComputedLine, Month, fraction
from billing.invoicing.lines import _usage_line
from billing.invoicing.windows import Segment, billing_start, requires_acceptance, segments
from billing.reports import billed_window
from gpulease_verify.calculations import P95_DROP_PERCENT
from leases.choices import BillingMode
from leases.models import Lease
from leases.selectors import TermsTimeline

USAGE_MODES = (BillingMode.PER_GB, BillingMode.P95)


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
    samples: list[tuple[datetime, int, Decimal]]  # (slot, seconds, bit/s) in slot order
    awaiting_acceptance: bool
    in_progress: bool  # the month has not ended: the amount is an estimate

    @property
    def amount(self) -> Decimal:
        """The estimate: the sum of the parts' usage lines (each already rounded to 0.01)."""
        return sum((part.line.amount for part in self.parts), Decimal("0.00"))

    @property
    def elapsed_share(self) -> Decimal:
        """The share of the month billed so far, as the invoice prints it (6 decimals)."""
        return fraction(sum(part.segment.seconds for part in self.parts), self.month_seconds)

    @property
    def mode(self) -> str:
        return self.parts[-1].segment.terms.billing_mode if self.parts else ""


def _rates(lease: Lease, start: datetime, end: datetime) -> list[tuple[datetime, int, Decimal]]:
    """The samples of [start, end) in slot order with their rate (``metering``'s rate:
    bytes x 8 / seconds, unrounded)."""
    rows = (
        metering.samples_in(lease_id=lease.pk, start=start, end=end)
        .filter(seconds__gt=0)
        .order_by("slot_at")
        .values_list("slot_at", "seconds", "tx_bytes")
    )
    return [(slot, seconds, Decimal(tx_bytes) * 8 / seconds) for slot, seconds, tx_bytes in rows]


def running_p95(samples: list[tuple[datetime, int, Decimal]]) -> list[tuple[datetime, Decimal]]:
    """After each sample, the 95th percentile of the samples so far, by
    ``calculations.percentile_95``'s rule (sorted from highest, the top
    ``n x P95_DROP_PERCENT // 100`` dropped, the next one billed), kept sorted as the
    samples arrive instead of sorting the month again for every point; the tests check
    each point against ``percentile_95`` itself."""
    ordered: list[Decimal] = []  # ascending
    points: list[tuple[datetime, Decimal]] = []
    for slot, _seconds, rate in samples:
        insort(ordered, rate)
        dropped = len(ordered) * P95_DROP_PERCENT // 100
        points.append((slot, ordered[-1 - dropped]))
    return points


def month_to_date(*, lease: Lease, period: str, instant: datetime) -> MonthToDate | None:
    """The month so far (up to ``instant``, the whole month once it is over) of a lease
    that terms in force during the month bill by usage; None for any other lease."""
    zone = lease.tenant.time_zone
    month = Month.of(period, zone)
    timeline = TermsTimeline.for_lease(lease)
    whole = segments(timeline=timeline, start=month.start, end=month.end)
    if not any(segment.terms.billing_mode in USAGE_MODES for segment in whole):
        return None
    start, end = billed_window(lease, month.start, min(month.end, max(instant, month.start)))
    waiting = False
    if requires_acceptance(timeline):  # the invoice's rule 3: billed from acceptance
        accepted = billing_start(lease)
        waiting = accepted is None
        start = end if accepted is None else min(end, max(start, accepted))
    parts = segments(timeline=timeline, start=start, end=end) if start < end else []
    usage = [segment for segment in parts if segment.terms.billing_mode in USAGE_MODES]
    samples = _rates(lease, start, end) if usage else []
    out: list[UsagePart] = []
    for segment in usage:
        line = _usage_line(lease, segment, month)
        if line is None:  # pragma: no cover (usage modes always give a line)
            continue
        p95 = line.detail.get("p95_bps")
        running: list[tuple[datetime, Decimal]] = []
        if segment.terms.billing_mode == BillingMode.P95:
            running = running_p95([s for s in samples if segment.start <= s[0] < segment.end])
        out.append(UsagePart(segment, line, None if p95 is None else Decimal(p95), running))
    return MonthToDate(
        period=period,
        start=start,
        end=end,
        month_seconds=month.seconds,
        parts=out,
        samples=samples,
        awaiting_acceptance=waiting,
        in_progress=instant < month.end,
    )
