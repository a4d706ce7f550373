"""Which leases a month bills, and from when: the billing start (acceptance), the billed
window of a lease's month (``billed_window``: the one server-side cut of
``gpulease_verify.window.billed_window``), the leases that overlap the month, and the
segments a billed window is cut into where a terms version takes effect (package
docstring, rules 2 to 4). Every face reads the window through ``billing.lease_month``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from benchmarks import selectors as run_selectors
from billing.invoicing.computed import iso
from gpulease_verify import window as window_rules
from gpulease_verify.calculations import overlap_seconds
from gpulease_verify.periods import Period
from leases.models import Lease, LeaseTerms, Tenant
from leases.selectors import TermsTimeline, leases_overlapping

BILLED_STATUSES = window_rules.BILLED_STATUSES  # active, ended


def billing_start(lease: Lease) -> datetime | None:
    """When the lease's first passing acceptance finished; None while none has passed.

    An acceptance attempt is the set of the lease's runs with trigger ``acceptance`` and
    the same slot (the dispatcher creates them together). Skipped runs are ignored. It
    passes when every other run has finished, none failed, timed out, was unreachable,
    unparsable or missed, every verdict given is "pass" and there is at least one. Billing
    starts at the latest ``finished_at`` of its runs. Attempts are tried in slot order.
    """
    runs = run_selectors.acceptance_rows(lease_id=lease.pk)
    return window_rules.billing_start(runs)


def billing_starts(lease_ids: Iterable[int]) -> dict[int, datetime | None]:
    """``billing_start`` of many leases in one query (a page of leases)."""
    runs: dict[int, list[tuple[datetime, str, str, datetime | None]]] = defaultdict(list)
    ids = list(lease_ids)
    for lease_id, *row in run_selectors.acceptance_rows_of(lease_ids=ids):
        runs[lease_id].append(tuple(row))  # type: ignore[arg-type]
    return {lease_id: window_rules.billing_start(runs[lease_id]) for lease_id in ids}


def requires_acceptance(timeline: Iterable[LeaseTerms]) -> bool:
    """The first terms version decides (acceptance happens once, when the lease goes live)."""
    first = next(iter(timeline), None)
    return bool(first and first.billing_starts_on_acceptance)


NOT_ACCEPTED = "the acceptance the terms require has not passed"
NOT_BILLED = "the lease was not billed in this period"


@dataclass(frozen=True)
class Window:
    """The billed window of a lease's month (package docstring, rules 1 to 4):
    ``[max(month start, lease start, billing start), min(month end, lease end))`` from the
    first instant a terms version is in force. ``start``/``end`` are None when the month
    bills nothing (not accepted yet, or the lease does not reach into it)."""

    period: str
    time_zone: str
    month_start: datetime
    month_end: datetime
    requires_acceptance: bool
    accepted: datetime | None  # billing start; None when not required or not passed
    start: datetime | None
    end: datetime | None

    @property
    def billed(self) -> bool:
        return self.start is not None

    @property
    def awaiting_acceptance(self) -> bool:
        return self.requires_acceptance and self.accepted is None

    @property
    def note(self) -> str:
        """Why nothing is billed (English, as the audit bundle records it); "" if billed."""
        if self.billed:
            return ""
        return NOT_ACCEPTED if self.awaiting_acceptance else NOT_BILLED

    def so_far(self, instant: datetime) -> tuple[datetime, datetime] | None:
        """The window cut at ``instant`` (the elapsed part of a month in progress)."""
        if self.start is None or self.end is None:
            return None
        return self.start, max(self.start, min(self.end, instant))


def billed_window(
    *,
    lease: Lease,
    period: str,
    timeline: Iterable[LeaseTerms] | None = None,
    acceptance: tuple[bool, datetime | None] | None = None,
) -> Window:
    """The billed window of ``lease`` in ``period`` (the tenant's calendar month).
    ``timeline`` and ``acceptance`` (required, billing start) save their queries when the
    caller already read them (``timeline``: the lease's versions, in any order, at least
    those in force up to the end of the stretch the caller reads)."""
    zone = lease.tenant.time_zone
    month_start, month_end = Period.parse(period).bounds(zone)
    versions = list(timeline if timeline is not None else TermsTimeline.for_lease(lease))
    if acceptance is None:
        needs = requires_acceptance(versions)
        acceptance = (needs, billing_start(lease) if needs else None)
    needs, accepted = acceptance
    cut = window_rules.billed_window(
        period=(month_start, month_end),
        lease=(lease.starts_at, lease.ends_at),
        effective_from=[version.effective_from for version in versions],
        requires_acceptance=needs,
        accepted=accepted if needs else None,
    )
    start, end = cut if cut is not None else (None, None)
    return Window(
        period, zone, month_start, month_end, needs, accepted if needs else None, start, end
    )


@dataclass(frozen=True)
class Segment:
    """A stretch of the billed window under one terms version."""

    start: datetime
    end: datetime
    terms: LeaseTerms

    @property
    def seconds(self) -> int:
        return overlap_seconds(
            start=self.start, end=self.end, period_start=self.start, period_end=self.end
        )

    def describe(self) -> dict[str, Any]:
        return {
            "terms_version": self.terms.version,
            "segment_start": iso(self.start),
            "segment_end": iso(self.end),
            "segment_seconds": self.seconds,
        }


def segments(*, timeline: TermsTimeline, start: datetime, end: datetime) -> list[Segment]:
    """[start, end) cut at every terms version that takes effect inside it."""
    pieces = window_rules.cut(
        start=start, end=end, effective_from=[t.effective_from for t in timeline]
    )
    in_force = [(lo, hi, timeline.at(lo)) for lo, hi in pieces]
    return [Segment(start=lo, end=hi, terms=terms) for lo, hi, terms in in_force if terms]


def billed_leases(*, tenant: Tenant, period: str) -> list[Lease]:
    """The tenant's active or ended leases that overlap the month, by reference."""
    start, end = Period.parse(period).bounds(tenant.time_zone)
    return list(
        leases_overlapping(tenant=tenant, statuses=BILLED_STATUSES, start=start, end=end).order_by(
            "reference"
        )
    )


def awaiting_acceptance(*, tenant: Tenant, period: str) -> list[Lease]:
    """The month's billed leases that get no line because the acceptance their terms
    require has not passed yet (callers mention them; the invoice has no place to)."""
    return [
        lease
        for lease in billed_leases(tenant=tenant, period=period)
        if billed_window(lease=lease, period=period).awaiting_acceptance
    ]
