"""API latency under load: one lease of 8 nodes with a year of 5-minute history, served by
gunicorn (4 sync workers) and read by 20 concurrent clients on loopback.

The raw rows are generated in SQL (bench_billing's approach): every 5 minutes a link sweep
and a counters sweep of the lease's nodes, plus a ring of 8 node-pair throughput runs every
hour, over 365 days (280,320 runs and 140,160 run-node links). The hourly rollups are built
in SQL from them, so the SLA report reads rollups as it does in production.

Measured, for each endpoint, with a provider-staff token per client:
- GET /api/v1/probe-runs/?lease=<id>: the first page (100 runs, newest first);
- a deep cursor page: `next` followed 200 times, then that URL requested over and over;
- GET /api/v1/leases/<id>/sla/?period=2025-06.
Each endpoint gets one client alone (the service time) and then 20 clients at once, each
phase bounded by DURATION seconds or REQUESTS requests. Latency is client-side, from
sending the request to reading the whole body.

BENCH_API_KEEP=1 reuses the data of a previous run (same database) instead of rebuilding."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo

from perf import harness
from perf.bench_billing import ROLLUP_SQL, RUN_COLUMNS

# A database of its own, so that this benchmark never clobbers the others' data.
BENCH_DB = os.environ.get(
    "BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpulease_bench_api"
)

NODES = 8
SHANGHAI = ZoneInfo("Asia/Shanghai")
START = datetime(2025, 1, 1, tzinfo=SHANGHAI)
END = datetime(2026, 1, 1, tzinfo=SHANGHAI)  # 365 days
SLA_PERIOD = "2025-06"
CLIENTS = int(os.environ.get("BENCH_API_CLIENTS", "20"))
WORKERS = 4
DURATION = float(os.environ.get("BENCH_API_SECONDS", "30"))
REQUESTS = int(os.environ.get("BENCH_API_REQUESTS", "2000"))
DEEP_PAGES = int(os.environ.get("BENCH_API_DEEP_PAGES", "200"))
TARGET_P95_MS = 100
ROOT = Path(__file__).resolve().parent.parent

# bench_billing's columns (the chain's and ingested_at), and the probe bytes ingest records
ALL_RUN_COLUMNS = f"{RUN_COLUMNS}, sent_bytes"
# Each throughput run printed a real iperf3 report (stored once in the content store), and
# ingest recorded what its client sent by it (billing.probe_tax.record_sent).
IPERF3 = (ROOT / "tests/benchmarks/fixtures/iperf3/tcp_3.12_P4_loopback.json").read_text()

# The lease's nodes in hostname order, numbered 0..7; the ring pairs node k with k + 1.
NODES_CTE = """
lease_nodes AS (
    SELECT (row_number() OVER (ORDER BY n.hostname) - 1)::int AS k, n.id, n.hostname
    FROM leases_nodeassignment a JOIN leases_node n ON n.id = a.node_id
    WHERE a.lease_id = %(lease)s
)
"""

# Every 5 minutes: a link sweep of the lease's nodes (all links up) and a counters sweep.
NODE_RUNS_SQL = f"""
WITH {NODES_CTE}
INSERT INTO benchmarks_proberun ({ALL_RUN_COLUMNS})
SELECT t.lease_id, kinds.kind, kinds.tool, 'all', 'sweep', gen_random_uuid(),
       'schedule', s, s + interval '5 minutes', 'ok', 1, s, s + interval '1 second', '',
       0, '', '', false,
       jsonb_build_object('nodes', (
           SELECT jsonb_object_agg(n.hostname, CASE WHEN kinds.kind = 'counters'
               THEN jsonb_build_object('state', 'ok', 'ports', jsonb_build_array(
                   jsonb_build_object('section', 'counters ens1f0', 'name', 'ens1f0',
                       'tx_bytes', (extract(epoch FROM s - %(start)s::timestamptz)::bigint
                                    / 300) * 375000000000 + n.k)))
               ELSE jsonb_build_object('state', 'ok', 'verdict', 'pass', 'ports',
                   jsonb_build_array(jsonb_build_object(
                       'label', 'ens1f0', 'up', true, 'speed_bps', 100000000000))) END)
           FROM lease_nodes n)),
       NULL, NULL, t.id,
       CASE WHEN kinds.kind = 'link' THEN 'pass' ELSE 'none' END,
       CASE WHEN kinds.kind = 'link'
            THEN 'every contracted port up at its rate, no link flap (terms v1)'
            ELSE 'counters are recorded for metering' END,
       '', '', %(site)s, '', '', s + interval '1 minute', NULL
FROM leases_leaseterms t
CROSS JOIN (VALUES ('link', 'ethtool'), ('counters', 'counters')) AS kinds (kind, tool)
CROSS JOIN generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '5 minutes',
                           interval '5 minutes') AS s
WHERE t.lease_id = %(lease)s
"""

# Every hour: a ring of 8 node pairs (2%% of samples at 40 Gbit/s, the rest at 98).
THROUGHPUT_SQL = f"""
WITH {NODES_CTE},
runs AS (
    INSERT INTO benchmarks_proberun ({ALL_RUN_COLUMNS})
    SELECT t.lease_id, 'throughput', 'iperf3', a.hostname || '>' || b.hostname, 'ring',
           gen_random_uuid(), 'schedule', s, s + interval '5 minutes', 'ok',
           1, s, s + interval '11 seconds', '', 0, %(iperf3)s, '', false, NULL,
           bps, NULL, t.id, CASE WHEN bps >= 95000000000 THEN 'pass' ELSE 'fail' END,
           'throughput >= 95%% of 100 Gbps contracted (terms v1)', '', '', %(site)s, '', '',
           s + interval '1 minute', jsonb_build_object(a.hostname, %(iperf3_sent)s::bigint)
    FROM leases_leaseterms t
    CROSS JOIN lease_nodes a
    JOIN lease_nodes b ON b.k = (a.k + 1) %% {NODES}
    CROSS JOIN generate_series(%(start)s::timestamptz, %(end)s::timestamptz - interval '1 hour',
                               interval '1 hour') AS s
    CROSS JOIN LATERAL (
        SELECT CASE WHEN (extract(epoch FROM s)::bigint / 3600 + a.k * 7) %% 50 = 0
               THEN 40000000000 ELSE 98000000000 END AS bps
    ) AS figures
    WHERE t.lease_id = %(lease)s
    RETURNING id, target
)
INSERT INTO benchmarks_proberun_nodes (proberun_id, node_id)
SELECT runs.id, n.id FROM runs
JOIN lease_nodes n ON n.hostname IN (split_part(runs.target, '>', 1),
                                     split_part(runs.target, '>', 2))
"""

# bench_billing's rollups count verdicts only; a link check that passed also means the
# lease's links were up for the whole hour.
AVAILABILITY_SQL = """
UPDATE billing_hourlyrollup SET available_minutes = 60
WHERE lease_id = %(lease)s AND kind = 'link' AND failed = 0
"""


def build_lease() -> int:
    """One lease of 8 nodes, active over the whole year."""
    from leases.choices import LeaseStatus
    from leases.models import Lease, LeaseTerms, NodeAssignment
    from perf.bench_dispatcher import build

    build(4)  # bench_dispatcher's inventory needs at least 4 leases for one leaf switch
    lease, *others = Lease.objects.order_by("pk")
    Lease.objects.filter(pk__in=[other.pk for other in others]).delete()
    Lease.objects.filter(pk=lease.pk).update(starts_at=START, status=LeaseStatus.ACTIVE)
    LeaseTerms.objects.filter(lease=lease).update(effective_from=START)
    NodeAssignment.objects.filter(lease=lease).update(assigned_from=START)
    return lease.pk


def build_data(results: dict) -> int:
    from django.db import connection

    from benchmarks.models import outputs
    from common import partitions
    from gpulease_verify import probe_tax
    from leases.models import Site

    harness.flush()
    # The year's months in partitions of their own, as beat makes them ahead of time.
    partitions.ensure(now=START, ahead=13)
    with harness.timer(results, "build_lease_s"):
        lease_id = build_lease()
    outputs.store([IPERF3])
    sent = probe_tax.bytes_sent(
        tool="iperf3",
        state="ok",
        parsed={"parsed": True},  # a run that parsed; its bytes come from the text
        raw_output=IPERF3,
        command="",
        target="a>b",
        nodes=["a", "b"],
    )
    params = {
        "start": START,
        "end": END,
        "lease": lease_id,
        "site": Site.objects.get(code="bench").pk,
        "iperf3": outputs.digest(IPERF3),
        "iperf3_sent": sent["a"],
    }
    with connection.cursor() as cursor:
        with harness.timer(results, "generate_raw_rows_s"):
            cursor.execute(NODE_RUNS_SQL, params)
            cursor.execute(THROUGHPUT_SQL, params)
        with harness.timer(results, "build_rollups_in_sql_s"):
            cursor.execute(ROLLUP_SQL, params)
            cursor.execute(AVAILABILITY_SQL, params)
        cursor.execute("VACUUM ANALYZE benchmarks_proberun")
        cursor.execute("VACUUM ANALYZE benchmarks_proberun_nodes")
        cursor.execute("VACUUM ANALYZE billing_hourlyrollup")
    return lease_id


def describe_data(results: dict, lease_id: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT kind, count(*) FROM benchmarks_proberun WHERE lease_id = %s GROUP BY kind"
            " ORDER BY kind",
            [lease_id],
        )
        results["runs_by_kind"] = dict(cursor.fetchall())
        results["raw_rows"] = sum(results["runs_by_kind"].values())
        cursor.execute("SELECT count(*) FROM benchmarks_proberun_nodes")
        results["run_node_links"] = cursor.fetchone()[0]
        cursor.execute("SELECT count(*) FROM billing_hourlyrollup WHERE lease_id = %s", [lease_id])
        results["hourly_rollups"] = cursor.fetchone()[0]


def issue_tokens(count: int) -> list[str]:
    from django.contrib.auth import get_user_model

    from accounts.services import issue_token

    users = get_user_model()._default_manager
    secrets = []
    for index in range(count):  # a holder per client: API_TOKENS_PER_USER caps one's tokens
        user, _ = users.get_or_create(username=f"bench-staff-{index}", defaults={"is_staff": True})
        secrets.append(issue_token(user=user, scopes=["read"], name=f"bench client {index}").secret)
    return secrets


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_gunicorn(port: int) -> subprocess.Popen:
    env = dict(
        os.environ,
        DATABASE_URL=harness.BENCH_DB,
        DJANGO_DEBUG="false",
        SECRET_KEY="bench",
        ALLOWED_HOSTS="127.0.0.1",
        SECURE_SSL_REDIRECT="false",
        API_RATE_LIMIT="1000000/min",
        # As docker-compose.yml runs it: persistent connections, counters in Redis.
        DB_CONN_MAX_AGE="60",
        CACHE_URL=os.environ.get("BENCH_CACHE_URL", "redis://127.0.0.1:6379/10"),
        DJANGO_SETTINGS_MODULE="config.settings",
    )
    command = [
        str(ROOT / ".venv" / "bin" / "gunicorn"),
        "config.wsgi:application",
        "-b",
        f"127.0.0.1:{port}",
        "-w",
        str(WORKERS),
        "--log-level",
        "warning",
    ]
    # Production settings refuse to start without the provider's keys: the local ones,
    # made once if missing (config.keys), as the compose stack's volume holds them.
    from config import keys

    keys.create()
    return subprocess.Popen(command, cwd=ROOT, env=env)


class Client:
    """One keep-alive connection to the server (reopened when the server closes it, as
    gunicorn's sync workers do after every response)."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}

    def get(self, path: str) -> tuple[int, bytes]:
        try:
            self.connection.request("GET", path, headers=self.headers)
            response = self.connection.getresponse()
            return response.status, response.read()
        except (http.client.HTTPException, ConnectionError):
            self.connection.close()  # a connection closed under us: one retry, fresh
            self.connection.request("GET", path, headers=self.headers)
            response = self.connection.getresponse()
            return response.status, response.read()

    def close(self) -> None:
        self.connection.close()


def wait_ready(port: int, token: str, path: str, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"gunicorn exited with {server.returncode}")
        try:
            client = Client(port, token)
            status, body = client.get(path)
            client.close()
            if status == 200:
                return
            raise RuntimeError(f"GET {path} answered {status}: {body[:300]!r}")
        except (ConnectionError, OSError):
            time.sleep(0.25)
    raise RuntimeError("gunicorn did not answer within 60 s")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))
    return ordered[index]


def hammer(port: int, tokens: list[str], path: str, clients: int) -> dict:
    """`clients` threads request `path` until DURATION has passed or REQUESTS are done."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    issued = 0
    sizes: list[int] = []
    deadline = time.monotonic() + DURATION
    start_line = threading.Barrier(clients + 1)

    def take() -> bool:
        nonlocal issued
        with lock:
            if issued >= REQUESTS or time.monotonic() >= deadline:
                return False
            issued += 1
            return True

    def worker(token: str) -> None:
        client = Client(port, token)
        client.get(path)  # warm this worker's connection and the server's caches
        start_line.wait()
        mine: list[float] = []
        try:
            while take():
                started = time.perf_counter()
                status, body = client.get(path)
                mine.append((time.perf_counter() - started) * 1000)
                if status != 200:
                    with lock:
                        errors.append(f"{status}: {body[:200]!r}")
                elif not sizes:
                    sizes.append(len(body))
        finally:
            client.close()
            with lock:
                latencies.extend(mine)

    threads = [
        threading.Thread(target=worker, args=(tokens[index % len(tokens)],))
        for index in range(clients)
    ]
    for thread in threads:
        thread.start()
    start_line.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    return {
        "clients": clients,
        "requests": len(latencies),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        "seconds": round(elapsed, 2),
        "p50_ms": round(percentile(latencies, 0.50), 1),
        "p95_ms": round(percentile(latencies, 0.95), 1),
        "max_ms": round(max(latencies), 1),
        "req_per_s": round(len(latencies) / elapsed, 1),
        "response_bytes": sizes[0] if sizes else None,
    }


def deep_cursor(port: int, token: str, first: str) -> tuple[str, dict]:
    """Follow `next` DEEP_PAGES times from the first page; the URL of the last page."""
    client = Client(port, token)
    path = first
    started = time.perf_counter()
    rows = 0
    for _ in range(DEEP_PAGES):
        status, body = client.get(path)
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}: {body[:300]!r}")
        page = json.loads(body)
        rows += len(page["results"])
        nxt = urlsplit(page["next"])
        path = f"{nxt.path}?{nxt.query}"
    elapsed = time.perf_counter() - started
    status, body = client.get(path)
    page = json.loads(body)
    client.close()
    walk = {
        "pages_followed": DEEP_PAGES,
        "rows_skipped": rows,
        "walk_s": round(elapsed, 2),
        "mean_ms_per_page_walking": round(elapsed / DEEP_PAGES * 1000, 1),
        "deep_page_first_slot": page["results"][0]["slot_at"],
    }
    return path, walk


def explain(lease_id: int, deep_path: str) -> dict:
    """EXPLAIN ANALYZE of every query each endpoint runs, as provider staff (the queries
    are captured in-process through the same view, then explained one by one)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import RequestFactory

    from api.views import LeaseViewSet, ProbeRunViewSet

    user = get_user_model()._default_manager.get(username="bench-staff")
    cases = {
        "probe_runs_first_page": (
            ProbeRunViewSet,
            "list",
            f"/api/v1/probe-runs/?lease={lease_id}",
            {},
        ),
        "probe_runs_deep_page": (ProbeRunViewSet, "list", deep_path, {}),
        "sla_report": (
            LeaseViewSet,
            "sla",
            f"/api/v1/leases/{lease_id}/sla/?period={SLA_PERIOD}",
            {"pk": str(lease_id)},
        ),
    }
    plans: dict = {}
    for label, (viewset, action, path, kwargs) in cases.items():
        # with the action's own options (its query parameters), as the router builds it
        view = viewset.as_view({"get": action}, **getattr(getattr(viewset, action), "kwargs", {}))
        request = RequestFactory().get(path, HTTP_HOST="127.0.0.1")
        request.user = user
        response, queries = harness.captured_queries(
            lambda view=view, request=request, kwargs=kwargs: _render(view, request, user, kwargs)
        )
        explained = []
        with connection.cursor() as cursor:
            for query in queries:
                if not query["sql"].lstrip().upper().startswith("SELECT"):
                    continue
                cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS) {query['sql']}")
                plan = [row[0] for row in cursor.fetchall()]
                explained.append({"sql": query["sql"][:300], "plan": plan})
        explained.sort(key=_execution_ms, reverse=True)
        plans[label] = {
            "status": response.status_code,
            "queries": len(queries),
            "execution_ms_total": round(sum(_execution_ms(item) for item in explained), 2),
            "slowest": explained[:2],
        }
    return plans


def _render(view, request, user, kwargs):  # type: ignore[no-untyped-def]
    from rest_framework.test import force_authenticate

    force_authenticate(request, user=user)
    response = view(request, **kwargs)
    response.render()
    return response


def _execution_ms(item: dict) -> float:
    for line in reversed(item["plan"]):
        if line.startswith("Execution Time:"):
            return float(line.split()[2])
    return 0.0


def main() -> dict:
    harness.BENCH_DB = BENCH_DB
    # A SIGTERM (timeout) unwinds through `finally`, which stops gunicorn.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    harness.setup_django()
    from leases.models import Lease

    results: dict = {
        "nodes": NODES,
        "history": f"{START.date()} to {END.date()} (Asia/Shanghai)",
        "gunicorn_workers": WORKERS,
        "cpus": os.cpu_count(),
        "bound": f"{DURATION:g} s or {REQUESTS} requests per phase",
    }
    lease = Lease.objects.order_by("pk").first()
    if os.environ.get("BENCH_API_KEEP") == "1" and lease is not None:
        lease_id = lease.pk
        results["data"] = "reused"
    else:
        lease_id = build_data(results)
    describe_data(results, lease_id)
    tokens = issue_tokens(CLIENTS)
    port = free_port()
    server = start_gunicorn(port)
    first = f"/api/v1/probe-runs/?lease={lease_id}"
    sla = f"/api/v1/leases/{lease_id}/sla/?period={SLA_PERIOD}"
    try:
        wait_ready(port, tokens[0], first, server)
        deep, results["deep_cursor"] = deep_cursor(port, tokens[0], first)
        endpoints = {
            "probe_runs_first_page": first,
            "probe_runs_deep_page": deep,
            "sla_report": sla,
        }
        results["paths"] = endpoints
        results["endpoints"] = {}
        for name, path in endpoints.items():
            single = hammer(port, tokens[:1], path, 1)
            loaded = hammer(port, tokens, path, CLIENTS)
            results["endpoints"][name] = {"1_client": single, f"{CLIENTS}_clients": loaded}
            print(f"{name}: 1 client {single}\n{name}: {CLIENTS} clients {loaded}", flush=True)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    results["target_p95_ms"] = TARGET_P95_MS
    results["meets_target_under_load"] = all(
        figures[f"{CLIENTS}_clients"]["p95_ms"] <= TARGET_P95_MS
        for figures in results["endpoints"].values()
    )
    harness.save("api", results)
    results["query_plans"] = explain(lease_id, deep)
    harness.save("api", results)
    return results


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
