"""Pay-per-use metering reads: traffic and 95th-percentile bandwidth of a lease over a
window, from the traffic samples (never raw runs).

``samples_in`` is the one selection of samples: invoices, these figures and the audit
bundle all read it. A sample is stamped with its slot's start
(``gpulease_verify.traffic``), so the samples of a billing period are those whose slot
lies in ``[period start, period end)``: the slot that starts at 23:55 on the last day is
the month's last one."""

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, NamedTuple

from django.db import connection
from django.db.models import F, OuterRef, Q, QuerySet, Sum
from django.db.models.expressions import Combinable, RawSQL

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
        TrafficRate(_slot(slot), seconds, int(tx), None if rx is None else int(rx))
        for slot, seconds, tx, rx, _nodes, _switch in _readings(
            samples_in(lease_id=lease_id, start=start, end=end)
            .filter(seconds__gt=0)
            .order_by("slot_at")
        )
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


class Reading(NamedTuple):
    """One traffic sample as the invoice's usage lines read it (a tuple: a month of them is
    built per lease, a frozen dataclass costs three times as much to make)."""

    slot_at: datetime
    seconds: int
    tx_bytes: int
    rx_bytes: int | None
    nodes: int
    switch_nodes: int


READING_FIELDS = ("seconds", "tx_bytes", "rx_bytes", "nodes", "switch_nodes")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _slot_column() -> Combinable:
    """The slot as PostgreSQL's microseconds since the epoch: psycopg parses a timestamptz
    from text with a regular expression (about 20 µs a value, most of the time a month of
    samples takes to read), an integer costs next to nothing and ``_slot`` rebuilds the
    same instant exactly. Other databases hand the datetime over as it is."""
    if connection.vendor == "postgresql":
        return RawSQL(
            '(EXTRACT(EPOCH FROM "billing_trafficsample"."slot_at") * 1000000)::bigint', ()
        )
    return F("slot_at")


def _slot(value: int | datetime) -> datetime:
    return EPOCH + timedelta(microseconds=value) if isinstance(value, int) else value


def _readings(samples: QuerySet[TrafficSample], *fields: str) -> Iterable[tuple[Any, ...]]:
    """``fields`` and then the reading's own of each sample, the slot first."""
    return samples.annotate(slot_value=_slot_column()).values_list(
        *fields, "slot_value", *READING_FIELDS
    )


class Samples:
    """A lease's samples read once (one query for a page of many leases): the same bytes,
    rates and counts as ``traffic_bytes``, ``traffic_rates`` and the sample facts the usage
    lines ask for, answered from memory for any window inside what was read."""

    def __init__(self, readings: Iterable[Reading]):
        self._readings = sorted(readings, key=lambda reading: reading.slot_at)
        self._slots = [reading.slot_at for reading in self._readings]

    @classmethod
    def read(cls, *, lease_id: int, start: datetime, end: datetime) -> "Samples":
        return cls(
            Reading(_slot(slot), seconds, int(tx), None if rx is None else int(rx), nodes, switch)
            for slot, seconds, tx, rx, nodes, switch in _readings(
                samples_in(lease_id=lease_id, start=start, end=end).order_by("slot_at")
            )
        )

    def between(self, start: datetime, end: datetime) -> list[Reading]:
        """The samples whose slot starts in [start, end), in slot order."""
        return self._readings[bisect_left(self._slots, start) : bisect_left(self._slots, end)]

    def bytes(self, start: datetime, end: datetime) -> int:
        return sum(reading.tx_bytes for reading in self.between(start, end))

    def rates(self, start: datetime, end: datetime) -> list[TrafficRate]:
        return [
            TrafficRate(r.slot_at, r.seconds, r.tx_bytes, r.rx_bytes)
            for r in self.between(start, end)
            if r.seconds > 0
        ]

    def facts(self, start: datetime, end: datetime) -> dict[str, Any]:
        """Count, first and last slot, node-slots and switch node-slots of the window."""
        inside = self.between(start, end)
        return {
            "count": len(inside),
            "first": inside[0].slot_at if inside else None,
            "last": inside[-1].slot_at if inside else None,
            "node_slots": sum(r.nodes for r in inside),
            "switch_slots": sum(r.switch_nodes for r in inside),
        }


def samples_of(windows: dict[int, tuple[datetime, datetime]]) -> dict[int, Samples]:
    """``Samples`` of many leases, each over its own window, in one query."""
    if not windows:
        return {}
    scope = Q()
    for lease_id, (start, end) in windows.items():
        scope |= Q(lease_id=lease_id, slot_at__gte=start, slot_at__lt=end)
    rows: dict[int, list[Reading]] = defaultdict(list)
    for lease_id, slot, seconds, tx, rx, nodes, switch in _readings(
        TrafficSample.objects.filter(scope).order_by("lease_id", "slot_at"), "lease_id"
    ):
        rows[lease_id].append(
            Reading(_slot(slot), seconds, int(tx), None if rx is None else int(rx), nodes, switch)
        )
    return {lease_id: Samples(rows[lease_id]) for lease_id in windows}
