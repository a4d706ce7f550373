"""A lease's status: the one rule behind every badge (the month header on the lease pages,
the overview's and the fleet's rows, the fleet's metric), so that no two places on one
screen can disagree about a lease.

The status is the month's, from the lease month (``billing.lease_month``, the result the
invoice is built from), over its billed window so far:

- no data: nothing is billed (not accepted yet, or outside the lease), or the window
  holds no evidence (no throughput sample, no link-check minute);
- breached: a credit is due, or the compliance (the lower of throughput compliance and
  availability, as credits use it) is below the SLA level: the top credit tier's
  threshold of the terms in force at the window's end;
- degraded: at or above the SLA level, but minutes were degraded or some sample or
  minute failed (compliance below 100 %);
- meeting: otherwise.

For the month in progress, what holds now (``Now``) is weighed in too, as the reason says:

- a lease not in service (draft, ended, cancelled) is no data, never green;
- an SLA incident (a probe kind's K violations in a row) open now: breached;
- another incident open now (fabric health, a disputed measurement, a metering gap):
  at least degraded;
- meeting, but nothing measured within ``STALE_CADENCES`` throughput cadences: no data,
  since nothing recent says the lease meets its contract."""

from dataclasses import dataclass
from decimal import Decimal

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from billing.invoicing import BILLED_STATUSES
from billing.lease_month import LeaseMonth
from gpulease_verify.money import format_cny
from gpulease_verify.units import plain
from leases.choices import LeaseStatus
from leases.contract_rules import credit_tiers

MEETING, DEGRADED, BREACHED, NO_DATA = "meeting", "degraded", "breached", "no_data"
# Worst first: the state of several leases is the worst of theirs; a lease that stopped
# reporting needs a look before one that meets its contract.
ORDER = (BREACHED, DEGRADED, NO_DATA, MEETING)
STATUSES = (MEETING, DEGRADED, BREACHED, NO_DATA)
# A measurement is stale when none arrived within this many probe cadences.
STALE_CADENCES = 2
HUNDRED = Decimal(100)


@dataclass(frozen=True)
class Now:
    """What holds at the instant a month in progress is read: the lease's open incidents,
    how many of them are SLA incidents, and whether a throughput measurement arrived
    within ``STALE_CADENCES`` cadences."""

    open_incidents: int
    open_breaches: int
    fresh: bool


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


def _joined(first: str, second: str) -> str:
    # Two sentences: a space between them in English, none in Chinese.
    return _("%(first)s %(second)s") % {"first": first, "second": second}


def month_state(month: LeaseMonth) -> tuple[str, str]:
    """The month's state and its reason from its figures alone (module docstring)."""
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
        return DEGRADED, _joined(text, minutes)
    return (DEGRADED if compliance < HUNDRED else MEETING), text


def state(month: LeaseMonth, now: Now | None = None) -> tuple[str, str]:
    """The lease's status and its reason, in the active language: the month's, and for the
    month in progress (``now`` given) what holds now (module docstring). The one rule every
    badge shows."""
    status, reason = month_state(month)
    if now is None:
        return status, reason
    lease = month.lease
    if lease.status != LeaseStatus.ACTIVE:
        if lease.status not in BILLED_STATUSES:  # the reason says so already
            return status, reason
        return NO_DATA, _joined(
            _("Not in service: the lease is %(status)s.") % {"status": lease.get_status_display()},
            reason,
        )
    if now.open_breaches and status != BREACHED:
        return BREACHED, _joined(
            ngettext(
                "%(count)s SLA incident is open now.",
                "%(count)s SLA incidents are open now.",
                now.open_breaches,
            )
            % {"count": now.open_breaches},
            reason,
        )
    if now.open_incidents and status in (MEETING, NO_DATA):
        return DEGRADED, _joined(
            ngettext(
                "%(count)s incident is open now.",
                "%(count)s incidents are open now.",
                now.open_incidents,
            )
            % {"count": now.open_incidents},
            reason,
        )
    if not now.fresh and status == MEETING:
        return NO_DATA, _joined(
            _("Nothing measured within twice the probe cadence."),
            reason,
        )
    return status, reason
