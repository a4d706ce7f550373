"""The portal's reads: every query goes through ``visible_to(user)``; the overview reads
one query per model kind whatever the number of leases."""

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

from django.db.models import OuterRef, Q, Subquery
from django.utils import timezone

from benchmarks.choices import RunState
from benchmarks.models import ProbeRun
from billing import calculations, sla
from billing.calculations import CreditResult
from billing.choices import IncidentState
from billing.models import HourlyRollup, Incident
from billing.reports import billed_window
from leases.choices import ProbeKind
from leases.contract_rules import credit_tiers
from leases.models import Lease, LeaseTerms

MEETING, DEGRADED, BREACHED = "meeting", "degraded", "breached"
CHART_DAYS = 30
HISTORY_MONTHS = 36


def now() -> datetime:
    """The portal's clock (tests pin it)."""
    return timezone.now()


def current_period(zone: str, instant: datetime) -> str:
    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m")


def _credit(terms: LeaseTerms | None, compliance: Decimal | None) -> CreditResult | None:
    if terms is None:
        return None
    return calculations.sla_credit(
        network_fee=terms.network_fee_per_month,
        compliance_percent=compliance,
        tiers=credit_tiers(terms.credit_tiers),
        cap_percent=terms.credit_cap_percent,
    )


def status_of(*, open_incidents: int, incidents_this_month: int, credit: CreditResult | None):
    """breached: an incident is open now; degraded: this month's compliance already earns
    a credit, or an incident was opened this month; meeting: otherwise."""
    if open_incidents:
        return BREACHED
    if incidents_this_month or (credit is not None and credit.percent_applied > 0):
        return DEGRADED
    return MEETING


@dataclass(frozen=True)
class LeaseRow:
    lease: Lease
    period: str
    terms: LeaseTerms | None
    latest_bps: int | None
    latest_at: datetime | None
    summary: sla.SlaSummary
    credit: CreditResult | None
    open_incidents: int
    incidents_this_month: int
    status: str

    @property
    def contracted_bps(self) -> int | None:
        return int(self.terms.contracted_bandwidth_gbps * 10**9) if self.terms else None


def _latest_throughput(field: str) -> Subquery:
    runs = ProbeRun.objects.filter(
        lease=OuterRef("pk"),
        kind=ProbeKind.THROUGHPUT,
        state=RunState.OK,
        measured_bps__isnull=False,
    ).order_by("-finished_at", "-pk")
    return Subquery(runs.values(field)[:1])


def lease_overview(*, user, instant: datetime) -> list[LeaseRow]:  # type: ignore[no-untyped-def]
    """Per visible lease: status light, contracted against latest measured bandwidth, and
    this month's compliance so far. Four queries: leases, terms, rollups, incidents."""
    leases = list(
        Lease.objects.visible_to(user)
        .select_related("tenant")
        .annotate(
            latest_bps=_latest_throughput("measured_bps"),
            latest_at=_latest_throughput("finished_at"),
        )
        .order_by("reference")
    )
    if not leases:
        return []
    ids = [lease.pk for lease in leases]
    terms: dict[int, LeaseTerms] = {}
    for version in (
        LeaseTerms.objects.visible_to(user)
        .filter(lease_id__in=ids, effective_from__lte=instant)
        .order_by("lease_id", "effective_from")
    ):
        terms[version.lease_id] = version
    periods = {lease.pk: current_period(lease.tenant.time_zone, instant) for lease in leases}
    months = {
        lease.pk: calculations.month_bounds(periods[lease.pk], lease.tenant.time_zone)
        for lease in leases
    }
    windows = {
        lease.pk: (start, max(start, min(instant, end)))
        for lease in leases
        for start, end in [billed_window(lease, *months[lease.pk])]
    }
    summaries = sla.evaluate_many(windows=windows, rollups=HourlyRollup.objects.visible_to(user))
    earliest = min(start for start, _ in months.values())
    open_count: dict[int, int] = defaultdict(int)
    month_count: dict[int, int] = defaultdict(int)
    for lease_id, state, opened_at in (
        Incident.objects.visible_to(user)
        .filter(lease_id__in=ids)
        .filter(Q(state=IncidentState.OPEN) | Q(opened_at__gte=earliest))
        .values_list("lease_id", "state", "opened_at")
    ):
        if state == IncidentState.OPEN:
            open_count[lease_id] += 1
        if months[lease_id][0] <= opened_at < months[lease_id][1]:
            month_count[lease_id] += 1
    rows = []
    for lease in leases:
        summary = summaries[lease.pk]
        credit = _credit(terms.get(lease.pk), summary.credit_compliance_percent)
        rows.append(
            LeaseRow(
                lease=lease,
                period=periods[lease.pk],
                terms=terms.get(lease.pk),
                latest_bps=lease.latest_bps,  # type: ignore[attr-defined]
                latest_at=lease.latest_at,  # type: ignore[attr-defined]
                summary=summary,
                credit=credit,
                open_incidents=open_count[lease.pk],
                incidents_this_month=month_count[lease.pk],
                status=status_of(
                    open_incidents=open_count[lease.pk],
                    incidents_this_month=month_count[lease.pk],
                    credit=credit,
                ),
            )
        )
    return rows


def terms_at(versions: list[LeaseTerms], instant: datetime) -> LeaseTerms | None:
    """The version in force at ``instant`` from versions ordered by effective_from."""
    current = None
    for version in versions:
        if version.effective_from <= instant:
            current = version
    return current


def throughput_series(
    *, user, lease: Lease, instant: datetime, days: int = CHART_DAYS
) -> dict[str, list[tuple[datetime, int]]]:  # type: ignore[no-untyped-def]
    """Measured throughput per node pair (target) over the last ``days`` days."""
    series: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for target, slot_at, bps in (
        ProbeRun.objects.visible_to(user)
        .filter(
            lease=lease,
            kind=ProbeKind.THROUGHPUT,
            state=RunState.OK,
            measured_bps__isnull=False,
            slot_at__gte=instant - timedelta(days=days),
            slot_at__lt=instant,
        )
        .order_by("target", "slot_at")
        .values_list("target", "slot_at", "measured_bps")
    ):
        series[target].append((slot_at, bps))
    return dict(series)


@dataclass(frozen=True)
class MonthRow:
    period: str
    summary: sla.SlaSummary
    credit: CreditResult | None


def _months(first: datetime, last: datetime, zone: str) -> list[str]:
    local_first, local_last = first.astimezone(ZoneInfo(zone)), last.astimezone(ZoneInfo(zone))
    year, month = local_first.year, local_first.month
    periods = []
    while (year, month) <= (local_last.year, local_last.month):
        periods.append(f"{year:04d}-{month:02d}")
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return periods[-HISTORY_MONTHS:]


def sla_history(*, user, lease: Lease, instant: datetime) -> list[MonthRow]:  # type: ignore[no-untyped-def]
    """Month by month (newest first) from the lease's start to now or its end."""
    last = min(instant, lease.ends_at) if lease.ends_at else instant
    if last <= lease.starts_at:
        return []
    zone = lease.tenant.time_zone
    versions = list(
        LeaseTerms.objects.visible_to(user).filter(lease=lease).order_by("effective_from")
    )
    rows = []
    for period in reversed(_months(lease.starts_at, last, zone)):
        start, end = billed_window(lease, *calculations.month_bounds(period, zone))
        end = min(end, instant)
        summary = sla.evaluate(lease=lease, start=start, end=max(start, end))
        terms = terms_at(versions, max(start, end - timedelta(microseconds=1)))
        rows.append(MonthRow(period, summary, _credit(terms, summary.credit_compliance_percent)))
    return rows
