"""Month-end billing: 100 leases x 8 nodes with a month of 5-minute throughput and counter
samples (about 8 million probe runs: 7.1 million throughput runs and 0.9 million counters
sweeps of 8 nodes) on PostgreSQL.

Measured:
- the month-end run (SLA evaluation and draft invoices for every tenant) from rollups;
- one hand-written SQL aggregate over the same raw rows (throughput compliance and traffic
  per lease), the floor a billing run that rescans raw rows could not beat;
- building the rollups of the whole month in SQL (what the incremental ingest spreads
  over the month), and the ingest's own throughput on one lease-day of runs;
- peak memory of this process.

The raw rows are generated in SQL: per lease a ring of 8 node pairs measured every 5
minutes (2% of samples at 40 Gbit/s, the rest at 98, against 100 contracted), and every 5
minutes a counters sweep of the lease's nodes, each node's tx byte counter growing by 375 GB
per 5 minutes (10 Gbit/s)."""

import os
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from perf.harness import flush, peak_rss_mib, save, setup_django, timer

LEASES = int(os.environ.get("BENCH_LEASES", "100"))
NODES = 8
PERIOD = "2026-10"
SHANGHAI = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 10, 1, tzinfo=SHANGHAI)
END = datetime(2026, 11, 1, tzinfo=SHANGHAI)

RUN_COLUMNS = """
    lease_id, kind, tool, target, pattern, batch, trigger, slot_at, deadline_at, state,
    attempts, started_at, finished_at, command, exit_code, raw_sha256, stderr_sha256,
    output_truncated, parsed, measured_bps, latency_us, terms_id, verdict, rule,
    verdict_reason, error, site_id, prev_hash, run_hash, ingested_at
"""

THROUGHPUT_SQL = f"""
INSERT INTO benchmarks_proberun ({RUN_COLUMNS})
SELECT l.id, 'throughput', 'iperf3', 'n' || k || '>n' || ((k + 1) %% {NODES}), 'ring',
       gen_random_uuid(), 'schedule', s, s + interval '5 minutes', 'ok',
       1, s, s + interval '11 seconds', '', 0, '', '', false, NULL,
       bps, NULL, t.id, CASE WHEN bps >= 95000000000 THEN 'pass' ELSE 'fail' END,
       'throughput >= 95%% of 100 Gbps contracted (terms v1)', '', '', %(site)s, '', '',
       s + interval '1 minute'
FROM leases_lease l
JOIN leases_leaseterms t ON t.lease_id = l.id
CROSS JOIN generate_series(0, {NODES - 1}) AS k
CROSS JOIN generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '5 minutes',
                           interval '5 minutes') AS s
CROSS JOIN LATERAL (
    SELECT CASE WHEN (extract(epoch FROM s)::bigint / 300 + k * 7 + l.id) %% 50 = 0
           THEN 40000000000 ELSE 98000000000 END AS bps
) AS figures
WHERE l.id = ANY(%(leases)s)
"""

COUNTERS_SQL = f"""
INSERT INTO benchmarks_proberun ({RUN_COLUMNS})
SELECT l.id, 'counters', 'counters', 'all', 'sweep', gen_random_uuid(), 'schedule', s,
       s + interval '5 minutes', 'ok', 1, s, s + interval '1 second', '', 0, '', '',
       false,
       jsonb_build_object('nodes', (
           SELECT jsonb_object_agg('n' || k, jsonb_build_object('state', 'ok', 'ports',
               jsonb_build_array(jsonb_build_object(
                   'section', 'counters ens1f0', 'name', 'ens1f0',
                   'tx_bytes', (extract(epoch FROM s - %(start)s::timestamptz)::bigint / 300)
                               * 375000000000 + k))))
           FROM generate_series(0, {NODES - 1}) AS k)),
       NULL, NULL, t.id, 'none', 'counters are recorded for metering',
       '{NODES} node(s) read', '', %(site)s, '', '', s + interval '1 minute'
FROM leases_lease l
JOIN leases_leaseterms t ON t.lease_id = l.id
CROSS JOIN generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '5 minutes',
                           interval '5 minutes') AS s
WHERE l.id = ANY(%(leases)s)
"""

# Every node's reading in the counters sweeps of the window: its bytes sent, and the one
# before it.
READINGS = """
    SELECT r.lease_id, r.slot_at, (node.value -> 'ports' -> 0 ->> 'tx_bytes')::numeric AS tx,
           lag((node.value -> 'ports' -> 0 ->> 'tx_bytes')::numeric)
               OVER (PARTITION BY r.lease_id, node.key ORDER BY r.slot_at) AS previous
    FROM benchmarks_proberun r CROSS JOIN LATERAL jsonb_each(r.parsed -> 'nodes') AS node
    WHERE r.kind = 'counters' AND r.slot_at >= %(start)s AND r.slot_at < %(end)s
"""

# The baseline: one statement over the raw rows, per lease: throughput passes and
# failures, and the bytes sent (counter deltas between consecutive readings of a node).
RAW_AGGREGATE_SQL = (
    """
WITH readings AS ("""
    + READINGS
    + """),
traffic AS (
    SELECT lease_id, sum(tx - previous) AS sent FROM readings
    WHERE previous IS NOT NULL GROUP BY lease_id
),
verdicts AS (
    SELECT lease_id, count(*) FILTER (WHERE verdict = 'pass') AS passed,
           count(*) FILTER (WHERE verdict = 'fail') AS failed
    FROM benchmarks_proberun
    WHERE kind = 'throughput' AND slot_at >= %(start)s AND slot_at < %(end)s
    GROUP BY lease_id
)
SELECT verdicts.lease_id, passed, failed, sent FROM verdicts JOIN traffic USING (lease_id)
"""
)

ROLLUP_SQL = """
INSERT INTO billing_hourlyrollup (lease_id, kind, hour, passed, failed, unknown, excluded,
    informational, measured, sum_bps, min_bps, max_bps, sum_latency_us, available_minutes,
    unavailable_minutes, unknown_minutes, computed_at)
SELECT lease_id, kind, date_trunc('hour', slot_at),
       count(*) FILTER (WHERE verdict = 'pass'), count(*) FILTER (WHERE verdict = 'fail'),
       0, 0, count(*) FILTER (WHERE verdict = 'none'), count(measured_bps),
       coalesce(sum(measured_bps), 0), min(measured_bps), max(measured_bps), 0, 0, 0, 0, now()
FROM benchmarks_proberun
WHERE slot_at >= %(start)s AND slot_at < %(end)s
GROUP BY lease_id, kind, date_trunc('hour', slot_at)
"""

TRAFFIC_SQL = (
    """
INSERT INTO billing_trafficsample (lease_id, slot_at, seconds, tx_bytes, nodes, resets, wraps,
    switch_nodes)
SELECT lease_id, slot_at, 300, sum(tx - previous), count(*), 0, 0, 0
FROM ("""
    + READINGS
    + """) AS readings
WHERE previous IS NOT NULL
GROUP BY lease_id, slot_at
"""
)


def build_leases() -> list[int]:
    from decimal import Decimal

    from leases.choices import BillingMode, LeaseStatus
    from leases.models import Lease, LeaseTerms
    from perf.bench_dispatcher import build

    build(LEASES)
    modes = [BillingMode.MONTHLY, BillingMode.YEARLY, BillingMode.PER_GB, BillingMode.P95]
    leases = list(Lease.objects.order_by("pk"))
    for lease in leases:
        lease.starts_at = datetime(2026, 9, 1, tzinfo=SHANGHAI)
        lease.status = LeaseStatus.ACTIVE
    Lease.objects.bulk_update(leases, ["starts_at", "status"])
    for index, terms in enumerate(LeaseTerms.objects.order_by("lease_id")):
        terms.effective_from = datetime(2026, 9, 1, tzinfo=SHANGHAI)
        terms.billing_mode = modes[index % 4]
        terms.node_rent_per_month = Decimal("45000.00")
        terms.network_fee_per_month = Decimal("22000.00")
        terms.price_per_gb = Decimal("0.0300")
        terms.price_per_mbps_p95 = Decimal("0.4000")
        terms.save()
    from leases.models import NodeAssignment

    NodeAssignment.objects.update(assigned_from=datetime(2026, 9, 1, tzinfo=SHANGHAI))
    return [lease.pk for lease in leases]


def main() -> dict:
    setup_django()
    from django.db import connection
    from django.utils import timezone

    from billing import ingest, invoicing
    from billing.models import HourlyRollup, IngestCursor, TrafficSample
    from leases.models import Site

    flush()
    results: dict = {"leases": LEASES, "nodes": LEASES * NODES, "period": PERIOD}
    with timer(results, "build_leases_s"):
        lease_ids = build_leases()
    params = {
        "start": START,
        "end": END,
        "leases": lease_ids,
        "site": Site.objects.get(code="bench").pk,
    }
    with connection.cursor() as cursor:
        with timer(results, "generate_raw_rows_s"):
            cursor.execute(THROUGHPUT_SQL, params)
            cursor.execute(COUNTERS_SQL, params)
            cursor.execute("ANALYZE benchmarks_proberun")
        cursor.execute("SELECT count(*) FROM benchmarks_proberun")
        results["raw_rows"] = cursor.fetchone()[0]
        started = time.perf_counter()
        cursor.execute(RAW_AGGREGATE_SQL, params)
        rows = cursor.fetchall()
        results["raw_sql_aggregate_s"] = round(time.perf_counter() - started, 3)
        results["raw_sql_aggregate_leases"] = len(rows)
        with timer(results, "build_rollups_in_sql_s"):
            cursor.execute(ROLLUP_SQL, params)
            cursor.execute(TRAFFIC_SQL, params)
    results["hourly_rollups"] = HourlyRollup.objects.count()
    results["traffic_samples"] = TrafficSample.objects.count()
    # The month's cursor is past every generated run: the month-end run reads rollups only.
    IngestCursor.objects.update_or_create(
        name=ingest.CURSOR, defaults={"finished_at": timezone.now(), "run_id": 10**12}
    )
    with timer(results, "month_end_billing_s"):
        invoices = invoicing.draft_period(
            period=PERIOD, now=datetime(2026, 11, 1, 2, tzinfo=SHANGHAI)
        )
    results["invoices"] = len(invoices)
    results["invoice_lines"] = sum(invoice.lines.count() for invoice in invoices)
    results["invoice_total_cny"] = str(sum(invoice.total for invoice in invoices))
    results["ratio_to_raw_sql_aggregate"] = round(
        results["month_end_billing_s"] / results["raw_sql_aggregate_s"], 3
    )
    results["ingest"] = bench_ingest(lease_ids[0])
    results["peak_rss_mib"] = peak_rss_mib()
    save("billing", results)
    return results


def bench_ingest(lease_id: int) -> dict:
    """The incremental path: ingest one lease-day of runs (288 slots of 8 throughput pairs
    and a counters sweep of the 8 nodes)."""
    from datetime import timedelta

    from benchmarks.models import ProbeRun
    from billing import ingest

    day = ProbeRun.objects.filter(
        lease_id=lease_id, slot_at__gte=START, slot_at__lt=START + timedelta(days=1)
    )
    # Generated as already read (ingested_at set, the rollups built in SQL): only this
    # lease-day is left for ingest, its runs as they finished.
    day.update(ingested_at=None)
    readings = day.exclude(pattern="sweep").count() + NODES * day.filter(pattern="sweep").count()
    started = time.perf_counter()
    result = ingest.ingest_all(notify=False)
    elapsed = time.perf_counter() - started
    return {
        "runs": result.runs,
        "node_readings": readings,
        "seconds": round(elapsed, 3),
        "runs_per_second": round(result.runs / elapsed, 1),
        "node_readings_per_second": round(readings / elapsed, 1),
        "hours_recomputed": result.hours,
        "traffic_samples_recomputed": result.traffic_samples,
    }


if __name__ == "__main__":
    main()
