"""gpulease as a Prometheus exporter: a collector that reads the database when scraped.

Every per-lease figure comes from the one home it already has; nothing is recomputed here:

- status, contracted bandwidth, the worst pair's latest measurement, month-to-date
  compliance and availability, open incidents: ``portal.provider_selectors.fleet_overview``
  (the provider's fleet page: ``portal.selectors.lease_overview``, nine queries; the
  status is ``portal.lease_status.state``, the month header's rule);
- credit at risk: the credit of the lease month in progress (``billing.lease_month``:
  the credit the samples so far would earn, the same figure the invoice will carry). That is
  several queries per lease, so its answer is kept in Django's cache for
  ``METRICS_CREDIT_CACHE_S`` seconds (300), and a scrape computes at most
  ``METRICS_CREDIT_REFRESH_PER_SCRAPE`` (25) missing ones: a large fleet's figures fill in
  over a few scrapes instead of one scrape timing out. Set ``CACHE_URL`` so that every
  gunicorn worker shares the one cached figure.

- the running figures of a usage-billed lease (per GB, 95th percentile): the billed
  quantity, 95th and slots above it so far, the amount so far and the projection, as the
  API's usage endpoint computes them (``billing.running``); ingest stores them per lease
  and month (``RunningFigure``), and a scrape reads every lease's in one query. Each
  lease shows its newest month of this month and the one before (the tenant's calendar):
  last month's final figures stay until this month's first sample is ingested.

Everything else is a fixed number of grouped queries whatever the number of leases, sites
and nodes (``tests/monitoring/test_metrics.py`` pins it): the seconds since each kind's last
good sample, the site figures (queue depth, runs by state, missed runs, ingest lag) and
the fabric counters, re-exported under node_exporter's names and labels
(``node_infiniband_*``, ``device``, ``port``, plus ``node`` naming the host, since one
gpulease target speaks for many nodes).

Bandwidths are in bytes per second, Prometheus's base unit (``promtool check metrics``):
a contract of 100 Gbps reads 1.25e10; multiply by 8 for bits.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models import Min, Subquery
from prometheus_client import (
    CollectorRegistry,
    GCCollector,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    StateSetMetricFamily,
)
from prometheus_client.registry import Collector

from benchmarks import selectors as run_selectors
from benchmarks.choices import Pattern, RunState
from billing import selectors as billing_selectors
from billing.ingest import pending_runs
from billing.lease_month import lease_month
from billing.models import RunningFigure
from gpulease_verify import health, sweep
from gpulease_verify.periods import Period
from incidents import selectors as incident_selectors
from incidents.choices import FabricIncidentKind
from leases import selectors as lease_selectors
from leases.choices import LeaseStatus, ProbeKind
from leases.models import Lease
from monitoring import worker_metrics
from portal import lease_status, provider_selectors, selectors

LEASE_LABELS = ["lease", "tenant", "site", "fabric"]
STATUSES = list(lease_status.STATUSES)  # the badges' rule (portal.lease_status)
RUNS_WINDOW = timedelta(hours=1)
# A kind that never had a good sample reads +Inf: "no data" fires without a special case.
NEVER = math.inf
# gpulease's normalised counter figures (gpulease_verify.parsers.counters) under
# node_exporter's infiniband collector names; bytes are already octets (IB data x 4).
NORMALISED_COUNTERS = {
    "rx_bytes": (
        "node_infiniband_port_data_received_bytes",
        "Number of data octets received on all links",
    ),
    "tx_bytes": (
        "node_infiniband_port_data_transmitted_bytes",
        "Number of data octets transmitted on all links",
    ),
    "rx_errors": (
        "node_infiniband_port_errors_received",
        "Number of packets containing an error that were received on this port",
    ),
    "link_downed": (
        "node_infiniband_link_downed",
        "Number of times the link failed to recover from an error state and went down",
    ),
}
# Raw InfiniBand sysfs counters, read as node_exporter reads them: those a counters sweep
# keeps of a port's whole list (gpulease_verify.sweep.KEPT_COUNTERS, the same names).
RAW_IB_COUNTERS = {
    "symbol_error": (
        "node_infiniband_symbol_error",
        "Number of minor link errors detected on one or more physical lanes",
    ),
    "link_error_recovery": (
        "node_infiniband_link_error_recovery",
        "Number of times the link successfully recovered from an error state",
    ),
    "port_rcv_packets": (
        "node_infiniband_port_packets_received",
        "Number of packets received on all VLs by this port (including errors)",
    ),
    "port_xmit_packets": (
        "node_infiniband_port_packets_transmitted",
        "Number of packets transmitted on all VLs from this port (including errors)",
    ),
    "port_xmit_discards": (
        "node_infiniband_port_discards_transmitted",
        "Number of outbound packets discarded by the port because the port is down or congested",
    ),
    "port_rcv_remote_physical_errors": (
        "node_infiniband_port_receive_remote_physical_errors",
        "Number of packets marked with the EBP delimiter received on the port",
    ),
    "excessive_buffer_overrun_errors": (
        "node_infiniband_excessive_buffer_overrun_errors",
        "Number of times that OverrunErrors consecutive flow control update periods "
        "occurred, each having at least one overrun error",
    ),
    "local_link_integrity_errors": (
        "node_infiniband_local_link_integrity_errors",
        "Number of times that the count of local physical errors exceeded the threshold",
    ),
}


class ProviderReader:
    """The collector reads across every tenant, as the provider's fleet page does for
    staff: a stand-in user that ``visible_to`` lets see every row (the scrape itself is
    guarded by monitoring.views)."""

    is_authenticated = True
    is_active = True
    is_staff = True
    pk = None


PROVIDER = ProviderReader()


def _ratio(percent: Decimal) -> float:
    return float(percent) / 100


def _lease_places(leases: list[Lease], instant: datetime) -> dict[int, tuple[str, str]]:
    """lease id -> (site codes, fabric names) of the nodes assigned to it now, one query."""
    sites: dict[int, set[str]] = defaultdict(set)
    fabrics: dict[int, set[str]] = defaultdict(set)
    for lease_id, site, fabric in (
        lease_selectors.assignments_in_force_for_provider(at=instant)
        .filter(lease_id__in=[lease.pk for lease in leases])
        .values_list(
            "lease_id", "node__leaf_switch__fabric__site__code", "node__leaf_switch__fabric__name"
        )
        .distinct()
    ):
        sites[lease_id].add(site)
        fabrics[lease_id].add(fabric)
    return {
        lease.pk: (",".join(sorted(sites[lease.pk])), ",".join(sorted(fabrics[lease.pk])))
        for lease in leases
    }


def _last_good(leases: list[Lease]) -> dict[int, dict[str, datetime | None]]:
    """lease id -> kind -> when its newest good sample (a run that ended ``ok``) finished:
    one query, a subquery per kind that walks the (lease, kind, -slot) index."""
    kinds = list(ProbeKind.values)
    annotations = {
        f"last_{kind}": Subquery(run_selectors.newest_ok_finish(kind=kind)) for kind in kinds
    }
    rows = lease_selectors.leases_among(ids=[lease.pk for lease in leases]).annotate(**annotations)
    return {
        row["pk"]: {kind: row[f"last_{kind}"] for kind in kinds}
        for row in rows.values("pk", *annotations)
    }


def _fabric_incidents(leases: list[Lease]) -> dict[int, dict[str, int]]:
    """lease id -> {"integrity": disputed samples awaiting a person, <rule>: open telemetry
    incidents of that rule}: one query."""
    found: dict[int, dict[str, int]] = defaultdict(dict)
    rows = incident_selectors.open_fabric_counts(leases=leases)
    for row in rows:
        if row["kind"] == FabricIncidentKind.INTEGRITY:
            found[row["lease_id"]][row["kind"]] = (
                found[row["lease_id"]].get(row["kind"], 0) + row["violations"]
            )
        else:
            found[row["lease_id"]][row["pattern"]] = row["count"]
    return found


def _credit_key(lease: Lease, period: str) -> str:
    return f"monitoring:credit-at-risk:{lease.pk}:{period}"


def credits_at_risk(leases: list[tuple[Lease, str]]) -> dict[int, Decimal | None]:
    """lease id -> the SLA credit (CNY, a positive figure) the month's samples so far would
    earn: the lease month's (``billing.lease_month``), cached for METRICS_CREDIT_CACHE_S seconds;
    None when nothing is billed (before acceptance, or no credit base).

    The cached figures come in one cache read. Of the leases without one, at most
    METRICS_CREDIT_REFRESH_PER_SCRAPE are computed in this scrape (each costs a few
    queries); the others are left out of it and computed by the next scrapes, so no
    scrape of a large fleet outlasts Prometheus's scrape timeout."""
    keys = {lease.pk: _credit_key(lease, period) for lease, period in leases}
    cached = cache.get_many(list(keys.values()))
    budget = settings.METRICS_CREDIT_REFRESH_PER_SCRAPE
    found: dict[int, Decimal | None] = {}
    for lease, period in leases:
        text = cached.get(keys[lease.pk])
        if text is None:
            if budget <= 0:
                continue
            budget -= 1
            credit = lease_month(lease, period).credit
            text = "" if credit is None else str(abs(credit.amount))
            cache.set(keys[lease.pk], text, settings.METRICS_CREDIT_CACHE_S)
        found[lease.pk] = Decimal(text) if text else None
    return found


def _running_figures(rows: list[selectors.LeaseRow]) -> dict[int, RunningFigure]:
    """lease id -> its stored running figures (``billing.running.refresh_running``) of the
    newest of its current month and the one before, by the tenant's calendar: one query."""
    current = {row.lease.pk: row.period for row in rows}
    periods = set(current.values())
    periods |= {str(Period.parse(period).previous) for period in periods}
    newest: dict[int, RunningFigure] = {}
    for figure in billing_selectors.running_figures_of(
        lease_ids=list(current), periods=sorted(periods)
    ):
        if figure.period <= current[figure.lease_id]:
            newest[figure.lease_id] = figure  # the later month wins
    return newest


def _lease_metrics(instant: datetime) -> Iterator[Metric]:
    rows = provider_selectors.fleet_overview(user=PROVIDER, instant=instant)
    leases = [row.lease for row in rows]
    places = _lease_places(leases, instant) if leases else {}
    last_good = _last_good(leases) if leases else {}

    status = StateSetMetricFamily(
        "gpulease_lease_status",
        "The lease's light on the provider's fleet page: meeting, degraded, breached or no_data",
        labels=LEASE_LABELS,
    )
    contracted = GaugeMetricFamily(
        "gpulease_lease_contracted_bandwidth_bytes_per_second",
        "Contracted inter-node bandwidth per node in the terms in force (Gbps x 10^9 / 8)",
        labels=LEASE_LABELS,
    )
    threshold = GaugeMetricFamily(
        "gpulease_lease_sla_threshold_ratio",
        "Share of the contracted bandwidth a throughput sample must reach to pass",
        labels=LEASE_LABELS,
    )
    worst = GaugeMetricFamily(
        "gpulease_lease_worst_pair_bandwidth_bytes_per_second",
        "Latest measured throughput of the lease's worst node pair (its newest measurement "
        "when no pair was measured recently)",
        labels=LEASE_LABELS,
    )
    compliance = GaugeMetricFamily(
        "gpulease_lease_compliance_ratio",
        "Month-to-date compliance credits are computed on: the lower of throughput "
        "compliance and availability",
        labels=LEASE_LABELS,
    )
    throughput = GaugeMetricFamily(
        "gpulease_lease_throughput_compliance_ratio",
        "Month-to-date throughput compliance: passed / (passed + failed + unknown)",
        labels=LEASE_LABELS,
    )
    availability = GaugeMetricFamily(
        "gpulease_lease_availability_ratio",
        "Month-to-date availability: share of minutes in which every node's links were up",
        labels=LEASE_LABELS,
    )
    incidents = GaugeMetricFamily(
        "gpulease_lease_open_incidents",
        "Incidents open now",
        labels=LEASE_LABELS,
    )
    credit = GaugeMetricFamily(
        "gpulease_lease_credit_at_risk_cny",
        "SLA credit in CNY that this month's samples so far would earn (billing.lease_month)",
        labels=LEASE_LABELS,
    )
    age = GaugeMetricFamily(
        "gpulease_lease_last_good_sample_age_seconds",
        "Seconds since the newest probe run of this kind that ended ok (+Inf: never)",
        labels=[*LEASE_LABELS, "kind"],
    )
    disputes = GaugeMetricFamily(
        "gpulease_witness_disagreements",
        "Samples the switch-side witness contradicted, in measurement-integrity incidents "
        "still waiting for a person (benchmarks.witness)",
        labels=LEASE_LABELS,
    )
    findings = GaugeMetricFamily(
        "gpulease_lease_fabric_health_findings",
        "Fabric health rules firing now on the lease's ports (open telemetry incidents)",
        labels=[*LEASE_LABELS, "rule"],
    )
    running_labels = [*LEASE_LABELS, "period"]
    usage = GaugeMetricFamily(
        "gpulease_lease_usage_month_to_date",
        "Usage-billed leases: the invoice line's quantity so far, in its unit (GB sent, or "
        "the 95th percentile so far in Mbps) (billing.running)",
        labels=[*running_labels, "unit"],
    )
    p95 = GaugeMetricFamily(
        "gpulease_lease_usage_p95_bytes_per_second",
        "95th percentile billing: the 95th percentile of the month's 5-minute samples so far "
        "(bit/s / 8)",
        labels=running_labels,
    )
    above = GaugeMetricFamily(
        "gpulease_lease_slots_above_p95",
        "95th percentile billing: the month's samples so far above the billed 95th (the top "
        "5 % left out)",
        labels=running_labels,
    )
    so_far = GaugeMetricFamily(
        "gpulease_lease_amount_month_to_date_cny",
        "Usage-billed leases: the month's usage lines so far in CNY, before tax and credit",
        labels=running_labels,
    )
    projected = GaugeMetricFamily(
        "gpulease_lease_amount_projected_cny",
        "Usage-billed leases: the month's usage lines at the rate so far in CNY (the invoice's "
        "figure once the month is over)",
        labels=running_labels,
    )
    running_age = GaugeMetricFamily(
        "gpulease_lease_running_age_seconds",
        "Seconds since ingest last stored the lease's running figures",
        labels=running_labels,
    )
    figures = _running_figures(rows) if rows else {}
    fabric_open = _fabric_incidents(leases) if leases else {}
    at_risk = credits_at_risk([(row.lease, row.period) for row in rows])
    for row in rows:
        lease = row.lease
        site, fabric = places.get(lease.pk, ("", ""))
        labels = [lease.reference, lease.tenant.slug, site, fabric]
        status.add_metric(labels, {name: row.status == name for name in STATUSES})
        if row.contracted_bps is not None:
            contracted.add_metric(labels, row.contracted_bps / 8)
        if row.terms is not None:
            threshold.add_metric(labels, _ratio(row.terms.sla_threshold_percent))
        if row.latest_bps is not None:
            worst.add_metric(labels, row.latest_bps / 8)
        for family, percent in (
            (compliance, row.summary.credit_compliance_percent),
            (throughput, row.summary.throughput.percent),
            (availability, row.summary.availability.percent),
        ):
            if percent is not None:
                family.add_metric(labels, _ratio(percent))
        incidents.add_metric(labels, row.open_incidents)
        open_fabric = dict(fabric_open.get(lease.pk, {}))
        disputes.add_metric(labels, open_fabric.pop(FabricIncidentKind.INTEGRITY, 0))
        # Every rule, firing or not: a series that reads 0 says the rule is watched.
        for rule in sorted(health.RULES):
            findings.add_metric([*labels, rule], open_fabric.get(rule, 0))
        amount = at_risk.get(lease.pk)
        if amount is not None:
            credit.add_metric(labels, float(amount))
        for kind, finished_at in last_good.get(lease.pk, {}).items():
            seconds = NEVER if finished_at is None else (instant - finished_at).total_seconds()
            age.add_metric([*labels, kind], max(seconds, 0.0))
        figure = figures.get(lease.pk)
        if figure is not None:
            month = [*labels, figure.period]
            usage.add_metric([*month, figure.unit], float(figure.quantity))
            if figure.p95_bps is not None:
                p95.add_metric(month, float(figure.p95_bps) / 8)
            if figure.slots_above_p95 is not None:
                above.add_metric(month, figure.slots_above_p95)
            so_far.add_metric(month, float(figure.amount))
            if figure.projected_amount is not None:
                projected.add_metric(month, float(figure.projected_amount))
            running_age.add_metric(month, max((instant - figure.computed_at).total_seconds(), 0.0))
    yield from (
        status,
        contracted,
        threshold,
        worst,
        compliance,
        throughput,
        availability,
        incidents,
        credit,
        age,
        disputes,
        findings,
        usage,
        p95,
        above,
        so_far,
        projected,
        running_age,
    )


def _site_metrics(instant: datetime) -> Iterator[Metric]:
    sites = lease_selectors.site_codes()
    queue = GaugeMetricFamily(
        "gpulease_site_queue_depth",
        "Probe runs scheduled and waiting for a worker",
        labels=["site"],
    )
    runs = GaugeMetricFamily(
        "gpulease_site_probe_runs",
        "Probe runs whose slot fell in the last hour, by state",
        labels=["site", "state"],
    )
    missed = CounterMetricFamily(
        "gpulease_site_missed_runs",
        "Probe runs marked missed (their slot passed without a start), counted as they are "
        "marked: archiving a month does not lower it",
        labels=["site"],
    )
    lag = GaugeMetricFamily(
        "gpulease_site_ingest_lag_seconds",
        "Seconds the oldest finished run not yet ingested into rollups has waited (0: none)",
        labels=["site"],
    )
    by_state: dict[int, dict[str, int]] = defaultdict(dict)
    for site_id, state, count in run_selectors.run_counts_by_site_and_state(
        since=instant - RUNS_WINDOW, until=instant
    ):
        by_state[site_id][state] = count
    queued = run_selectors.queued_counts_by_site()
    missed_count = run_selectors.missed_totals_by_site()
    pending = pending_runs().filter(finished_at__lte=instant)
    oldest = dict(pending.values_list("site_id").annotate(oldest=Min("finished_at")).order_by())
    for site_id, code in sorted(sites.items(), key=lambda item: item[1]):
        queue.add_metric([code], queued.get(site_id, 0))
        for state in RunState.values:
            runs.add_metric([code, state], by_state[site_id].get(state, 0))
        missed.add_metric([code], missed_count.get(site_id, 0))
        waiting = oldest.get(site_id)
        lag.add_metric([code], 0.0 if waiting is None else (instant - waiting).total_seconds())
    yield from (queue, runs, missed, lag)


def _port_key(port: dict[str, Any], netdevs: dict[str, tuple[str, str]]) -> tuple[str, str] | None:
    """(device, port) as node_exporter labels them: an InfiniBand sysfs port names both;
    an Ethernet (RoCE) interface is found among the node's NIC ports by its netdev."""
    if port.get("device") and port.get("port") is not None:
        return str(port["device"]), str(port["port"])
    return None if port.get("interface") is None else netdevs.get(str(port["interface"]))


def _fabric_metrics(instant: datetime) -> Iterator[Metric]:
    """The newest counter reading of every node leased now, from its lease's newest
    counters sweep: one query for the sweeps (a subquery per lease walks its (kind, -slot)
    index), one for the nodes held, one for their NIC ports."""
    held = lease_selectors.assignments_in_force_for_provider(at=instant).filter(
        lease__status=LeaseStatus.ACTIVE
    )
    newest = run_selectors.newest_counter_sweep(instant=instant)
    sweeps = dict(
        lease_selectors.leases_among(ids=held.values("lease_id"))
        .annotate(parsed=Subquery(newest))
        .values_list("pk", "parsed")
    )
    nodes: dict[int, tuple[str, dict[str, Any]]] = {}
    for node_id, hostname, lease_id in held.values_list("node_id", "node__hostname", "lease_id"):
        read = {
            result.node: result
            for result in sweep.node_results(
                pattern=Pattern.SWEEP,
                target=sweep.ALL,
                state="",
                verdict="",
                parsed=sweeps.get(lease_id),
            )
        }
        if hostname in read and read[hostname].ok:
            nodes[node_id] = (hostname, dict(read[hostname].parsed))
    ports: dict[int, dict[str, tuple[str, str]]] = defaultdict(dict)
    rates: list[tuple[str, str, str, int]] = []
    for node_id, hostname, device, number, netdev, gbps in lease_selectors.nic_ports_of_nodes(
        node_ids=list(nodes)
    ).values_list("node_id", "node__hostname", "device", "port_number", "netdev", "rate_gbps"):
        if netdev:
            ports[node_id][netdev] = (device, str(number))
        rates.append((hostname, device, str(number), gbps))
    labels = ["node", "device", "port"]
    families = {
        name: CounterMetricFamily(metric, doc, labels=labels)
        for name, (metric, doc) in {**NORMALISED_COUNTERS, **RAW_IB_COUNTERS}.items()
    }
    seen: set[tuple[str, str, str, str]] = set()
    for node_id, (hostname, parsed) in sorted(nodes.items(), key=lambda item: item[1][0]):
        for port in parsed.get("ports") or []:
            if not isinstance(port, dict):
                continue
            key = _port_key(port, ports[node_id])
            if key is None:
                continue
            raw = port.get("raw")
            for name, family in families.items():
                value = port.get(name) if name in NORMALISED_COUNTERS else (raw or {}).get(name)
                if isinstance(value, int) and value >= 0 and (hostname, *key, name) not in seen:
                    seen.add((hostname, *key, name))
                    family.add_metric([hostname, *key], value)
    port_rate = GaugeMetricFamily(
        "node_infiniband_rate_bytes_per_second",
        "Maximum signal transfer rate (the port's contracted rate) in bytes per second",
        labels=labels,
    )
    for hostname, device, port_label, port_gbps in sorted(rates):
        port_rate.add_metric([hostname, device, port_label], port_gbps * 10**9 / 8)
    yield from families.values()
    yield port_rate


class GpuleaseCollector(Collector):
    """Reads the database at scrape time; the queries are fixed in number."""

    def collect(self) -> Iterator[Metric]:
        instant = selectors.now()
        yield from _lease_metrics(instant)
        yield from _site_metrics(instant)
        yield from _fabric_metrics(instant)


def registry() -> CollectorRegistry:
    """What one scrape of /metrics answers. Under gunicorn with PROMETHEUS_MULTIPROC_DIR set,
    what every worker process recorded (requests, their process figures, and Celery tasks
    where the worker shares the directory) is merged by prometheus_client.multiprocess; the
    process, platform and gc collectors are left out, since they would describe only the
    worker that answers (monitoring.worker_metrics). Otherwise this process's own."""
    from prometheus_client import REGISTRY

    reg = CollectorRegistry(auto_describe=False)
    if worker_metrics.enabled():
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(reg)
    else:
        for collector in list(REGISTRY._collector_to_names):  # type: ignore[attr-defined]
            if not isinstance(collector, ProcessCollector | PlatformCollector | GCCollector):
                reg.register(collector)
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
        GCCollector(registry=reg)
    reg.register(GpuleaseCollector())
    return reg


def exposition() -> bytes:
    worker_metrics.write(force=True)  # this worker's figures as of now, the others' as written
    return generate_latest(registry())
