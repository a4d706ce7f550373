"""The lease month: one immutable result per (lease, billing month) that every face reads,
so the invoice, the SLA report, the portal, the API, the metrics and the audit bundle
cannot disagree about which stretch of the month was billed or how it went.

``lease_month(lease, period)`` gives a ``LeaseMonth``:

- ``window``: the billed window (``billing.invoicing.billed_window``, on
  ``gpulease_verify.window``'s rule): the tenant's calendar month, cut to the lease's
  start and end and, where the first terms version says so, to the finish of its first
  passing acceptance; from the first instant a terms version is in force. Nothing billed
  (not accepted yet, or the lease does not reach into the month): ``window.billed`` is
  False and every figure below is empty;
- ``segments``: the window cut where a terms version takes effect (``terms`` lists the
  versions in force, one per segment, in order); an amendment mid-month gives two;
- ``summary``: compliance per probe kind and availability (pass, degraded, down and
  no-evidence minutes) over the window, from the hourly rollups (``billing.sla``);
- ``credit``: the SLA credit the invoice carries (``billing.invoicing.lease_credit``),
  with the repair-time objective's credit (``credit.repair``; ``credit.amount`` is the
  two together); None when nothing is billed or there is no credit base;
- ``usage`` (asked for with ``usage=True``): a usage-billed lease's month so far: the
  quantity, amount, running 95th percentile and projection (``billing.running``);
- ``impact`` (asked for with ``impact=True``): the training impact of the elapsed part of
  the window (``billing.impact.window_impact``);
- ``lines``: the lease's lines of the month as its invoice carries them (rent, network
  fee, usage, SLA credit); ``to_date``: the rent, fee and usage lines of the window cut at
  ``as_of``, by the same rules. ``charged_to_date``, ``credit_amount`` and
  ``projected_total`` are what the portal's month header shows.

``current_months(leases, instant=...)`` reads the month in progress of many leases (a
tenant's overview, the fleet) in a bounded number of queries, whatever their number:
terms, assignments, acceptances, the SLA rollups and the usage leases' traffic samples,
one query each.

The window's arithmetic has one home (``billing.invoicing.windows.billed_window``), which
the invoice builder calls itself: this module sits above invoicing, since the credit is
the invoice's own. The terms in force at one instant have one home too,
``LeaseTerms.objects.in_force`` (``leases.selectors.terms_in_force``); the versions in
force over the window are the segments' terms."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from billing import impact, invoicing, metering, running, sla
from billing.choices import LineKind
from billing.invoicing import USAGE_KINDS, ComputedLine, LeaseCredit, LeaseFacts, Segment, Window
from gpulease_verify.compliance import Availability, Compliance, SlaSummary
from gpulease_verify.periods import Period
from leases.models import Lease, LeaseTerms

ZERO = Decimal("0.00")


@dataclass(frozen=True)
class LeaseMonth:
    """A lease's billing month as every face shows it (module docstring)."""

    lease: Lease
    window: Window
    segments: tuple[Segment, ...]
    summary: SlaSummary  # over the billed window; empty when nothing is billed
    credit: LeaseCredit | None
    as_of: datetime  # the instant the month was read at (a month in progress)
    usage: running.MonthToDate | None = None
    impact: dict[str, Any] | None = None
    lines: tuple[ComputedLine, ...] = ()  # the invoice's lines of this lease and month
    to_date: tuple[ComputedLine, ...] = ()  # rent, fee, usage of the window so far

    @property
    def charged_to_date(self) -> Decimal:
        """Rent, network fee and usage of the billed window so far, before credit and tax."""
        return sum((line.amount for line in self.to_date), ZERO)

    @property
    def credit_amount(self) -> Decimal:
        """The SLA credit the invoice carries (negative), 0.00 when none is due."""
        return sum((line.amount for line in self.lines if line.kind == LineKind.SLA_CREDIT), ZERO)

    @property
    def projected_total(self) -> Decimal | None:
        """The month's lines at the rate so far, credit included, before tax: the invoice's
        rent and fee lines (the whole window), its usage projected by
        ``running.projection``, and its credit. None while a usage lease has billed no
        usage second yet."""
        fixed = sum((line.amount for line in self.lines if line.kind not in USAGE_KINDS), ZERO)
        usage_so_far = [line for line in self.to_date if line.kind in USAGE_KINDS]
        full = sum(
            segment.seconds
            for segment in self.segments
            if segment.terms.billing_mode in running.USAGE_MODES
        )
        if not full:
            return fixed
        usage = running.projection(
            sum((line.amount for line in usage_so_far), ZERO),
            sum(int(line.detail["segment_seconds"]) for line in usage_so_far),
            full,
            self.as_of < self.window.month_end,
        )
        return None if usage is None else fixed + usage

    @property
    def period(self) -> str:
        return self.window.period

    @property
    def billed(self) -> bool:
        return self.window.billed

    @property
    def terms(self) -> tuple[LeaseTerms, ...]:
        """The terms versions in force during the billed window, in order."""
        return tuple(segment.terms for segment in self.segments)

    @property
    def throughput(self) -> Compliance:
        return self.summary.throughput

    @property
    def availability(self) -> Availability:
        return self.summary.availability

    @property
    def elapsed(self) -> tuple[datetime, datetime] | None:
        """The window cut at ``as_of``: the part of a month in progress that has passed."""
        return self.window.so_far(self.as_of)


def _read(
    lease: Lease,
    period: str,
    facts: LeaseFacts,
    instant: datetime,
    *,
    usage: bool,
    with_impact: bool,
) -> LeaseMonth:
    window = invoicing.billed_window(
        lease=lease,
        period=period,
        timeline=facts.timeline,
        acceptance=(facts.needs_acceptance, facts.accepted),
    )
    parts: tuple[Segment, ...] = ()
    credit = None
    lines: list[ComputedLine] = []
    to_date: list[ComputedLine] = []
    summary = SlaSummary(lease.pk, window.month_start, window.month_start, {}, Availability())
    if window.start is not None and window.end is not None:
        parts = tuple(
            invoicing.segments(timeline=facts.timeline, start=window.start, end=window.end)
        )
        lines, credit = invoicing.month_lines(lease=lease, period=period, facts=facts)
        to_date = (
            lines
            if instant >= window.end
            else invoicing.month_lines(lease=lease, period=period, facts=facts, until=instant)[0]
        )
        to_date = [line for line in to_date if line.kind != LineKind.SLA_CREDIT]
        # The credit's summary is over the same window; without a credit, evaluate it.
        read = facts.summaries.get((window.start, window.end))
        summary = (
            credit.summary
            if credit is not None
            else read or sla.evaluate(lease=lease, start=window.start, end=window.end)
        )
    month_usage = (
        running.month_to_date(lease=lease, period=period, instant=instant, window=window)
        if usage
        else None
    )
    elapsed = window.so_far(instant)
    training = (
        impact.window_impact(lease=lease, start=elapsed[0], end=elapsed[1])
        if with_impact and elapsed is not None
        else None
    )
    return LeaseMonth(
        lease,
        window,
        parts,
        summary,
        credit,
        instant,
        month_usage,
        training,
        tuple(lines),
        tuple(to_date),
    )


def lease_month(
    lease: Lease,
    period: str,
    *,
    instant: datetime | None = None,
    usage: bool = False,
    impact: bool = False,
) -> LeaseMonth:
    """The lease's month ``period`` (YYYY-MM of the tenant's calendar) as of ``instant``
    (now by default). ``usage`` and ``impact`` add the month-to-date usage and the training
    impact, which cost queries of their own."""
    return _read(
        lease,
        period,
        LeaseFacts.of(lease),
        instant or timezone.now(),
        usage=usage,
        with_impact=impact,
    )


def lease_months(
    lease: Lease, periods: list[str], *, instant: datetime | None = None
) -> dict[str, LeaseMonth]:
    """``lease_month`` of each of ``periods`` (a history page), reading the lease's terms,
    assignments and acceptance once."""
    facts = LeaseFacts.of(lease)
    at = instant or timezone.now()
    return {
        period: _read(lease, period, facts, at, usage=False, with_impact=False)
        for period in periods
    }


def current_months(
    leases: list[Lease], *, instant: datetime, rollups: QuerySet | None = None
) -> dict[int, LeaseMonth]:
    """Each lease's month in progress (its tenant's calendar) at ``instant``, keyed by
    lease id, as ``lease_month`` reads it, in at most five queries whatever the number of
    leases (module docstring; ``leases`` with their tenant selected). ``rollups`` narrows
    the SLA rows read (a page passes the user's visible ones)."""
    every = LeaseFacts.many(leases)
    periods = {
        lease.pk: str(Period.containing(instant, lease.tenant.time_zone)) for lease in leases
    }
    windows: dict[int, tuple[datetime, datetime]] = {}
    usage: dict[int, tuple[datetime, datetime]] = {}
    for lease in leases:
        facts = every[lease.pk]
        window = invoicing.billed_window(
            lease=lease,
            period=periods[lease.pk],
            timeline=facts.timeline,
            acceptance=(facts.needs_acceptance, facts.accepted),
        )
        if window.start is None or window.end is None:
            continue
        windows[lease.pk] = (window.start, window.end)
        if any(
            segment.terms.billing_mode in running.USAGE_MODES
            for segment in invoicing.segments(
                timeline=facts.timeline, start=window.start, end=window.end
            )
        ):
            usage[lease.pk] = (window.start, window.end)
    summaries = sla.evaluate_many(windows=windows, rollups=rollups)
    samples = metering.samples_of(usage)
    return {
        lease.pk: _read(
            lease,
            periods[lease.pk],
            replace(
                every[lease.pk],
                samples=samples.get(lease.pk),
                summaries=({windows[lease.pk]: summaries[lease.pk]} if lease.pk in windows else {}),
            ),
            instant,
            usage=False,
            with_impact=False,
        )
        for lease in leases
    }
