"""The running figures /metrics reads (``billing.running.refresh_running``): the time to
refresh 1,000 usage-billed leases' rows, as ingest does after rewriting their samples.

1,000 leases of 8 nodes (``bench_dispatcher.build``), half billed per GB and half by the
95th percentile, each with November 2026 (Asia/Shanghai) of 5-minute traffic samples up
to the 20th at 12:00 (5,616 samples a lease, generated in SQL), refreshed as of that
instant: each lease's month so far (its samples read, its usage lines computed) and one
upsert of the 1,000 rows. Then a scrape of /metrics over those leases, and a second
refresh (the rows exist: an update of each)."""

import os
import time
from datetime import datetime
from zoneinfo import ZoneInfo

from perf.harness import captured_queries, flush, peak_rss_mib, save, setup_django, timer

LEASES = int(os.environ.get("BENCH_RUNNING_LEASES", "1000"))
SHANGHAI = ZoneInfo("Asia/Shanghai")
START = datetime(2026, 11, 1, tzinfo=SHANGHAI)
NOW = datetime(2026, 11, 20, 12, tzinfo=SHANGHAI)

# Per lease, one sample every 5 minutes from START to NOW: 10 to 1,000 Mbit/s by a fixed
# pattern (bytes of 300 s = Mbit/s x 37,500,000).
SAMPLES_SQL = """
INSERT INTO billing_trafficsample (lease_id, slot_at, seconds, tx_bytes, rx_bytes, nodes,
    resets, wraps, switch_nodes)
SELECT l.id, s, 300, (10 + (extract(epoch FROM s)::bigint / 300 + l.id * 7) %% 991) * 37500000,
       NULL, 8, 0, 0, 0
FROM leases_lease l
CROSS JOIN generate_series(%(start)s::timestamptz, %(now)s::timestamptz - interval '5 minutes',
                           interval '5 minutes') AS s
WHERE l.id = ANY(%(leases)s)
"""


def build() -> list[int]:
    from decimal import Decimal

    from leases.choices import BillingMode
    from leases.models import Lease, LeaseTerms, NodeAssignment
    from perf.bench_dispatcher import build as build_fleet

    build_fleet(LEASES)
    Lease.objects.update(starts_at=datetime(2026, 9, 1, tzinfo=SHANGHAI))
    NodeAssignment.objects.update(assigned_from=datetime(2026, 9, 1, tzinfo=SHANGHAI))
    for index, terms in enumerate(LeaseTerms.objects.order_by("lease_id")):
        terms.effective_from = datetime(2026, 9, 1, tzinfo=SHANGHAI)
        terms.billing_mode = BillingMode.P95 if index % 2 else BillingMode.PER_GB
        terms.price_per_gb = Decimal("0.0300")
        terms.price_per_mbps_p95 = Decimal("0.4000")
        terms.save()
    return list(Lease.objects.order_by("pk").values_list("pk", flat=True))


def main() -> dict:
    setup_django()
    from django.db import connection

    from billing import running
    from billing.models import RunningFigure, TrafficSample
    from leases.models import Lease
    from monitoring import metrics

    flush()
    results: dict = {"leases": LEASES, "as_of": NOW.isoformat()}
    with timer(results, "build_leases_s"):
        lease_ids = build()
    with connection.cursor() as cursor, timer(results, "generate_samples_s"):
        cursor.execute(SAMPLES_SQL, {"start": START, "now": NOW, "leases": lease_ids})
        cursor.execute("ANALYZE billing_trafficsample")
    results["traffic_samples"] = TrafficSample.objects.count()
    leases = Lease.objects.filter(pk__in=lease_ids).select_related("tenant")
    windows = {lease.pk: (lease, START, NOW) for lease in leases}

    def refresh() -> int:
        return running.refresh_running(windows, instant=NOW)

    started = time.perf_counter()
    written, queries = captured_queries(refresh)
    results["refresh_s"] = round(time.perf_counter() - started, 3)
    results["rows_written"] = written
    results["refresh_queries"] = len(queries)
    results["refresh_ms_per_lease"] = round(results["refresh_s"] * 1000 / LEASES, 2)
    started = time.perf_counter()
    running.refresh_running(windows, instant=NOW)
    results["refresh_again_s"] = round(time.perf_counter() - started, 3)
    results["rows"] = RunningFigure.objects.count()
    # The scrape over the same leases (the credits at risk left out: they have their own
    # cache and budget, METRICS_CREDIT_REFRESH_PER_SCRAPE).
    from django.conf import settings

    settings.METRICS_CREDIT_REFRESH_PER_SCRAPE = 0
    metrics.selectors.now = lambda: NOW  # type: ignore[assignment]
    started = time.perf_counter()
    body, scrape_queries = captured_queries(metrics.exposition)
    results["scrape_s"] = round(time.perf_counter() - started, 3)
    results["scrape_queries"] = len(scrape_queries)
    results["scrape_running_series"] = body.count(b"gpulease_lease_amount_month_to_date_cny{")
    results["peak_rss_mib"] = peak_rss_mib()
    save("running", results)
    return results


if __name__ == "__main__":
    main()
