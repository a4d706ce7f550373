"""History at scale on monthly partitions (issue 16).

1. Stored bytes per run, with outputs as the real tools print them: one day of a
   BENCH_FLEET_NODES fleet (default 2,000 nodes in leases of 8) at production cadences,
   a link check (ethtool) and a counters reading (netdev statistics) per node every
   5 minutes and a ring of iperf3 pairs per lease every hour, with chain hashes. Raw
   outputs go to the content store (one row per distinct text, zstd); the run rows and
   node links to the day's partition. Sizes from pg_total_relation_size.
2. Month-end billing, the API's run list and the lease page with 1 month of a fleet's
   history held (BENCH_HISTORY_LEASES leases of 8 nodes: default 13, a run of minutes;
   250 is the 2,000-node fleet, about 95 minutes and 55 GB on the development machine),
   then with 6 months held.
3. The ingest rate on one lease-day of those runs.
4. Detach-and-archive of one month (every partitioned table), and its restore.

Run with ``python -m perf.bench_history``; it uses its own database (gpulease_bench)."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from perf.harness import flush, peak_rss_mib, save, setup_django, timer

FLEET_NODES = int(os.environ.get("BENCH_FLEET_NODES", "2000"))
HISTORY_LEASES = int(os.environ.get("BENCH_HISTORY_LEASES", "13"))
NODES = 8
UTC = ZoneInfo("UTC")
SHANGHAI = ZoneInfo("Asia/Shanghai")
SAMPLE_DAY = datetime(2026, 11, 15, tzinfo=UTC)  # phase 1, alone in its partition
MONTHS = ["2026-05", "2026-06", "2026-07", "2026-08", "2026-09", "2026-10"]
FIXTURES = Path(__file__).resolve().parent.parent / "tests/benchmarks/fixtures"
ETHTOOL = (FIXTURES / "ethtool/speed_100g_no_link_line_netdev_quote.txt").read_text()
IPERF3 = (FIXTURES / "iperf3/tcp_3.12_P4_loopback.json").read_text()
NETDEV = (FIXTURES / "counters/netdev_sysfs_virtio_capture.txt").read_text()
REPEAT = 7


def counters_text(tx: int, rx: int) -> str:
    """What the counters probe prints for one RoCE port (netdev statistics, in the
    capture's format), its byte and packet counters at these values."""
    values = {"tx_bytes": tx, "rx_bytes": rx, "tx_packets": tx // 4096, "rx_packets": rx // 4096}
    lines = []
    for line in NETDEV.splitlines():
        path, _, value = line.rpartition(":")
        name = path.rsplit("/", 1)[-1]
        lines.append(f"{path.replace('eth0', 'ens1f0')}:{values.get(name, value)}")
    return "### counters ens1f0\n" + "\n".join(lines) + "\n"


def sizes(cursor, tables: list[str]) -> int:  # type: ignore[no-untyped-def]
    cursor.execute(
        "SELECT coalesce(sum(pg_total_relation_size(t::regclass)), 0) FROM unnest(%s::text[]) t",
        [tables],
    )
    return int(cursor.fetchone()[0])


# -- phase 1: bytes per run ------------------------------------------------------------------


def build_fleet(leases: int, start: datetime) -> list[int]:
    from leases.choices import BillingMode, LeaseStatus
    from leases.models import Lease, LeaseTerms, NodeAssignment
    from perf.bench_dispatcher import build

    build(leases)
    modes = [BillingMode.MONTHLY, BillingMode.PER_GB, BillingMode.P95, BillingMode.YEARLY]
    Lease.objects.update(starts_at=start, status=LeaseStatus.ACTIVE, probes_enabled=False)
    for index, terms in enumerate(LeaseTerms.objects.order_by("lease_id")):
        terms.effective_from = start
        terms.billing_mode = modes[index % 4]
        terms.node_rent_per_month = 45000
        terms.network_fee_per_month = 22000
        terms.price_per_gb = "0.0300"
        terms.price_per_mbps_p95 = "0.4000"
        terms.save()
    NodeAssignment.objects.update(assigned_from=start)
    return list(Lease.objects.order_by("pk").values_list("pk", flat=True))


def node_plan(hostname: str):  # type: ignore[no-untyped-def]
    """A bench node as the probes plan it: one 100G RoCE port, ens1f0 (perf.bench_dispatcher)."""
    from benchmarks.probes.plan import PlanNode, PlanPort

    port = PlanPort("mlx5_0", 1, "ens1f0", None, "ethernet", 100)
    return PlanNode(hostname=hostname, leaf="", gpus=8, ports=(port,))


def link_output() -> str:
    """What the link check prints on a bench node: ethtool of its 100G port (the fixture,
    which ends before ethtool's last line: "Link detected: yes" added) and its link-down
    counter, each under its section header."""
    return (
        f"### ethtool ens1f0\n{ETHTOOL.rstrip()}\n\tLink detected: yes\n"
        "### carrier_down_count ens1f0\n0\n"
    )


def sweep_of(*, kind: str, tool: str, outputs: dict[str, str], terms) -> tuple:  # type: ignore[no-untyped-def]
    """(transcript, parsed JSON, verdict, rule, reason) of a sweep whose nodes printed
    ``outputs``, as a worker records it (``gpulease_verify.sweep``)."""
    from benchmarks.probes import commands
    from gpulease_verify import sweep

    build = commands.counters if kind == "counters" else commands.link_check
    printed = [
        sweep.NodeOutput(name, "ok", build(node_plan(name)), 0, "", text)
        for name, text in sorted(outputs.items())
    ]
    previous = {"ens1f0": 0} if kind == "link" else None
    results = [
        sweep.interpret_node(
            tool=tool,
            output=out,
            terms=terms,
            node=node_plan(out.node),
            previous_link_down=previous,
        )
        for out in printed
    ]
    judged = sweep.judge(tool=tool, results=results, terms=terms)
    parsed = json.dumps(sweep.parsed_of(results))
    return sweep.transcript(printed), parsed, judged.verdict, judged.rule, judged.reason


def sample_day(results: dict) -> None:
    """One day of the whole fleet, every run with its outputs, through the content store:
    per lease and slot a link sweep and a counters sweep of its 8 nodes, and every hour a
    ring of iperf3 pairs."""
    from django.db import connection

    from benchmarks.models import outputs
    from gpulease_verify.verdicts import TermsView
    from leases.models import LeaseTerms, NodeAssignment

    terms = dict(LeaseTerms.objects.values_list("lease_id", "pk"))
    view = TermsView(1, 100, 95, None, None)  # type: ignore[arg-type]
    held = list(
        NodeAssignment.objects.order_by("lease_id", "node__hostname").values_list(
            "lease_id", "node_id", "node__hostname", "node__leaf_switch__fabric__site_id"
        )
    )
    by_lease: dict[int, list[tuple[int, str, int]]] = {}
    for lease_id, node_id, hostname, site_id in held:
        by_lease.setdefault(lease_id, []).append((node_id, hostname, site_id))
    # A healthy lease's link sweep prints the same every 5 minutes: one per lease.
    link_sweeps = {
        lease_id: sweep_of(
            kind="link",
            tool="ethtool",
            outputs={name: link_output() for _id, name, _site in nodes},
            terms=view,
        )
        for lease_id, nodes in by_lease.items()
    }
    columns = (
        "id, lease_id, kind, tool, target, pattern, batch, trigger, slot_at, deadline_at, "
        "site_id, terms_id, state, attempts, started_at, finished_at, ingested_at, command, "
        "exit_code, raw_sha256, stderr_sha256, output_truncated, parsed, measured_bps, "
        "verdict, rule, verdict_reason, error, chain_index, prev_hash, run_hash"
    )
    blobs: dict[str, str] = {}
    links: list[tuple[int, int]] = []
    chain: dict[int, int] = {}
    kinds: dict[str, int] = {"link": 0, "counters": 0, "throughput": 0}
    readings: dict[str, int] = {"link": 0, "counters": 0, "throughput": 0}

    with connection.cursor() as cursor:
        cursor.execute("SELECT nextval('benchmarks_proberun_id_seq')")
        next_id = cursor.fetchone()[0]

        def row(
            lease_id,
            kind,
            tool,
            target,
            pattern,
            slot,
            site_id,
            raw,
            parsed,
            bps,
            verdict,
            rule,
            reason,
            command,
        ):  # type: ignore[no-untyped-def]
            nonlocal next_id
            digest = outputs.digest(raw)
            blobs.setdefault(digest, raw)
            chain[lease_id] = chain.get(lease_id, 0) + 1
            kinds[kind] += 1
            next_id += 1
            finished = slot + timedelta(seconds=12 if kind == "throughput" else 2)
            return (
                next_id,
                lease_id,
                kind,
                tool,
                target,
                pattern,
                uuid.uuid4(),
                "schedule",
                slot,
                slot + timedelta(minutes=5 if kind != "throughput" else 60),
                site_id,
                terms[lease_id],
                "ok",
                1,
                slot + timedelta(seconds=1),
                finished,
                finished,
                command,
                0,
                digest,
                "",
                False,
                parsed,
                bps,
                verdict,
                rule,
                reason,
                "",
                chain[lease_id],
                os.urandom(32).hex(),
                os.urandom(32).hex(),
            )

        started = time.perf_counter()
        with cursor.copy(f"COPY benchmarks_proberun ({columns}) FROM STDIN") as copy:
            for step in range(288):
                slot = SAMPLE_DAY + timedelta(minutes=5 * step)
                for lease_id, nodes in by_lease.items():
                    site_id = nodes[0][2]
                    raw, parsed, verdict, rule, reason = link_sweeps[lease_id]
                    copy.write_row(
                        row(lease_id, "link", "ethtool", "all", "sweep", slot, site_id, raw,
                            parsed, None, verdict, rule, reason, "")
                    )  # fmt: skip
                    counters = {}
                    for node_id, hostname, _site in nodes:
                        tx = (step + 1) * 375_000_000_000 + node_id * 7919
                        counters[hostname] = counters_text(tx, tx - tx // 37)
                    raw, parsed, verdict, rule, reason = sweep_of(
                        kind="counters", tool="counters", outputs=counters, terms=view
                    )
                    copy.write_row(
                        row(lease_id, "counters", "counters", "all", "sweep", slot, site_id, raw,
                            parsed, None, verdict, rule, reason, "")
                    )  # fmt: skip
                    readings["link"] += len(nodes)
                    readings["counters"] += len(nodes)
                    if step % 12 == 0:
                        for index, (node_id, hostname, site_id) in enumerate(nodes):
                            peer = nodes[(index + 1) % len(nodes)]
                            text = IPERF3.replace("1796072712", f"{slot.timestamp() + node_id:.0f}")
                            copy.write_row(
                                row(
                                    lease_id,
                                    "throughput",
                                    "iperf3",
                                    f"{hostname}>{peer[1]}",
                                    "ring",
                                    slot,
                                    site_id,
                                    text,
                                    json.dumps({"sum_received_bps": 98e9}),
                                    98_000_000_000,
                                    "pass",
                                    "throughput >= 95% of 100 Gbps contracted (terms v1)",
                                    "98.0 Gbit/s, at least 95.0 Gbit/s",
                                    "iperf3 -c 198.18.0.12 -J -t 10 -O 1 -P 4",
                                )
                            )
                            links += [(next_id, node_id), (next_id, peer[0])]
                            readings["throughput"] += 1
        results["sample_generate_runs_s"] = round(time.perf_counter() - started, 1)
        cursor.execute("SELECT setval('benchmarks_proberun_id_seq', %s)", [next_id])
        with timer(results, "sample_store_outputs_s"):
            outputs.store(blobs.values())
        with cursor.copy(
            "COPY benchmarks_proberun_nodes (proberun_id, node_id) FROM STDIN"
        ) as copy:
            for link in links:
                copy.write_row(link)
        cursor.execute("VACUUM ANALYZE benchmarks_proberun_p2026_11")
        cursor.execute("VACUUM ANALYZE benchmarks_proberun_nodes")
        cursor.execute("VACUUM ANALYZE benchmarks_rawoutput")
        runs = sum(kinds.values())
        partition = sizes(cursor, ["benchmarks_proberun_p2026_11"])
        through = sizes(cursor, ["benchmarks_proberun_nodes"])
        store = sizes(cursor, ["benchmarks_rawoutput"])
        cursor.execute(
            "SELECT kind, percentile_cont(0.5) WITHIN GROUP (ORDER BY pg_column_size(r.*)) "
            "FROM benchmarks_proberun_p2026_11 r GROUP BY kind"
        )
        heap_median = {kind: float(size) for kind, size in cursor.fetchall()}
        cursor.execute(
            "SELECT sum(pg_relation_size(indexrelid)) FROM pg_index "
            "WHERE indrelid = 'benchmarks_proberun_p2026_11'::regclass"
        )
        index_bytes = int(cursor.fetchone()[0])
        # A distinct output's whole row in the store (tuple, line pointer, its share of the
        # primary key's index), by the kind of the runs that name it.
        cursor.execute(
            "SELECT kind, count(*), sum(pg_column_size(o.*) + 4) FROM benchmarks_rawoutput o "
            "JOIN (SELECT DISTINCT kind, raw_sha256 FROM benchmarks_proberun_p2026_11) r "
            "ON r.raw_sha256 = o.sha256 GROUP BY kind"
        )
        blob_rows = {kind: (distinct, int(total)) for kind, distinct, total in cursor.fetchall()}
        cursor.execute(
            "SELECT pg_relation_size(indexrelid) FROM pg_index "
            "WHERE indrelid = 'benchmarks_rawoutput'::regclass AND indisprimary"
        )
        store_index = int(cursor.fetchone()[0])
        cursor.execute("SELECT sum(length(data)), sum(size), count(*) FROM benchmarks_rawoutput")
        packed, plain, distinct = cursor.fetchone()
    per_run_index = index_bytes / runs
    per_link_through = through / len(links)
    per_store_key = store_index / distinct
    per_kind = {}
    for kind, count in kinds.items():
        distinct_of, stored_of = blob_rows.get(kind, (0, 0))
        node_links = 2 if kind == "throughput" else 0
        # a run: its tuple (median) + the 4-byte line pointer, its share of the indexes, its
        # node links, and its share of the distinct outputs it names (their rows and keys)
        run_bytes = (
            heap_median[kind]
            + 4
            + per_run_index
            + per_link_through * node_links
            + (stored_of + per_store_key * distinct_of) / count
        )
        # what one node's reading costs: a sweep holds every node of its lease
        per_reading = run_bytes * count / readings[kind]
        per_kind[kind] = {
            "runs": count,
            "node_readings": readings[kind],
            "distinct_outputs": distinct_of,
            "median_row_bytes": round(heap_median[kind] + 4),
            "index_bytes": round(per_run_index),
            "node_link_bytes": round(per_link_through * node_links),
            "output_bytes": round((stored_of + per_store_key * distinct_of) / count),
            "median_stored_bytes": round(run_bytes),
            "stored_bytes_per_node_reading": round(per_reading),
        }
    results["sample"] = {
        "nodes": sum(len(nodes) for nodes in by_lease.values()),
        "runs": runs,
        "node_readings": sum(readings.values()),
        "partition_bytes": partition,
        "node_link_bytes": through,
        "output_store_bytes": store,
        "bytes_per_run_all_in": round((partition + through + store) / runs),
        "bytes_per_node_reading_all_in": round(
            (partition + through + store) / sum(readings.values())
        ),
        "distinct_outputs": distinct,
        "outputs_plain_bytes": int(plain),
        "outputs_zstd_bytes": int(packed),
        "per_kind": per_kind,
    }
    print("sample:", json.dumps(results["sample"]), flush=True)


# -- phase 2: 1 month against 6 months held --------------------------------------------------


HISTORY_SQL = """
INSERT INTO benchmarks_proberun (lease_id, kind, tool, target, pattern, batch, trigger,
    slot_at, deadline_at, site_id, terms_id, state, attempts, started_at, finished_at,
    ingested_at, command, exit_code, raw_sha256, stderr_sha256, output_truncated, parsed,
    measured_bps, verdict, rule, verdict_reason, error, chain_index, prev_hash, run_hash)
WITH held AS (
    SELECT a.lease_id, n.id AS node_id, n.hostname
    FROM leases_nodeassignment a JOIN leases_node n ON n.id = a.node_id
),
leases AS (
    SELECT lease_id, jsonb_build_object('nodes', jsonb_object_agg(hostname,
               %(link_node)s::jsonb)) AS link_parsed, count(*) AS nodes
    FROM held GROUP BY lease_id
)
SELECT l.lease_id, kind, CASE kind WHEN 'link' THEN 'ethtool' ELSE 'counters' END, 'all',
       'sweep',
       gen_random_uuid(), 'schedule', s, s + interval '5 minutes', %(site)s, t.id, 'ok', 1,
       s + interval '1 second', s + interval '3 seconds', s + interval '3 seconds', '', 0,
       CASE kind WHEN 'link' THEN %(link)s ELSE %(counters)s END, '', false,
       CASE kind WHEN 'link' THEN l.link_parsed
            ELSE (SELECT jsonb_build_object('nodes', jsonb_object_agg(h.hostname,
                      jsonb_build_object('state', 'ok', 'ports', jsonb_build_array(
                          jsonb_build_object('section', 'counters ens1f0', 'name', 'ens1f0',
                              'tx_bytes', (extract(epoch FROM s)::bigint / 300) * 375000000000
                                          + h.node_id)))))
                  FROM held h WHERE h.lease_id = l.lease_id) END,
       NULL, CASE kind WHEN 'link' THEN 'pass' ELSE 'none' END,
       CASE kind WHEN 'link' THEN 'every contracted port up at its rate, no link flap (terms v1)'
            ELSE 'counters are recorded for metering' END,
       CASE kind WHEN 'link' THEN l.nodes || ' node(s), ' || l.nodes || ' port(s) up at their rate'
            ELSE l.nodes || ' node(s) read' END, '', NULL,
       md5(random()::text) || md5(random()::text), md5(random()::text) || md5(random()::text)
FROM leases l
JOIN leases_leaseterms t ON t.lease_id = l.lease_id
CROSS JOIN (VALUES ('link'), ('counters')) AS kinds(kind)
CROSS JOIN generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '5 minutes',
                           interval '5 minutes') AS s
"""

THROUGHPUT_SQL = """
INSERT INTO benchmarks_proberun (lease_id, kind, tool, target, pattern, batch, trigger,
    slot_at, deadline_at, site_id, terms_id, state, attempts, started_at, finished_at,
    ingested_at, command, exit_code, raw_sha256, stderr_sha256, output_truncated, parsed,
    measured_bps, verdict, rule, verdict_reason, error, chain_index, prev_hash, run_hash,
    sent_bytes)
WITH pairs AS (
    SELECT a.lease_id, n.hostname AS client,
           coalesce(lead(n.hostname) OVER w, first_value(n.hostname) OVER w) AS server
    FROM leases_nodeassignment a JOIN leases_node n ON n.id = a.node_id
    WINDOW w AS (PARTITION BY a.lease_id ORDER BY n.hostname)
)
SELECT p.lease_id, 'throughput', 'iperf3', p.client || '>' || p.server, 'ring',
       gen_random_uuid(), 'schedule', s, s + interval '1 hour', %(site)s, t.id, 'ok', 1,
       s + interval '1 second', s + interval '12 seconds', s + interval '12 seconds', '', 0,
       %(iperf3)s, '', false, NULL, 98000000000, 'pass',
       'throughput >= 95%% of 100 Gbps contracted (terms v1)', '', '', NULL,
       md5(random()::text) || md5(random()::text), md5(random()::text) || md5(random()::text),
       jsonb_build_object(p.client, %(iperf3_sent)s::bigint)
FROM pairs p
JOIN leases_leaseterms t ON t.lease_id = p.lease_id
CROSS JOIN generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 hour',
                           interval '1 hour') AS s
"""


def generate_month(cursor, month: str, params: dict) -> None:  # type: ignore[no-untyped-def]
    from gpulease_verify.periods import Period
    from perf.bench_billing import ROLLUP_SQL, TRAFFIC_SQL

    start, end = Period.parse(month).bounds("Asia/Shanghai")
    window = {**params, "start": start, "end": end}
    cursor.execute(HISTORY_SQL, window)
    cursor.execute(THROUGHPUT_SQL, window)
    cursor.execute(ROLLUP_SQL, window)
    cursor.execute(TRAFFIC_SQL, window)


def timed(fn, repeat: int = REPEAT) -> dict:  # type: ignore[no-untyped-def]
    fn()  # warm
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return {"p50_ms": round(statistics.median(times), 1), "max_ms": round(max(times), 1)}


def reads(lease_id: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from rest_framework.test import APIClient

    from billing import invoicing
    from billing.models import Invoice
    from leases.models import Lease
    from perf.bench_portal import viewer_of

    lease = Lease.objects.get(pk=lease_id)
    staff, _ = get_user_model()._default_manager.get_or_create(
        username="bench-staff", defaults={"is_staff": True}
    )
    api = APIClient(SERVER_NAME="127.0.0.1")
    api.force_authenticate(staff)
    portal = Client(HTTP_ACCEPT_LANGUAGE="en", SERVER_NAME="127.0.0.1")
    portal.force_login(viewer_of(lease))

    def get(client, path):  # type: ignore[no-untyped-def]
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code)

    def bill() -> None:
        Invoice.objects.all().delete()
        invoicing.draft_period(period="2026-10", now=datetime(2026, 11, 1, 2, tzinfo=SHANGHAI))

    return {
        "month_end_billing": timed(bill, repeat=3),
        "api_run_list": timed(lambda: get(api, f"/api/v1/probe-runs/?lease={lease_id}")),
        "lease_page": timed(lambda: get(portal, f"/leases/{lease_id}/?period=2026-10")),
    }


def ingest_rate(lease_id: int) -> dict:
    from benchmarks.models import ProbeRun
    from billing import ingest

    day = datetime(2026, 10, 15, tzinfo=SHANGHAI)
    runs = ProbeRun.objects.filter(
        lease_id=lease_id, slot_at__gte=day, slot_at__lt=day + timedelta(days=1)
    )
    runs.update(ingested_at=None, sent_bytes=None)
    # A sweep is every node's reading of its slot: NODES of them.
    readings = runs.exclude(pattern="sweep").count() + NODES * runs.filter(pattern="sweep").count()
    started = time.perf_counter()
    result = ingest.ingest_all(notify=False)
    elapsed = time.perf_counter() - started
    return {
        "runs": result.runs,
        "node_readings": readings,
        "seconds": round(elapsed, 2),
        "runs_per_second": round(result.runs / elapsed, 1),
        "node_readings_per_second": round(readings / elapsed, 1),
        "hours_recomputed": result.hours,
        "traffic_samples_recomputed": result.traffic_samples,
    }


def main() -> dict:
    setup_django()
    from django.db import connection

    from benchmarks.models import RawOutput, outputs
    from common import archives, partitions
    from gpulease_verify import probe_tax
    from gpulease_verify.periods import Period
    from leases.models import Lease, Site

    flush()
    partitions.ensure(now=datetime(2026, 4, 15, tzinfo=UTC), ahead=12)
    results: dict = {"fleet_nodes": FLEET_NODES, "history_leases": HISTORY_LEASES}

    # 1. bytes per run
    with timer(results, "build_fleet_s"):
        build_fleet(FLEET_NODES // NODES, datetime(2026, 4, 1, tzinfo=SHANGHAI))
    sample_day(results)

    # 2. a smaller fleet's history, 1 month then 6 months held
    flush()
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE benchmarks_rawoutput")
    lease_ids = build_fleet(HISTORY_LEASES, datetime(2026, 4, 1, tzinfo=SHANGHAI))
    outputs.store([ETHTOOL, IPERF3, counters_text(1, 1)])
    params = {
        "site": Site.objects.get(code="bench").pk,
        "link": outputs.digest(ETHTOOL),
        "counters": outputs.digest(counters_text(1, 1)),
        "iperf3": outputs.digest(IPERF3),
        # what ingest records of each (billing.probe_tax.record_sent)
        "iperf3_sent": probe_tax.bytes_sent(
            tool="iperf3",
            state="ok",
            parsed={"parsed": True},
            raw_output=IPERF3,
            command="",
            target="a>b",
            nodes=["a", "b"],
        )["a"],
        "link_node": json.dumps(
            {"state": "ok", "verdict": "pass", "ports": [{"label": "ens1f0", "up": True}]}
        ),
    }
    with connection.cursor() as cursor:
        with timer(results, "generate_one_month_s"):
            generate_month(cursor, MONTHS[-1], params)
            cursor.execute("ANALYZE")
        cursor.execute("SELECT count(*) FROM benchmarks_proberun")
        results["runs_one_month"] = cursor.fetchone()[0]
    results["one_month_held"] = reads(lease_ids[1])
    print("one month:", json.dumps(results["one_month_held"]), flush=True)
    with connection.cursor() as cursor:
        with timer(results, "generate_five_more_months_s"):
            for month in MONTHS[:-1]:
                started = time.perf_counter()
                generate_month(cursor, month, params)
                print(f"generated {month} in {time.perf_counter() - started:.0f} s", flush=True)
            cursor.execute("ANALYZE")
        cursor.execute("SELECT count(*) FROM benchmarks_proberun")
        results["runs_six_months"] = cursor.fetchone()[0]
    results["generate_runs_per_second"] = round(
        results["runs_six_months"]
        / (results["generate_one_month_s"] + results["generate_five_more_months_s"])
    )
    results["six_months_held"] = reads(lease_ids[1])
    print("six months:", json.dumps(results["six_months_held"]), flush=True)

    # 3. ingest
    results["ingest"] = ingest_rate(lease_ids[2])
    print("ingest:", json.dumps(results["ingest"]), flush=True)

    # 4. archive the oldest month and restore it
    month = Period.parse("2026-06")
    with tempfile.TemporaryDirectory() as directory:
        record = archives.archive_month(month, directory=Path(directory))
        results["archive"] = {
            "month": str(month),
            "rows": record.rows,
            "seconds": record.seconds,
            "file_bytes": record.size_bytes,
        }
        with timer(results["archive"], "restore_s"):
            archives.restore(Path(record.path))
    results["archive"]["runs_per_second"] = round(
        record.rows["benchmarks_proberun"] / record.seconds
    )
    results["distinct_outputs"] = RawOutput.objects.count()
    results["leases"] = Lease.objects.count()
    results["peak_rss_mib"] = peak_rss_mib()
    save("history", results)
    return results


if __name__ == "__main__":
    main()
