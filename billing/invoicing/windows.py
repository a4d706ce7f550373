"""Which leases a month bills, and from when: the billing start (acceptance), the
leases that overlap the month, and the segments a billed window is cut into where a
terms version takes effect (package docstring, rules 2 to 4)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q

from benchmarks.choices import RunState, Trigger
from benchmarks.models import ProbeRun
from billing.invoicing.computed import iso
from gpulease_verify import window as billed_window
from gpulease_verify.calculations import overlap_seconds
from gpulease_verify.periods import Period
from leases.models import Lease, LeaseTerms, Tenant
from leases.selectors import TermsTimeline

BILLED_STATUSES = billed_window.BILLED_STATUSES  # active, ended


def billing_start(lease: Lease) -> datetime | None:
    """When the lease's first passing acceptance finished; None while none has passed.

    An acceptance attempt is the set of the lease's runs with trigger ``acceptance`` and
    the same slot (the dispatcher creates them together). Skipped runs are ignored. It
    passes when every other run has finished, none failed, timed out, was unreachable,
    unparsable or missed, every verdict given is "pass" and there is at least one. Billing
    starts at the latest ``finished_at`` of its runs. Attempts are tried in slot order.
    """
    runs = (
        ProbeRun.objects.filter(lease_id=lease.pk, trigger=Trigger.ACCEPTANCE)
        .exclude(state=RunState.SKIPPED)
        .order_by("slot_at", "pk")
        .values_list("slot_at", "state", "verdict", "finished_at")
    )
    return billed_window.billing_start(runs)


def requires_acceptance(timeline: TermsTimeline) -> bool:
    """The first terms version decides (acceptance happens once, when the lease goes live)."""
    first = next(iter(timeline), None)
    return bool(first and first.billing_starts_on_acceptance)


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
    pieces = billed_window.cut(
        start=start, end=end, effective_from=[t.effective_from for t in timeline]
    )
    in_force = [(lo, hi, timeline.at(lo)) for lo, hi in pieces]
    return [Segment(start=lo, end=hi, terms=terms) for lo, hi, terms in in_force if terms]


def billed_leases(*, tenant: Tenant, period: str) -> list[Lease]:
    """The tenant's active or ended leases that overlap the month, by reference."""
    start, end = Period.parse(period).bounds(tenant.time_zone)
    return list(
        Lease.objects.filter(tenant=tenant, status__in=BILLED_STATUSES, starts_at__lt=end)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=start))
        .order_by("reference")
    )


def awaiting_acceptance(*, tenant: Tenant, period: str) -> list[Lease]:
    """The month's billed leases that get no line because the acceptance their terms
    require has not passed yet (callers mention them; the invoice has no place to)."""
    return [
        lease
        for lease in billed_leases(tenant=tenant, period=period)
        if requires_acceptance(TermsTimeline.for_lease(lease)) and billing_start(lease) is None
    ]
