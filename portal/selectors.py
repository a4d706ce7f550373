"""The portal's reads: every query goes through ``visible_to(user)``; the overview reads
one query per model kind whatever the number of leases."""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.db.models import F, Max, Min, OuterRef, Q, Subquery, Value, Window
from django.db.models.functions import RowNumber, Trunc
from django.utils import timezone
from django.utils.translation import gettext as _

from benchmarks import selectors as run_selectors
from benchmarks.choices import RunState, Verdict
from benchmarks.models import NOT_PASSED
from billing import selectors as billing_selectors
from billing import sla
from billing.choices import InvoiceStatus
from billing.invoicing import LeaseCredit
from billing.invoicing import Window as BilledWindow
from billing.lease_month import LeaseMonth, current_months, lease_months
from billing.models import Invoice
from billing.probe_tax import ProbeTax, probe_tax_of
from common.dbfunctions import EpochHour
from common.instants import WRITE_YEARS
from gpulease_verify import sweep
from gpulease_verify.periods import Period, PeriodError
from incidents import selectors as incident_selectors
from incidents.repair import TimeToRepair, time_to_repair
from leases import selectors as lease_selectors
from leases.choices import LeaseStatus, LinkLayer, ProbeKind
from leases.contract_rules import DEFAULT_PROBE_CADENCE_S
from leases.models import Lease, LeaseTerms
from portal import lease_status
from portal.lease_status import STALE_CADENCES, Now

CHART_DAYS = 30
# The windows a lease page offers (?days=); charts longer than CHART_DAYS bucket by day.
CHART_WINDOWS = (7, 30, 90, 365)
HISTORY_MONTHS = 36


def now() -> datetime:
    """The portal's clock (tests pin it)."""
    return timezone.now()


def current_period(zone: str, instant: datetime) -> str:
    return str(Period.containing(instant, zone))


class PeriodRefused(ValueError):
    """A ?period= the pages cannot show; the message says why, to the user."""


def chosen_period(text: str | None, zone: str, instant: datetime) -> Period:
    """The month a page shows: ``?period=YYYY-MM`` (a month of the tenant's calendar), or
    the current one when absent or empty. PeriodRefused for anything that is not such a
    month, one before 2000 (the API's span, common.instants.WRITE_YEARS) or a month that
    has not begun yet."""
    current = Period.containing(instant, zone)
    if not text:
        return current
    try:
        period = Period.parse(text)
    except PeriodError:
        raise PeriodRefused(
            _("The period must be a month written YYYY-MM, for example %(example)s.")
            % {"example": current}
        ) from None
    first, last = WRITE_YEARS
    if not first <= period.year <= last:
        raise PeriodRefused(
            _("The period must be a month between %(first)s-01 and %(last)s-12.")
            % {"first": first, "last": last}
        )
    if period > current:
        raise PeriodRefused(
            _("%(period)s has not begun yet; the latest month is %(current)s.")
            % {"period": period, "current": current}
        )
    return period


def throughput_cadence(terms: LeaseTerms | None) -> timedelta:
    """How often the terms measure throughput (the default where none are in force)."""
    default = DEFAULT_PROBE_CADENCE_S[ProbeKind.THROUGHPUT]
    seconds = (terms.probe_cadence_s or {}).get(ProbeKind.THROUGHPUT) if terms else None
    return timedelta(seconds=int(seconds or default))


@dataclass(frozen=True)
class Latest:
    """The throughput figure a status shows: the worst node pair's latest measurement
    (``target`` names the pair, client>server), or when no pair was measured recently,
    the lease's newest measurement, marked stale."""

    bps: int
    at: datetime
    target: str
    stale: bool
    pairs: int  # how many pairs the figure is the worst of (0: stale)

    @property
    def pair_label(self) -> str:
        """The pair as a person reads it: "sz-01 → sz-02" (client → server)."""
        return " → ".join(self.target.split(">", 1))


@dataclass(frozen=True)
class LeaseRow:
    """A lease on the overview and the fleet: its month in progress (the lease month the
    header sums), its status and reason (``lease_status.state``, the header's rule) and
    its latest measurement."""

    lease: Lease
    month: LeaseMonth
    terms: LeaseTerms | None
    latest: Latest | None
    open_incidents: int
    status: str
    reason: str

    @property
    def period(self) -> str:
        return self.month.period

    @property
    def summary(self) -> sla.SlaSummary:
        return self.month.summary

    @property
    def contracted_bps(self) -> int | None:
        return int(self.terms.contracted_bandwidth_gbps * 10**9) if self.terms else None

    @property
    def latest_bps(self) -> int | None:
        return self.latest.bps if self.latest else None

    @property
    def latest_at(self) -> datetime | None:
        return self.latest.at if self.latest else None


MEASURED_THROUGHPUT = Q(kind=ProbeKind.THROUGHPUT, state=RunState.OK, measured_bps__isnull=False)


def _latest_throughput(field: str) -> Subquery:
    runs = run_selectors.runs_for_provider().filter(MEASURED_THROUGHPUT, lease=OuterRef("pk"))
    return Subquery(runs.order_by("-slot_at", "-pk").values(field)[:1])


def worst_pairs(
    *, user, leases: list[Lease], terms: dict[int, LeaseTerms], instant: datetime
) -> dict[int, Latest]:  # type: ignore[no-untyped-def]
    """Per lease, the lowest of its node pairs' latest throughput measurements, among the
    pairs measured within STALE_CADENCES cadences before ``instant``: one query for all
    the leases (a window function ranks each pair's runs newest first). A lease none of
    whose pairs was measured that recently is missing from the answer."""
    if not leases:
        return {}
    recent = Q()
    for lease in leases:
        cadence = throughput_cadence(terms.get(lease.pk))
        since = instant - STALE_CADENCES * cadence
        # slot_at bounds the index scan: a run starts by its slot's deadline, a cadence on.
        recent |= Q(lease_id=lease.pk, finished_at__gte=since, slot_at__gte=since - cadence)
    rows = (
        run_selectors.runs_visible_to(user)
        .filter(MEASURED_THROUGHPUT, recent, finished_at__lte=instant)
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=[F("lease_id"), F("target")],
                order_by=[F("finished_at").desc(), F("pk").desc()],
            )
        )
        .filter(rank=1)
        .values_list("lease_id", "target", "measured_bps", "finished_at")
    )
    pairs: dict[int, list[tuple[int, str, datetime]]] = defaultdict(list)
    for lease_id, target, bps, finished_at in rows:
        pairs[lease_id].append((bps, target, finished_at))
    worst = {}
    for lease_id, latest in pairs.items():
        bps, target, finished_at = min(latest, key=lambda row: (row[0], row[1]))
        worst[lease_id] = Latest(bps, finished_at, target, stale=False, pairs=len(latest))
    return worst


def now_of(*, open_kinds: Iterable[str], fresh: bool) -> Now:
    """What holds now for a lease (``lease_status.Now``): its open incidents' kinds (an
    SLA incident is one of a probe kind) and whether a recent measurement arrived."""
    kinds = list(open_kinds)
    return Now(
        open_incidents=len(kinds),
        open_breaches=sum(kind in ProbeKind.values for kind in kinds),
        fresh=fresh,
    )


def lease_now(*, user, lease: Lease, instant: datetime, open_kinds: Iterable[str]) -> Now:  # type: ignore[no-untyped-def]
    """``now_of`` for one lease page: the terms in force (their cadence) and the pairs'
    latest measurements, two queries."""
    terms = lease_selectors.lease_terms_visible_to(user).filter(
        lease=lease, effective_from__lte=instant
    )
    latest = terms.order_by("-effective_from", "-pk").first()
    worst = worst_pairs(
        user=user, leases=[lease], terms={lease.pk: latest} if latest else {}, instant=instant
    )
    return now_of(open_kinds=open_kinds, fresh=lease.pk in worst)


def lease_overview(*, user, instant: datetime) -> list[LeaseRow]:  # type: ignore[no-untyped-def]
    """Per visible lease: its month in progress (``current_months``, the lease month the
    invoice uses, five queries), status light and reason (``lease_status.state``),
    contracted against latest measured bandwidth (the worst pair's, ``worst_pairs``).
    Nine queries whatever the number of leases: leases, terms, the pairs' latest runs,
    open incidents and the lease months'."""
    leases = list(
        lease_selectors.leases_visible_to(user)
        .select_related("tenant")
        .annotate(
            latest_bps=_latest_throughput("measured_bps"),
            latest_at=_latest_throughput("finished_at"),
            latest_target=_latest_throughput("target"),
        )
        .order_by("reference")
    )
    if not leases:
        return []
    ids = [lease.pk for lease in leases]
    terms: dict[int, LeaseTerms] = {}
    for version in (
        lease_selectors.lease_terms_visible_to(user)
        .filter(lease_id__in=ids, effective_from__lte=instant)
        .order_by("lease_id", "effective_from", "pk")
    ):
        terms[version.lease_id] = version
    worst = worst_pairs(user=user, leases=leases, terms=terms, instant=instant)
    months = current_months(
        leases, instant=instant, rollups=billing_selectors.hourly_rollups_visible_to(user)
    )
    open_kinds: dict[int, list[str]] = defaultdict(list)
    for lease_id, kind in (
        incident_selectors.open_for(user).filter(lease_id__in=ids).values_list("lease_id", "kind")
    ):
        open_kinds[lease_id].append(kind)
    rows = []
    for lease in leases:
        latest = worst.get(lease.pk)
        if latest is None and lease.latest_at is not None:  # type: ignore[attr-defined]
            latest = Latest(
                lease.latest_bps,  # type: ignore[attr-defined]
                lease.latest_at,  # type: ignore[attr-defined]
                lease.latest_target,  # type: ignore[attr-defined]
                stale=lease.status == LeaseStatus.ACTIVE,
                pairs=0,
            )
        month = months[lease.pk]
        status, reason = lease_status.state(
            month, now_of(open_kinds=open_kinds[lease.pk], fresh=lease.pk in worst)
        )
        rows.append(
            LeaseRow(
                lease=lease,
                month=month,
                terms=terms.get(lease.pk),
                latest=latest,
                open_incidents=len(open_kinds[lease.pk]),
                status=status,
                reason=reason,
            )
        )
    return rows


def _extremes(
    *, user, lease: Lease, kind: str, instant: datetime, days: float, everyone: str
) -> dict[str, list[tuple[datetime, int]]]:  # type: ignore[no-untyped-def]
    """Lowest and highest measured bandwidth per time bucket, aggregated in the database.

    Up to CHART_DAYS: per target and UTC hour, from the runs (a month of 5-minute runs on
    8 node pairs arrives as 8 x 720 rows). Longer: per day for the whole lease, from the
    hourly rollups (a year arrives as 365 rows), as one series named ``everyone``; days
    are cut in the tenant's time zone."""
    zone = ZoneInfo(lease.tenant.time_zone)
    start = instant - timedelta(days=days)
    if days <= CHART_DAYS:
        rows = (
            run_selectors.runs_visible_to(user)
            .filter(
                lease=lease,
                kind=kind,
                state=RunState.OK,
                measured_bps__isnull=False,
                slot_at__gte=start,
                slot_at__lt=instant,
            )
            .annotate(bucket=EpochHour("slot_at"))
            .values("target", "bucket")
            .annotate(low=Min("measured_bps"), high=Max("measured_bps"))
            .order_by("target", "bucket")
            .values_list("target", "bucket", "low", "high")
        )
        rows = (
            (target, datetime.fromtimestamp(hour, UTC), low, high)
            for target, hour, low, high in rows
        )
    else:
        rows = (
            billing_selectors.hourly_rollups_visible_to(user)
            .filter(lease=lease, kind=kind, hour__gte=start, hour__lt=instant, measured__gt=0)
            .annotate(bucket=Trunc("hour", "day", tzinfo=zone), target=Value(everyone))
            .values("target", "bucket")
            .annotate(low=Min("min_bps"), high=Max("max_bps"))
            .order_by("bucket")
            .values_list("target", "bucket", "low", "high")
        )
    series: dict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for target, bucket, low, high in rows:
        series[target].append((bucket, low))
        if high != low:
            series[target].append((bucket, high))
    return dict(series)


def throughput_series(
    *, user, lease: Lease, instant: datetime, days: float = CHART_DAYS
) -> dict[str, list[tuple[datetime, int]]]:  # type: ignore[no-untyped-def]
    """Measured throughput over the last ``days`` days (``_extremes``): per node pair up
    to a month, all pairs together beyond."""
    return _extremes(
        user=user,
        lease=lease,
        kind=ProbeKind.THROUGHPUT,
        instant=instant,
        days=days,
        everyone=_("all node pairs"),
    )


def nccl_series(
    *, user, lease: Lease, instant: datetime, days: float = CHART_DAYS
) -> dict[str, list[tuple[datetime, int]]]:  # type: ignore[no-untyped-def]
    """NCCL bus bandwidth (all_reduce_perf busbw, bit/s) over the last ``days`` days
    (``_extremes``)."""
    return _extremes(
        user=user,
        lease=lease,
        kind=ProbeKind.COLLECTIVE,
        instant=instant,
        days=days,
        everyone=_("all runs"),
    )


def port_label(*, device: str, port_number: int, netdev: str, link_layer: str) -> str | None:
    """The label the link check gives a port (benchmarks.probes.interpret): device:port
    for InfiniBand, the network interface otherwise; None when it checks no such port."""
    if link_layer == LinkLayer.INFINIBAND:
        return f"{device}:{port_number}"
    return netdev or None


@dataclass(frozen=True)
class HourStates:
    """One row of the link timeline, compactly: the hours (UTC hour starts, epoch seconds)
    in which the lease's link checks spoke, shared by every row, and this row's hours down
    and silent (its node's checks all measured nothing). A year is 8,760 shared hours and
    a handful of exceptions per row, not 8,760 tuples per row."""

    checked: Sequence[int]
    checked_set: frozenset[int]
    down: frozenset[int]
    silent: frozenset[int]

    @property
    def down_hours(self) -> int:
        return len(self.down & self.checked_set)

    @property
    def judged_hours(self) -> int:
        """Hours with a state: down, or checked and not silent."""
        return len(self.checked) - len((self.silent - self.down) & self.checked_set)

    @property
    def hours(self) -> list[tuple[datetime, int, int]]:
        """(hour, up, down), one of them 1, for every hour with a state."""
        return [
            (datetime.fromtimestamp(hour, UTC), 0, 1)
            if hour in self.down
            else (datetime.fromtimestamp(hour, UTC), 1, 0)
            for hour in self.checked
            if hour in self.down or hour not in self.silent
        ]


@dataclass(frozen=True)
class NodeLinks:
    """A node's link state per hour, and the same per port."""

    hostname: str
    states: HourStates
    ports: dict[str, HourStates]

    @property
    def hours(self) -> list[tuple[datetime, int, int]]:
        return self.states.hours


def link_timeline(
    *, user, lease: Lease, instant: datetime, days: float = CHART_DAYS
) -> list[NodeLinks]:  # type: ignore[no-untyped-def]
    """Link state per node and port over the last ``days`` days, in three small queries
    whatever the history (a year of 5-minute checks on 8 nodes is 840,000 runs):

    - the hours in which the lease's link checks judged anything, from the hourly rollups;
    - the checks that did not pass (failed, or measured nothing), through the partial
      index ``run_not_passed``: a healthy lease has almost none;
    - the ports of the lease's nodes, from the inventory.

    An hour is down for a node when one of its checks failed then, and for a port when
    such a check parsed it down; it is up when the lease's checks spoke that hour and the
    node's did not fail, unless every check of the node that hour measured nothing."""
    start = instant - timedelta(days=days)
    checked = [
        hour
        for hour, spoke in billing_selectors.hourly_rollups_visible_to(user)
        .filter(lease=lease, kind=ProbeKind.LINK, hour__gte=start, hour__lt=instant)
        .annotate(epoch=EpochHour("hour"))
        .annotate(spoke=F("passed") + F("failed") + F("excluded") + F("informational"))
        .order_by("hour")
        .values_list("epoch", "spoke")
        if spoke
    ]
    if not checked:
        return []
    checked_set = frozenset(checked)
    down: dict[str, set[int]] = defaultdict(set)
    mute: dict[str, set[int]] = defaultdict(set)
    ports_down: dict[tuple[str, str], set[int]] = defaultdict(set)
    port_names: dict[str, set[str]] = defaultdict(set)
    for pattern, target, slot_at, verdict, state, parsed in (
        run_selectors.runs_visible_to(user)
        .filter(lease=lease, kind=ProbeKind.LINK, slot_at__gte=start, slot_at__lt=instant)
        .filter(NOT_PASSED)
        .values_list("pattern", "target", "slot_at", "verdict", "state", "parsed")
    ):
        hour = int(slot_at.timestamp()) // 3600 * 3600
        for result in sweep.node_results(
            pattern=pattern, target=target, state=state, verdict=verdict, parsed=parsed
        ):
            node = result.node
            if not result.ok:
                mute[node].add(hour)
                continue
            if result.verdict != Verdict.FAIL:
                continue
            down[node].add(hour)
            for port in result.parsed.get("ports", []):
                label = str(port.get("label"))
                port_names[node].add(label)
                if not port.get("up"):
                    ports_down[(node, label)].add(hour)
    hostnames = set(
        lease_selectors.assignments_visible_to(user)
        .filter(lease=lease, assigned_from__lt=instant)
        .exclude(assigned_until__lte=start)
        .values_list("node__hostname", flat=True)
    )
    hostnames |= set(down) | set(mute)
    for hostname, device, number, netdev, layer in (
        lease_selectors.nic_ports_visible_to(user)
        .filter(node__hostname__in=list(hostnames))
        .values_list("node__hostname", "device", "port_number", "netdev", "link_layer")
        .distinct()
    ):
        label = port_label(device=device, port_number=number, netdev=netdev, link_layer=layer)
        if label:
            port_names[hostname].add(label)

    def states(hours_down: set[int], silent: frozenset[int]) -> HourStates:
        return HourStates(checked, checked_set, frozenset(hours_down), silent)

    nodes = []
    for hostname in sorted(hostnames):
        silent = frozenset(mute[hostname] - down[hostname])
        nodes.append(
            NodeLinks(
                hostname,
                states(down[hostname], silent),
                {
                    label: states(ports_down[(hostname, label)], silent)
                    for label in sorted(port_names[hostname])
                },
            )
        )
    return nodes


@dataclass(frozen=True)
class MonthRow:
    period: str
    summary: sla.SlaSummary
    credit: LeaseCredit | None  # SLA plus repair credit: ``amount`` is what the invoice carries
    invoice: Invoice | None = None  # the tenant's invoice of the month, if the user sees one
    repair: TimeToRepair | None = None  # the month's network faults resolved, incidents.repair
    window: BilledWindow | None = None  # the billed window (billing.lease_month); start None: none


def month_invoices(*, user, lease: Lease, periods: list[str]) -> dict[str, Invoice]:  # type: ignore[no-untyped-def]
    """The tenant's invoice per month (one query; a voided one is no longer the month's)."""
    return {
        invoice.period: invoice
        for invoice in billing_selectors.invoices_visible_to(user)
        .filter(tenant_id=lease.tenant_id, period__in=periods)
        .exclude(status=InvoiceStatus.VOID)
        .only("pk", "period", "number", "status")
    }


def incidents_in(queryset, start: datetime, end: datetime):  # type: ignore[no-untyped-def]
    """The incidents of ``queryset`` open at some instant of ``[start, end)``, as the
    month's SLA report counts them (billing.reports.sla_report)."""
    return queryset.filter(opened_at__lt=end).exclude(closed_at__lt=start)


def _months(first: datetime, last: datetime, zone: str) -> list[str]:
    newest = Period.containing(last, zone)
    oldest = max(Period.containing(first, zone), newest.shift(1 - HISTORY_MONTHS))
    return [str(period) for period in Period.span(oldest, newest)]


def sla_history(*, user, lease: Lease, instant: datetime) -> list[MonthRow]:  # type: ignore[no-untyped-def]
    """Month by month (newest first) from the lease's start to now or its end. The user
    reached ``lease`` through ``visible_to``; each month is the lease month
    (``billing.lease_month``): the invoice's billed window (acceptance included), its
    figures and its credit, so this page, the SLA report and the invoice agree."""
    last = min(instant, lease.ends_at) if lease.ends_at else instant
    if last <= lease.starts_at:
        return []
    zone = lease.tenant.time_zone
    periods = list(reversed(_months(lease.starts_at, last, zone)))
    invoices = month_invoices(user=user, lease=lease, periods=periods)
    read = lease_months(lease, periods, instant=instant)
    # one query for every month's time to repair
    resolved = incident_selectors.resolved_repairs(user=user, lease=lease)
    rows = []
    for period in periods:
        month = read[period]
        window = month.window
        start = window.start or window.month_start
        repair = time_to_repair(resolved, start=start, end=window.end or start)
        rows.append(
            MonthRow(period, month.summary, month.credit, invoices.get(period), repair, window)
        )
    return rows


# Probe runs listed on the lease page's probe tax card (the API lists every one).
PROBE_TAX_ROWS = 10


def probe_tax(*, lease: Lease, period: str) -> ProbeTax:
    """The lease's probe tax in ``period`` (billing.probe_tax): its own heavy probes'
    bytes and seconds, kept out of metering. The user reached ``lease`` through
    ``visible_to``. The totals count every run; the first ``PROBE_TAX_ROWS`` are listed."""
    return probe_tax_of(lease=lease, period=period, listed=PROBE_TAX_ROWS)
