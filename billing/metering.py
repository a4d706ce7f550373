"""Pay-per-use metering reads: traffic and 95th-percentile bandwidth of a lease over a
window, from the traffic samples (never raw runs).

``samples_in`` is the one selection of samples: invoices, these figures and the audit
bundle all read it. A sample is stamped with its slot's start
(``gpulease_verify.traffic``), so the samples of a billing period are those whose slot
lies in ``[period start, period end)``: the slot that starts at 23:55 on the last day is
the month's last one."""

from datetime import datetime
from decimal import Decimal

from django.db.models import OuterRef, QuerySet, Sum

from billing.models import TrafficSample
from gpulease_verify.calculations import P95Direction, P95Window, TrafficRate, p95_bandwidth


def samples_in(*, lease_id: int, start: datetime, end: datetime) -> QuerySet[TrafficSample]:
    """The lease's samples whose slot starts in [start, end)."""
    return TrafficSample.objects.filter(lease_id=lease_id, slot_at__gte=start, slot_at__lt=end)


def recent_samples(since: datetime) -> QuerySet[TrafficSample]:
    """The samples of the outer query's lease (``OuterRef("pk")``) whose slot starts at or
    after ``since`` and that span time, newest first: the dispatcher reads the latest one's
    rate to tell whether the lease is busy (``benchmarks.hooks.recent_traffic``)."""
    return TrafficSample.objects.filter(
        lease=OuterRef("pk"), slot_at__gte=since, seconds__gt=0
    ).order_by("-slot_at")


def traffic_bytes(*, lease_id: int, start: datetime, end: datetime) -> int:
    """Bytes the lease's nodes sent in the samples of [start, end)."""
    samples = samples_in(lease_id=lease_id, start=start, end=end)
    return int(samples.aggregate(total=Sum("tx_bytes"))["total"] or 0)


def bandwidth_samples_bps(*, lease_id: int, start: datetime, end: datetime) -> list[Decimal]:
    """Each sample's rate of bytes sent: bytes x 8 / seconds, unrounded."""
    return [sample.tx_bps for sample in traffic_rates(lease_id=lease_id, start=start, end=end)]


def traffic_rates(*, lease_id: int, start: datetime, end: datetime) -> list[TrafficRate]:
    """The window's samples in slot order as 95计费 reads them (bytes sent and received;
    ``calculations.TrafficRate``), those of no seconds left out."""
    return [
        TrafficRate(slot_at, seconds, int(tx), None if rx is None else int(rx))
        for slot_at, seconds, tx, rx in samples_in(lease_id=lease_id, start=start, end=end)
        .filter(seconds__gt=0)
        .order_by("slot_at")
        .values_list("slot_at", "seconds", "tx_bytes", "rx_bytes")
    ]


def p95_bps(
    *,
    lease_id: int,
    start: datetime,
    end: datetime,
    direction: str = P95Direction.TX,
    window: str = P95Window.MONTHLY,
    zone_name: str = "Asia/Shanghai",
) -> Decimal | None:
    """The bandwidth 95计费 bills for the window's samples, by the direction and window
    (``gpulease_verify.calculations.p95_bandwidth``)."""
    samples = traffic_rates(lease_id=lease_id, start=start, end=end)
    return p95_bandwidth(samples, direction=direction, window=window, zone_name=zone_name).p95_bps
