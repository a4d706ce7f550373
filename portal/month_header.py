"""The month header at the top of the lease page, the tenant overview and the fleet: the
month's state (meeting, degraded, breached, no data) with its reason and the open
incidents, the charges so far, the projected month total and the SLA credit so far.

Every figure comes from the lease month (``billing.lease_month``), the result the invoice
is built from: the credit is the invoice's SLA credit line, the projection is the
invoice's own lines of the lease with usage projected at the rate so far
(``LeaseMonth.projected_total``), and the month to date is the same lines over the billed
window cut at now (``LeaseMonth.charged_to_date``). The overview and the fleet read all
their leases with ``billing.lease_month.current_months``: a fixed number of queries.

The state of a month, from its billed window so far:

- no data: nothing is billed (not accepted yet, or outside the lease), or the window
  holds no evidence (no throughput sample, no link-check minute);
- breached: a credit is due, or the compliance (the lower of throughput compliance and
  availability, as credits use it) is below the SLA level: the top credit tier's
  threshold of the terms in force at the window's end;
- degraded: at or above the SLA level, but minutes were degraded or some sample or
  minute failed (compliance below 100 %);
- meeting: otherwise."""

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from billing.invoicing import BILLED_STATUSES
from billing.lease_month import LeaseMonth, current_months
from billing.models import HourlyRollup
from gpulease_verify.money import format_cny
from gpulease_verify.units import plain
from incidents import selectors as incident_selectors
from leases.choices import LeaseStatus
from leases.contract_rules import credit_tiers
from leases.models import Lease

MEETING, DEGRADED, BREACHED, NO_DATA = "meeting", "degraded", "breached", "no_data"
# Worst first: the state of several leases is the worst of theirs.
ORDER = (BREACHED, DEGRADED, NO_DATA, MEETING)
ZERO = Decimal("0.00")
HUNDRED = Decimal(100)


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


def sla_level(month: LeaseMonth) -> Decimal | None:
    """The compliance at or above which no credit is due: the top tier's threshold of the
    terms in force at the window's end (those the credit applies)."""
    terms = month.credit.terms if month.credit is not None else None
    if terms is None and month.terms:
        terms = month.terms[-1]
    tiers = credit_tiers(terms.credit_tiers) if terms is not None else []
    return max((below for below, _credit in tiers), default=None)


def billed(month: LeaseMonth) -> bool:
    """Whether an invoice bills the month: a draft or cancelled lease never is
    (``invoicing.BILLED_STATUSES``), whatever its dates."""
    return month.billed and month.lease.status in BILLED_STATUSES


def state(month: LeaseMonth) -> tuple[str, str]:
    """The month's state and its reason, in the active language (module docstring)."""
    if month.lease.status not in BILLED_STATUSES:
        return NO_DATA, _("Not billed: the lease is %(status)s.") % {
            "status": month.lease.get_status_display()
        }
    if not month.billed:
        if month.window.awaiting_acceptance:
            return NO_DATA, _("Not billed yet: the acceptance test has not passed.")
        return NO_DATA, _("Nothing is billed in %(period)s.") % {"period": month.period}
    compliance = month.summary.credit_compliance_percent
    if compliance is None:
        return NO_DATA, _("No measurement in this month's billed window yet.")
    availability = month.availability.percent
    level = sla_level(month)
    words = {
        "figure": plain(compliance),
        "level": plain(level if level is not None else HUNDRED),
        "what": (
            _("Availability")
            if availability is not None and availability == compliance
            else _("Throughput compliance")
        ),
    }
    credit = month.credit_amount
    if credit < 0 or (level is not None and compliance < level):
        if credit < 0:
            return BREACHED, _(
                "%(what)s %(figure)s %% < %(level)s %% SLA: a credit of %(credit)s is due."
            ) % {**words, "credit": format_cny(-credit)}
        return BREACHED, _("%(what)s %(figure)s %% < %(level)s %% SLA.") % words
    degraded = month.availability.degraded_minutes
    if compliance < HUNDRED:
        text = _("%(what)s %(figure)s %% ≥ %(level)s %% SLA, below 100 %%.") % words
    else:
        text = _("%(what)s %(figure)s %% ≥ %(level)s %% SLA.") % words
    if degraded:
        minutes = ngettext(
            "%(count)s degraded minute this month.",
            "%(count)s degraded minutes this month.",
            degraded,
        ) % {"count": degraded}
        # Two sentences: a space between them in English, none in Chinese.
        return DEGRADED, _("%(first)s %(second)s") % {"first": text, "second": minutes}
    return (DEGRADED if compliance < HUNDRED else MEETING), text


def for_lease(month: LeaseMonth, *, open_incidents: int, incidents_url: str) -> MonthHeader:
    status, reason = state(month)
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


def for_leases(
    months: Iterable[LeaseMonth], *, open_incidents: int, incidents_url: str
) -> MonthHeader | None:
    """The sums over several leases' months and the count of leases per state; the state
    is the worst of theirs, the reason names how many share it and the first such lease's
    own reason. None when no lease counts."""
    shown = sorted((month for month in months if counted(month)), key=lambda m: m.lease.reference)
    if not shown:
        return None
    states = {month.lease.pk: state(month) for month in shown}
    counts = Counter(status for status, _reason in states.values())
    worst = next(status for status in ORDER if counts[status])
    first = next(month for month in shown if states[month.lease.pk][0] == worst)
    share = ngettext(
        "%(count)s of %(total)s lease", "%(count)s of %(total)s leases", len(shown)
    ) % {"count": counts[worst], "total": len(shown)}
    projections = [month.projected_total for month in shown]
    return MonthHeader(
        status=worst,
        reason=_("%(share)s; %(lease)s: %(reason)s")
        % {"share": share, "lease": first.lease.reference, "reason": states[first.lease.pk][1]},
        periods=tuple(sorted({month.period for month in shown})),
        open_incidents=open_incidents,
        incidents_url=incidents_url,
        to_date=sum((month.charged_to_date for month in shown), ZERO),
        projected=(
            None
            if any(value is None for value in projections)
            else sum((value for value in projections if value is not None), ZERO)
        ),
        credit=sum((month.credit_amount for month in shown), ZERO),
        leases=len(shown),
        counts=dict(counts),
    )


def lease_header(*, user, month: LeaseMonth) -> MonthHeader:  # type: ignore[no-untyped-def]
    """The lease page's header: its month (the one the page shows) and its open
    incidents, linked to the page's incident list."""
    lease = month.lease
    open_incidents = incident_selectors.open_for(user).filter(lease=lease).count()
    url = reverse("portal:lease", args=[lease.pk]) + "#incidents"
    return for_lease(month, open_incidents=open_incidents, incidents_url=url)


def leases_header(
    *,
    user,
    leases: list[Lease],
    instant: datetime,
    open_incidents: dict[int, int] | None = None,
    incidents_url: str | None = None,
) -> MonthHeader | None:  # type: ignore[no-untyped-def]
    """The header over ``leases`` (their tenant selected): each one's month in progress,
    read together (``current_months``), and their open incidents per lease (counted in one
    query unless the page counted them already, as the overview's rows do). Without
    ``incidents_url`` the link goes to the first lease with an open incident."""
    if not leases:
        return None
    months = current_months(leases, instant=instant, rollups=HourlyRollup.objects.visible_to(user))
    open_by_lease = Counter(open_incidents or {})
    if open_incidents is None:
        open_by_lease = Counter(
            incident_selectors.open_for(user)
            .filter(lease_id__in=[lease.pk for lease in leases])
            .values_list("lease_id", flat=True)
        )
    if incidents_url is None:
        first = next(
            (one for one in sorted(leases, key=lambda x: x.reference) if open_by_lease[one.pk]),
            None,
        )
        incidents_url = (
            reverse("portal:lease", args=[first.pk]) + "#incidents" if first is not None else ""
        )
    return for_leases(
        months.values(),
        open_incidents=sum(open_by_lease.values()),
        incidents_url=incidents_url,
    )
