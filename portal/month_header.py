"""The month header at the top of every lease page (the lease, its SLA history, an
incident, its evidence), the tenant overview, the invoices list and the fleet: the
status (meeting, degraded, breached, no data) with its reason and the open incidents, the
charges so far, the projected month total and the SLA credit so far.

The status is ``portal.lease_status.state``, the rule the overview's and the fleet's row
badges show too. Every figure comes from the lease month (``billing.lease_month``), the
result the invoice is built from: the credit is the invoice's SLA credit line, the
projection is the invoice's own lines of the lease with usage projected at the rate so
far (``LeaseMonth.projected_total``), and the month to date is the same lines over the
billed window cut at now (``LeaseMonth.charged_to_date``). The overview, the invoices list
and the fleet sum the rows of ``selectors.lease_overview`` (a fixed number of queries);
a lease page adds three queries to the lease month it reads anyway."""

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from billing.lease_month import LeaseMonth, lease_month
from gpulease_verify.periods import Period
from incidents import selectors as incident_selectors
from leases.choices import LeaseStatus
from leases.models import Lease
from portal import lease_status, selectors
from portal.lease_status import ORDER, billed
from portal.selectors import LeaseRow

ZERO = Decimal("0.00")


@dataclass(frozen=True)
class MonthHeader:
    status: str
    reason: str
    periods: tuple[str, ...]  # the months shown (one, unless tenants' calendars differ)
    open_incidents: int
    incidents_url: str
    to_date: Decimal  # rent, fee and usage so far, before credit and tax
    projected: Decimal | None  # the month's lines at the rate so far, credit included
    credit: Decimal  # the SLA credit so far (negative), 0.00 when none is due
    leases: int = 1
    counts: dict[str, int] = field(default_factory=dict)  # leases per state (several)

    @property
    def period(self) -> str:
        return ", ".join(self.periods)

    @property
    def count_rows(self) -> list[tuple[str, int]]:
        return [(status, self.counts.get(status, 0)) for status in ORDER]


def in_progress(month: LeaseMonth) -> bool:
    """Whether the month is the one in progress at the instant it was read (its tenant's
    calendar): only then does what holds now weigh in its status."""
    return str(Period.containing(month.as_of, month.lease.tenant.time_zone)) == month.period


def for_lease(
    month: LeaseMonth,
    *,
    now: lease_status.Now | None,
    open_incidents: int,
    incidents_url: str,
) -> MonthHeader:
    status, reason = lease_status.state(month, now)
    owed = billed(month)
    return MonthHeader(
        status=status,
        reason=reason,
        periods=(month.period,),
        open_incidents=open_incidents,
        incidents_url=incidents_url,
        to_date=month.charged_to_date if owed else ZERO,
        projected=month.projected_total if owed else ZERO,
        credit=month.credit_amount if owed else ZERO,
    )


def counted(month: LeaseMonth) -> bool:
    """A lease in a header of several: in service now, or billed this month (a lease that
    ended mid-month still owes it); drafts and long-ended leases are left out."""
    return month.lease.status == LeaseStatus.ACTIVE or billed(month)


def for_rows(rows: Iterable[LeaseRow], *, incidents_url: str | None = None) -> MonthHeader | None:
    """The sums over several leases' months and the count of leases per status (each the
    row's own, as its badge shows it); the status is the worst of theirs, the reason names
    how many share it and the first such lease's own reason. Without ``incidents_url``
    the link goes to the first lease with an open incident. None when no lease counts."""
    shown = sorted((row for row in rows if counted(row.month)), key=lambda r: r.lease.reference)
    if not shown:
        return None
    counts = Counter(row.status for row in shown)
    worst = next(status for status in ORDER if counts[status])
    first = next(row for row in shown if row.status == worst)
    share = ngettext(
        "%(count)s of %(total)s lease", "%(count)s of %(total)s leases", len(shown)
    ) % {"count": counts[worst], "total": len(shown)}
    if incidents_url is None:
        with_open = next((row for row in shown if row.open_incidents), None)
        incidents_url = (
            reverse("portal:lease", args=[with_open.lease.pk]) + "#incidents"
            if with_open is not None
            else ""
        )
    months = [row.month for row in shown]
    projections = [month.projected_total for month in months]
    return MonthHeader(
        status=worst,
        reason=_("%(share)s; %(lease)s: %(reason)s")
        % {"share": share, "lease": first.lease.reference, "reason": first.reason},
        periods=tuple(sorted({month.period for month in months})),
        open_incidents=sum(row.open_incidents for row in shown),
        incidents_url=incidents_url,
        to_date=sum((month.charged_to_date for month in months), ZERO),
        projected=(
            None
            if any(value is None for value in projections)
            else sum((value for value in projections if value is not None), ZERO)
        ),
        credit=sum((month.credit_amount for month in months), ZERO),
        leases=len(shown),
        counts=dict(counts),
    )


def lease_header(*, user, month: LeaseMonth) -> MonthHeader:  # type: ignore[no-untyped-def]
    """A lease page's header: the month the page shows, its open incidents (linked to the
    lease page's incident list) and, for the month in progress, what holds now
    (``selectors.lease_now``). One query, three for the month in progress."""
    lease = month.lease
    kinds = list(
        incident_selectors.open_for(user).filter(lease=lease).values_list("kind", flat=True)
    )
    now = (
        selectors.lease_now(user=user, lease=lease, instant=month.as_of, open_kinds=kinds)
        if in_progress(month)
        else None
    )
    url = reverse("portal:lease", args=[lease.pk]) + "#incidents"
    return for_lease(month, now=now, open_incidents=len(kinds), incidents_url=url)


def leases_header(
    *, user, instant: datetime, incidents_url: str | None = None
) -> MonthHeader | None:  # type: ignore[no-untyped-def]
    """The header over every lease the user sees (a tenant's pages without rows of their
    own, such as the invoices list): ``selectors.lease_overview``'s rows summed."""
    return for_rows(
        selectors.lease_overview(user=user, instant=instant), incidents_url=incidents_url
    )


def current_header(
    *, user, lease: Lease, instant: datetime, month: LeaseMonth | None = None
) -> MonthHeader:  # type: ignore[no-untyped-def]
    """A lease page that shows no month of its own (an incident, a piece of evidence): the
    month in progress in the tenant's calendar (``month``, when the page read it already)."""
    if month is None:
        period = selectors.current_period(lease.tenant.time_zone, instant)
        month = lease_month(lease, period, instant=instant)
    return lease_header(user=user, month=month)
