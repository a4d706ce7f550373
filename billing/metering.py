"""Pay-per-use metering reads: traffic and 95th-percentile bandwidth of a lease over a
window, from the traffic samples (never raw runs)."""

from datetime import datetime
from decimal import Decimal

from django.db.models import Sum

from billing.calculations import percentile_95
from billing.models import TrafficSample


def traffic_bytes(*, lease_id: int, start: datetime, end: datetime) -> int:
    """Bytes the lease's nodes sent in samples whose slot starts in [start, end)."""
    total = TrafficSample.objects.filter(
        lease_id=lease_id, slot_at__gte=start, slot_at__lt=end
    ).aggregate(total=Sum("tx_bytes"))["total"]
    return int(total or 0)


def bandwidth_samples_bps(*, lease_id: int, start: datetime, end: datetime) -> list[Decimal]:
    """Each sample's rate: bytes x 8 / seconds, unrounded."""
    return [
        Decimal(tx_bytes) * 8 / seconds
        for tx_bytes, seconds in TrafficSample.objects.filter(
            lease_id=lease_id, slot_at__gte=start, slot_at__lt=end, seconds__gt=0
        ).values_list("tx_bytes", "seconds")
    ]


def p95_bps(*, lease_id: int, start: datetime, end: datetime) -> Decimal | None:
    """95th percentile of the window's samples (billing.calculations.percentile_95)."""
    samples = bandwidth_samples_bps(lease_id=lease_id, start=start, end=end)
    return percentile_95(samples) if samples else None
