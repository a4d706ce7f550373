"""The provider pages' reads: the whole fleet, the fabrics, the network cost share and the
open incidents, across every tenant. The views call these for provider staff only; every
tenant-owned model is still read through ``visible_to(user)``.

The fleet reuses ``selectors.lease_overview`` and only sorts it; the cost share reuses
``billing.invoicing`` for the lines and ``gpulease_verify.calculations.network_cost_share`` for
the rule, so that this page and the invoices can never disagree."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import (
    Avg,
    Count,
    Exists,
    IntegerField,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce

from benchmarks import selectors as run_selectors
from benchmarks.choices import RunState, Verdict
from billing import invoicing
from billing.choices import LineKind
from gpulease_verify.calculations import network_cost_share
from gpulease_verify.periods import Period, PeriodError
from incidents import selectors as incident_selectors
from leases import selectors as lease_selectors
from leases.choices import LeaseStatus, ProbeKind
from leases.models import Fabric, Lease, Switch
from portal import selectors
from portal.lease_status import BREACHED, DEGRADED, MEETING, NO_DATA
from portal.selectors import LeaseRow

PROVIDER_ZONE = "Asia/Shanghai"  # the provider's own calendar: the default cost-share month
FABRIC_DAYS = 7
FAILURE_FLAG_PERCENT = Decimal("10")
ZERO = Decimal("0.00")
HUNDRED = Decimal(100)

# --------------------------------------------------------------------------------------
# Fleet
# --------------------------------------------------------------------------------------

# A lease that stopped reporting needs a look before one that meets its contract.
STATUS_RANK = {BREACHED: 0, DEGRADED: 1, NO_DATA: 2, MEETING: 3}


def worst_first(row: LeaseRow) -> tuple:  # type: ignore[type-arg]
    """Sort key: breached, degraded, no recent measurement, meeting; within a status the
    lowest compliance this month first, leases without any figure yet after those that have
    one."""
    compliance = row.summary.credit_compliance_percent
    return (
        STATUS_RANK.get(row.status, len(STATUS_RANK)),
        compliance is None,
        compliance if compliance is not None else Decimal(0),
        row.lease.reference,
    )


def fleet_overview(*, user, instant: datetime) -> list[LeaseRow]:  # type: ignore[no-untyped-def]
    """Every active lease the user sees (all of them for provider staff), worst first."""
    rows = selectors.lease_overview(user=user, instant=instant)
    return sorted((row for row in rows if row.lease.status == LeaseStatus.ACTIVE), key=worst_first)


# --------------------------------------------------------------------------------------
# Fabric health
# --------------------------------------------------------------------------------------


def _ratio_percent(part: Decimal | int, whole: Decimal | int) -> Decimal:
    return (Decimal(part) * HUNDRED / Decimal(whole)).quantize(
        Decimal("0.1"), rounding=ROUND_HALF_UP
    )


@dataclass(frozen=True)
class LeafHealth:
    switch: Switch
    nodes: int
    leased: int
    passed: int
    failed: int
    mean_bps: Decimal | None
    mean_contracted_gbps: Decimal | None

    @property
    def judged(self) -> int:
        return self.passed + self.failed

    @property
    def failure_percent(self) -> Decimal | None:
        return _ratio_percent(self.failed, self.judged) if self.judged else None

    @property
    def flagged(self) -> bool:
        """More than FAILURE_FLAG_PERCENT of the judged runs through this leaf failed."""
        return self.failure_percent is not None and self.failure_percent > FAILURE_FLAG_PERCENT

    @property
    def mean_contracted_bps(self) -> Decimal | None:
        return None if self.mean_contracted_gbps is None else self.mean_contracted_gbps * 10**9

    @property
    def mean_percent_of_contracted(self) -> Decimal | None:
        if self.mean_bps is None or not self.mean_contracted_gbps:
            return None
        return _ratio_percent(self.mean_bps, self.mean_contracted_gbps * 10**9)


@dataclass(frozen=True)
class FabricHealth:
    fabric: Fabric
    spines: int
    leaves: list[LeafHealth]

    @property
    def oversubscribed(self) -> bool:
        return self.fabric.oversubscription > 1

    @property
    def failing_leaves(self) -> int:
        return sum(1 for leaf in self.leaves if leaf.failed)

    @property
    def uplink_suspect(self) -> bool:
        """Failures under several leaves of an oversubscribed fabric point at the shared
        leaf-spine uplinks rather than at one node or cable."""
        return self.oversubscribed and self.failing_leaves >= 2


def _runs_through_leaf(user, since: datetime, until: datetime) -> QuerySet:  # type: ignore[no-untyped-def]
    """Judged throughput runs of the window with at least one node under the outer leaf.
    A run between two nodes of the same leaf counts once for that leaf."""
    return (
        run_selectors.runs_visible_to(user)
        .filter(
            kind=ProbeKind.THROUGHPUT,
            state=RunState.OK,
            slot_at__gte=since,
            slot_at__lt=until,
        )
        .filter(
            Exists(
                run_selectors.run_node_links().filter(
                    proberun_id=OuterRef("pk"), node__leaf_switch_id=OuterRef(OuterRef("pk"))
                )
            )
        )
        .order_by()
    )


def _aggregate(runs: QuerySet, **aggregate) -> Subquery:  # type: ignore[no-untyped-def]
    """One aggregate of the outer leaf's runs as a scalar subquery (the runs are all of one
    kind, so grouping by kind gives exactly one row)."""
    ((name, expression),) = aggregate.items()
    return Subquery(runs.values("kind").annotate(**{name: expression}).values(name)[:1])


def fabric_health(*, user, instant: datetime, days: int = FABRIC_DAYS) -> list[FabricHealth]:  # type: ignore[no-untyped-def]
    """Per fabric and leaf switch: nodes, nodes leased now, and the throughput runs of the
    last ``days`` days whose nodes hang off the leaf (passed, failed, mean measured against
    mean contracted). Three queries whatever the number of fabrics, leaves and runs."""
    fabrics = lease_selectors.fabrics_with_spine_counts()
    if not fabrics:
        return []
    in_force = (
        Q(nodes__assignments__void=False)
        & Q(nodes__assignments__lease__status=LeaseStatus.ACTIVE)
        & Q(nodes__assignments__assigned_from__lte=instant)
        & (
            Q(nodes__assignments__assigned_until__isnull=True)
            | Q(nodes__assignments__assigned_until__gt=instant)
        )
    )
    counts = {
        leaf.pk: leaf
        for leaf in lease_selectors.leaf_switches()
        .annotate(
            node_count=Count("nodes", distinct=True),
            leased_count=Count("nodes", filter=in_force, distinct=True),
        )
        .order_by("fabric_id", "name")
    }
    runs = _runs_through_leaf(user, instant - timedelta(days=days), instant)
    zero = Value(0, output_field=IntegerField())
    metrics = {
        row["pk"]: row
        for row in lease_selectors.leaf_switches()
        .annotate(
            passed=Coalesce(_aggregate(runs, n=Count("pk", filter=Q(verdict=Verdict.PASS))), zero),
            failed=Coalesce(_aggregate(runs, n=Count("pk", filter=Q(verdict=Verdict.FAIL))), zero),
            mean_bps=_aggregate(
                runs.filter(verdict__in=[Verdict.PASS, Verdict.FAIL], measured_bps__isnull=False),
                n=Avg("measured_bps"),
            ),
            mean_contracted=_aggregate(
                runs.filter(verdict__in=[Verdict.PASS, Verdict.FAIL], measured_bps__isnull=False),
                n=Avg("terms__contracted_bandwidth_gbps"),
            ),
        )
        .values("pk", "passed", "failed", "mean_bps", "mean_contracted")
    }
    leaves: dict[int, list[LeafHealth]] = {fabric.pk: [] for fabric in fabrics}
    for leaf in counts.values():
        row = metrics[leaf.pk]
        leaves[leaf.fabric_id].append(
            LeafHealth(
                switch=leaf,
                nodes=leaf.node_count,  # type: ignore[attr-defined]
                leased=leaf.leased_count,  # type: ignore[attr-defined]
                passed=row["passed"],
                failed=row["failed"],
                mean_bps=None if row["mean_bps"] is None else Decimal(str(row["mean_bps"])),
                mean_contracted_gbps=(
                    None if row["mean_contracted"] is None else Decimal(row["mean_contracted"])
                ),
            )
        )
    return [
        FabricHealth(fabric=fabric, spines=fabric.spines, leaves=leaves[fabric.pk])  # type: ignore[attr-defined]
        for fabric in fabrics
    ]


# --------------------------------------------------------------------------------------
# Network cost share
# --------------------------------------------------------------------------------------


def default_period(instant: datetime) -> str:
    return selectors.current_period(PROVIDER_ZONE, instant)


def valid_period(period: str) -> bool:
    """YYYY-MM with a month 01-12 that every time zone can place (billing's own parser)."""
    try:
        Period.parse(period)
    except PeriodError:
        return False
    return True


def _percent(share: Decimal | None) -> Decimal | None:
    return None if share is None else (share * HUNDRED).quantize(Decimal("0.01"))


@dataclass(frozen=True)
class CostShareRow:
    lease: Lease
    node_rent: Decimal
    network_fee: Decimal
    usage: Decimal
    share: (
        Decimal | None
    )  # a fraction, as gpulease_verify.calculations.network_cost_share returns it

    @property
    def share_percent(self) -> Decimal | None:
        return _percent(self.share)


@dataclass(frozen=True)
class CostShare:
    period: str
    rows: list[CostShareRow]
    node_rent: Decimal
    network_fee: Decimal
    usage: Decimal
    share: Decimal | None

    @property
    def share_percent(self) -> Decimal | None:
        return _percent(self.share)


def cost_share(*, user, period: str) -> CostShare:  # type: ignore[no-untyped-def]
    """The network cost share of every billed lease for the month (each in its tenant's
    calendar, as its invoice is), and of all of them together: the lease lines an invoice
    drafted now would carry, before credits, tax and adjustments."""
    rows = []
    for tenant in lease_selectors.tenants_visible_to(user).order_by("name", "pk"):
        for lease in invoicing.billed_leases(tenant=tenant, period=period):
            lease.tenant = tenant
            amounts = {LineKind.NODE_RENT: ZERO, LineKind.NETWORK_FEE: ZERO, "usage": ZERO}
            for line in invoicing.lease_lines(lease=lease, period=period, zone=tenant.time_zone):
                key = "usage" if line.kind in invoicing.USAGE_KINDS else line.kind
                if key in amounts:
                    amounts[key] += line.amount
            rent, fee, usage = (
                amounts[LineKind.NODE_RENT],
                amounts[LineKind.NETWORK_FEE],
                amounts["usage"],
            )
            rows.append(
                CostShareRow(
                    lease=lease,
                    node_rent=rent,
                    network_fee=fee,
                    usage=usage,
                    share=network_cost_share(node_rent=rent, network_fee=fee, usage=usage),
                )
            )
    rent = sum((row.node_rent for row in rows), ZERO)
    fee = sum((row.network_fee for row in rows), ZERO)
    usage = sum((row.usage for row in rows), ZERO)
    return CostShare(
        period=period,
        rows=rows,
        node_rent=rent,
        network_fee=fee,
        usage=usage,
        share=network_cost_share(node_rent=rent, network_fee=fee, usage=usage),
    )


# --------------------------------------------------------------------------------------
# Open incidents
# --------------------------------------------------------------------------------------


def open_incidents(*, user) -> QuerySet:  # type: ignore[no-untyped-def]
    """Every open incident the user sees, oldest first, with its lease, tenant and runs."""
    return (
        incident_selectors.open_for(user)
        .select_related("lease__tenant")
        .prefetch_related(
            Prefetch("runs", queryset=run_selectors.runs_for_provider().only("pk").order_by("pk"))
        )
        .order_by("opened_at", "pk")
    )
