"""The month a lease's pages show: ``?period=YYYY-MM`` in the tenant's calendar, the
current month without it; its neighbours for the previous/next links; and the 400 page
for a month that cannot be shown (never a 500)."""

from dataclasses import dataclass
from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from gpulease_verify.periods import Period
from leases.models import Lease
from portal import selectors


@dataclass(frozen=True)
class Month:
    period: str
    start: datetime  # UTC, the month's bounds in the tenant's zone
    end: datetime
    previous: str | None  # None: the month before does not overlap the lease
    next: str | None  # None: the month after has not begun
    chosen: bool  # asked for with ?period=
    before_lease: bool  # the month ended before the lease started: nothing to report
    after_lease: bool  # the month began after the lease ended

    @property
    def outside_lease(self) -> bool:
        return self.before_lease or self.after_lease


def month_of(request: HttpRequest, lease: Lease, instant: datetime) -> Month:
    """The page's month, or selectors.PeriodRefused with the reason."""
    zone = lease.tenant.time_zone
    text = request.GET.get("period", "")
    period = selectors.chosen_period(text, zone, instant)
    start, end = period.bounds(zone)
    previous, following = period.previous, period.next
    return Month(
        period=str(period),
        start=start,
        end=end,
        previous=str(previous) if previous.end(zone) > lease.starts_at else None,
        next=str(following) if following <= Period.containing(instant, zone) else None,
        chosen=bool(text),
        before_lease=end <= lease.starts_at,
        after_lease=lease.ends_at is not None and start >= lease.ends_at,
    )


def refused(request: HttpRequest, lease: Lease, refusal: selectors.PeriodRefused) -> HttpResponse:
    """A 400 page naming the reason, with a way back to the current month."""
    return render(
        request,
        "portal/period_refused.html",
        {"lease": lease, "reason": str(refusal), "asked": request.GET.get("period", "")[:20]},
        status=400,
    )
