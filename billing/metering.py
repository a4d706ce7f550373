"""Pay-per-use metering reads: traffic and 95th-percentile bandwidth of a lease over a
window, from the traffic samples (never raw runs).

``samples_in`` is the one selection of samples: invoices, these figures and the audit
bundle all read it. A sample is stamped with its slot's start
(``gpulease_verify.traffic``), so the samples of a billing period are those whose slot
lies in ``[period start, period end)``: the slot that starts at 23:55 on the last day is
the month's last one."""

from datetime import datetime
from decimal import Decimal

from django.db.models import QuerySet, Sum

from billing.models import TrafficSample
from gpulease_verify.calculations import percentile_95


def samples_in(*, lease_id: int, start: datetime, end: datetime) -> QuerySet[TrafficSample]:
    """The lease's samples whose slot starts in [start, end)."""
    return TrafficSample.objects.filter(lease_id=lease_id, slot_at__gte=start, slot_at__lt=end)


def traffic_bytes(*, lease_id: int, start: datetime, end: datetime) -> int:
    """Bytes the lease's nodes sent in the samples of [start, end)."""
    samples = samples_in(lease_id=lease_id, start=start, end=end)
    return int(samples.aggregate(total=Sum("tx_bytes"))["total"] or 0)


def bandwidth_samples_bps(*, lease_id: int, start: datetime, end: datetime) -> list[Decimal]:
    """Each sample's rate: bytes x 8 / seconds, unrounded."""
    return [
        Decimal(tx_bytes) * 8 / seconds
        for tx_bytes, seconds in samples_in(lease_id=lease_id, start=start, end=end)
        .filter(seconds__gt=0)
        .values_list("tx_bytes", "seconds")
    ]


def p95_bps(*, lease_id: int, start: datetime, end: datetime) -> Decimal | None:
    """95th percentile of the window's samples (gpulease_verify.calculations.percentile_95)."""
    samples = bandwidth_samples_bps(lease_id=lease_id, start=start, end=end)
    return percentile_95(samples) if samples else None
