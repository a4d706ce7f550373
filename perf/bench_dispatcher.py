"""Dispatcher: one cycle for 10,000 nodes in 1,250 leases of 8 nodes.

Builds the inventory in bulk, then times dispatcher cycles and counts their queries: the
first cycle (acceptance runs plus every kind), a steady 5-minute cycle (link and counter
checks only), and the same steady cycle with half the leases, to show the query count
does not grow with the number of leases."""

import statistics
from datetime import timedelta
from decimal import Decimal

from perf.harness import captured_queries, flush, peak_rss_mib, save, setup_django, timer

NODES_PER_LEASE = 8


def build(leases: int) -> None:
    from django.utils import timezone

    from leases.choices import BillingMode, LeaseStatus, LinkLayer, SwitchRole, Technology
    from leases.models import (
        Fabric,
        Lease,
        LeaseTerms,
        NicPort,
        Node,
        NodeAssignment,
        Site,
        Switch,
        Tenant,
    )

    start = timezone.now() - timedelta(days=30)
    tenant = Tenant.objects.create(name="bench", slug="bench")
    site = Site.objects.create(name="bench site", code="bench", city="Shenzhen")
    fabric = Fabric.objects.create(
        site=site,
        name="bench",
        technology=Technology.ROCE,
        port_speed_gbps=100,
        topology="leaf_spine",
        oversubscription=Decimal(2),
    )
    leaves = Switch.objects.bulk_create(
        [Switch(fabric=fabric, name=f"leaf{i}", role=SwitchRole.LEAF) for i in range(leases // 4)]
    )
    nodes = Node.objects.bulk_create(
        [
            Node(
                hostname=f"n{i:05d}",
                management_address=f"n{i:05d}",
                gpu_model="A100",
                leaf_switch=leaves[(i // 4) % len(leaves)],
            )
            for i in range(leases * NODES_PER_LEASE)
        ],
        batch_size=2000,
    )
    NicPort.objects.bulk_create(
        [
            NicPort(
                node=node,
                device="mlx5_0",
                netdev="ens1f0",
                rate_gbps=100,
                link_layer=LinkLayer.ETHERNET,
                address=f"198.18.{i // 250}.{i % 250 + 1}",
            )
            for i, node in enumerate(nodes)
        ],
        batch_size=2000,
    )
    rows = Lease.objects.bulk_create(
        [
            Lease(tenant=tenant, reference=f"B-{i:05d}", starts_at=start, status=LeaseStatus.ACTIVE)
            for i in range(leases)
        ],
        batch_size=2000,
    )
    LeaseTerms.objects.bulk_create(
        [
            LeaseTerms(
                lease=lease,
                version=1,
                effective_from=start,
                contracted_bandwidth_gbps=Decimal(100),
                technology=Technology.ROCE,
                billing_mode=BillingMode.MONTHLY,
            )
            for lease in rows
        ],
        batch_size=2000,
    )
    NodeAssignment.objects.bulk_create(
        [
            NodeAssignment(lease=lease, node=nodes[i * NODES_PER_LEASE + j], assigned_from=start)
            for i, lease in enumerate(rows)
            for j in range(NODES_PER_LEASE)
        ],
        batch_size=5000,
    )


def main() -> dict:
    setup_django()
    from django.db import connection
    from django.utils import timezone

    from benchmarks import services
    from benchmarks.models import ProbeRun
    from leases.models import Lease

    flush()
    results: dict = {"leases": 1250, "nodes": 1250 * NODES_PER_LEASE}
    with timer(results, "build_inventory_s"):
        build(1250)
    # 10 past the hour: the next eight 5-minute cycles stay inside the hour, so they create
    # link and counter sweeps only and can be compared with each other.
    now = timezone.now().replace(minute=10, second=10, microsecond=0)

    def cycle(at, label):
        # The workers have run the previous cycle's runs, as they would have in 5 minutes.
        ProbeRun.objects.filter(state="scheduled").update(state="ok", started_at=at, finished_at=at)
        with timer(results, f"{label}_s"):
            result, queries = captured_queries(lambda: services.dispatch_due(now=at, enqueue=False))
        results[f"{label}_runs"] = result.runs
        results[f"{label}_queries"] = len(queries)
        # Inserts come in batches of rows; every other query is per cycle, not per lease.
        results[f"{label}_non_insert_queries"] = sum(
            not q["sql"].startswith("INSERT") for q in queries
        )
        return results[f"{label}_s"]

    def steady(start, label, count):
        """``count`` 5-minute cycles from ``start``; the median and the range of their times."""
        times = [cycle(start + timedelta(minutes=5 * k), label) for k in range(count)]
        results[f"{label}_s"] = round(statistics.median(times), 3)
        results[f"{label}_s_range"] = [min(times), max(times)]

    cycle(now, "first_cycle")
    # The table as autovacuum keeps it in a steady state, after the one-off first cycle has
    # run: nearly every run over, a few in flight.
    at = now + timedelta(minutes=4)
    ProbeRun.objects.filter(state="scheduled").update(state="ok", started_at=at, finished_at=at)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE benchmarks_proberun")
    steady(now + timedelta(minutes=5), "steady_cycle_1250_leases", 5)
    half = list(Lease.objects.order_by("pk").values_list("pk", flat=True)[625:])
    Lease.objects.filter(pk__in=half).update(probes_enabled=False)
    steady(now + timedelta(minutes=30), "steady_cycle_625_leases", 3)
    results["probe_runs_total"] = ProbeRun.objects.count()
    results["peak_rss_mib"] = peak_rss_mib()
    save("dispatcher", results)
    return results


if __name__ == "__main__":
    main()
