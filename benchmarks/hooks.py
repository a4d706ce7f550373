"""What benchmarks asks of the apps above it, which register from ``AppConfig.ready()`` (so
benchmarks imports none of them, and every process that loads the apps has them: web,
worker, beat, management commands).

- **Recent traffic.** The dispatcher defers a heavy probe while the lease is busy
  (``probe_idle_below_percent``), judged by the lease's latest traffic sample. Billing
  meters the traffic: ``billing.apps`` registers ``billing.metering.recent_samples``, the
  samples of the lease the dispatcher's query names (``OuterRef("pk")``) since an instant,
  newest first, whose ``tx_bytes`` and ``seconds`` the dispatcher reads as a subquery."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

RecentTraffic = Callable[[datetime], QuerySet[Any]]
_recent_traffic: list[RecentTraffic] = []


def set_recent_traffic(source: RecentTraffic) -> None:
    """Where ``recent_traffic`` reads a lease's latest traffic samples from."""
    _recent_traffic[:] = [source]


def recent_traffic_source() -> RecentTraffic | None:
    return _recent_traffic[0] if _recent_traffic else None


def recent_traffic(since: datetime) -> QuerySet[Any]:
    """The traffic samples of the outer query's lease (``OuterRef("pk")``) from ``since``
    that span time, newest first (``tx_bytes``, ``seconds``). Refuses when no app
    registered them: the dispatcher would never see a busy lease."""
    if not _recent_traffic:
        raise RuntimeError("no app registered the leases' recent traffic (billing.apps)")
    return _recent_traffic[0](since)
