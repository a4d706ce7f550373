"""Portal render time with a year of history: the lease detail page (throughput chart per
node pair, link state timeline, NCCL history, SLA report, incidents), the SLA history and
the overview, as a tenant viewer sees them.

It reads bench_api's database (one lease of 8 nodes, a year of 5-minute history: 1.75 M
probe runs), building it first if it is missing. Django's test client calls the views in
this process, so the figures are server time: URL routing, middleware, queries, template
and SVG rendering, without a network or a web server. The portal's clock is pinned to the
last day of the data, so each chart covers a full window of it.

Each page is requested REPEAT times after one warm-up request; p50, p95 and max are
reported with the number of queries of one request. Targets (issue 17): the lease detail
page at most 150 ms p95, over 30 days, a year and a past month; the JavaScript and CSS the
lease page loads at most 300 KB gzipped (each file gzipped at level 9, as a server would
send it)."""

import gzip
import os
import re
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from perf import bench_api, harness

REPEAT = int(os.environ.get("BENCH_PORTAL_REPEAT", "40"))
TARGET_MS = 150
ASSET_BUDGET_BYTES = 300 * 1024
TARGET_PAGES = ("lease_detail", "lease_detail_year", "lease_detail_past_month")
PINNED_NOW = datetime(2025, 12, 31, 23, 0, tzinfo=ZoneInfo("Asia/Shanghai"))


def viewer_of(lease):  # type: ignore[no-untyped-def]
    from django.contrib.auth import get_user_model

    from accounts.choices import Role
    from accounts.models import Membership

    user, _ = get_user_model()._default_manager.get_or_create(username="bench-viewer")
    Membership.objects.get_or_create(user=user, tenant=lease.tenant, defaults={"role": Role.VIEWER})
    return user


def measure(client, path: str) -> dict:  # type: ignore[no-untyped-def]
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    reset_queries()  # the log is a bounded deque; a full one would slice to nothing
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    queries = len(captured.captured_queries)
    if response.status_code != 200:
        raise RuntimeError(f"{path}: HTTP {response.status_code}")
    times = []
    for _ in range(REPEAT):
        started = time.perf_counter()
        client.get(path)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "path": path,
        "bytes": len(response.content),
        "queries": queries,
        "p50_ms": round(statistics.median(times), 1),
        "p95_ms": round(times[min(len(times) - 1, int(len(times) * 0.95))], 1),
        "max_ms": round(times[-1], 1),
    }


def asset_sizes(html: str) -> dict:
    """The scripts and stylesheets a page links, raw and gzipped, read through the static
    files finders (what WhiteNoise serves)."""
    from django.contrib.staticfiles import finders

    names = re.findall(r'<script[^>]+src="/static/([^"?]+)', html) + re.findall(
        r'<link[^>]+rel="stylesheet"[^>]+href="/static/([^"?]+)', html
    )
    files = {}
    for name in sorted(set(names)):
        path = finders.find(name)
        if path is None:
            raise RuntimeError(f"{name} is not a static file (run make assets)")
        data = Path(path).read_bytes()
        files[name] = {"bytes": len(data), "gzip_bytes": len(gzip.compress(data, 9))}
    total = sum(one["gzip_bytes"] for one in files.values())
    return {"files": files, "gzip_total_bytes": total, "budget_bytes": ASSET_BUDGET_BYTES}


def main() -> dict:
    harness.BENCH_DB = bench_api.BENCH_DB
    harness.setup_django()
    from django.test import Client

    from leases.models import Lease

    results: dict = {"repeat": REPEAT, "pinned_now": PINNED_NOW.isoformat()}
    lease = Lease.objects.order_by("pk").first()
    if lease is None:
        bench_api.build_data(results)
        lease = Lease.objects.order_by("pk").first()
    bench_api.describe_data(results, lease.pk)

    import portal.selectors

    portal.selectors.now = lambda: PINNED_NOW  # type: ignore[assignment]
    client = Client(HTTP_ACCEPT_LANGUAGE="en", SERVER_NAME="127.0.0.1")
    client.force_login(viewer_of(lease))
    pages = {
        "lease_detail": f"/leases/{lease.pk}/",
        "lease_detail_year": f"/leases/{lease.pk}/?days=365",
        "lease_detail_past_month": f"/leases/{lease.pk}/?period=2025-06",
        "lease_sla_history": f"/leases/{lease.pk}/sla/",
        "overview": "/",
    }
    results["pages"] = {}
    for name, path in pages.items():
        figures = measure(client, path)
        results["pages"][name] = figures
        print(f"{name}: {figures}", flush=True)
    results["assets"] = asset_sizes(client.get(pages["lease_detail"]).content.decode())
    print(f"assets: {results['assets']}", flush=True)
    results["target_ms"] = TARGET_MS
    results["meets_target"] = (
        all(results["pages"][name]["p95_ms"] <= TARGET_MS for name in TARGET_PAGES)
        and results["assets"]["gzip_total_bytes"] <= ASSET_BUDGET_BYTES
    )
    harness.save("portal", results)
    return results


if __name__ == "__main__":
    sys.exit(0 if main()["meets_target"] else 1)
