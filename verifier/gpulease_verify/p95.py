"""95th percentile billing (95计费): the percentile, the billable Mbps and the
charge, by direction and window. Conventions: ``gpulease_verify.arithmetic``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import (
    ROUND_HALF_EVEN,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
    localcontext,
)
from enum import StrEnum
from zoneinfo import ZoneInfo

from gpulease_verify.arithmetic import _CONTEXT, ZERO_CNY, Number, _non_negative, _whole
from gpulease_verify.charges import prorate
from gpulease_verify.money import ROUNDING, to_fen

# A sample's rate, bytes x 8 / seconds, is carried to 28 significant digits (half-even):
# Python's default context, in which every rate an invoice line ever stated was computed,
# so a line billed before the rate had its one home here re-derives to the same digits.
_RATE_CONTEXT = Context(
    prec=28, rounding=ROUND_HALF_EVEN, traps=[InvalidOperation, DivisionByZero, Overflow]
)

P95_DROP_PERCENT = 5
BITS_PER_MBPS = 10**6
MBPS_QUANTUM = Decimal("0.01")


def percentile_95(samples_bps: Sequence[Number]) -> Decimal | None:
    """The 95th percentile of bandwidth samples, in bits/s, by the IDC convention.

    Rule: sort the samples (normally one per 5 minutes, in bits/s) from highest to lowest,
    drop the top ``floor(n * 5 / 100)`` of them and bill the highest remaining one. With
    8640 samples (30 days) 432 are dropped and the 433rd highest is billed. Equal samples
    are ordinary samples: ties need no special rule, and the billed value is always one of
    the samples (no interpolation).

    A partial period (a lease that starts or ends mid-month, or a gap in sampling) uses
    the same rule on the samples it has. With fewer than 20 samples nothing is dropped,
    so the maximum is billed; with 20 to 39 samples one is dropped.

    No rounding: the sample itself is returned as a Decimal. No samples -> None (there is
    nothing to bill; the caller decides, it is not zero by default).
    """
    values = [_non_negative(sample, "A bandwidth sample") for sample in samples_bps]
    if not values:
        return None
    values.sort(reverse=True)
    dropped = len(values) * P95_DROP_PERCENT // 100
    return values[dropped]


def billable_mbps(p95_bps: Number) -> Decimal:
    """Bits/s to billable Mbps: ``p95_bps / 10^6``, rounded half-up to 0.01 Mbps."""
    bps = _non_negative(p95_bps, "p95_bps")
    with localcontext(_CONTEXT):
        return (bps / BITS_PER_MBPS).quantize(MBPS_QUANTUM, rounding=ROUNDING)


def p95_charge(*, p95_bps: Number, price_per_mbps: Number) -> Decimal:
    """The 95计费 bandwidth charge in CNY.

    Rule: ``billable_mbps(p95_bps) * price_per_mbps``, where the Mbps figure is first
    rounded half-up to 0.01 Mbps (it is printed on the invoice and the charge must follow
    from the printed figure), then the product is rounded half-up to 0.01 CNY.
    """
    price = _non_negative(price_per_mbps, "price_per_mbps")
    with localcontext(_CONTEXT):
        return to_fen(billable_mbps(p95_bps) * price)


class P95Direction(StrEnum):
    """Which way 95计费 meters a lease's traffic (the terms' ``p95_direction``).

    - ``tx``: what the lease's nodes sent (the default, and the only rule before the
      field existed);
    - ``rx``: what they received;
    - ``max``: each interval's larger direction, ``max(tx, rx)``, then the 95th of that
      one series;
    - ``max_of_p95``: the 95th of each direction on its own, the larger of the two.
    """

    TX = "tx"
    RX = "rx"
    MAX = "max"
    MAX_OF_P95 = "max_of_p95"


class P95Window(StrEnum):
    """Over which samples the 95th is taken (the terms' ``p95_window``).

    - ``monthly``: every sample of the billed segment at once (the default);
    - ``daily_average``: the 95th of each calendar day in the tenant's zone, averaged
      over the days of the segment that have samples (``p95_bandwidth``).
    """

    MONTHLY = "monthly"
    DAILY_AVERAGE = "daily_average"


P95_DIRECTIONS = tuple(P95Direction)
P95_WINDOWS = tuple(P95Window)


@dataclass(frozen=True, slots=True)
class TrafficRate:
    """One traffic sample as 95计费 reads it: the slot ``[slot_at, slot_at + seconds)``,
    the bytes sent and received in it. ``rx_bytes`` None: not measured (samples stored
    before received bytes were metered)."""

    slot_at: datetime
    seconds: int
    tx_bytes: int
    rx_bytes: int | None = None

    def _rate(self, count: int) -> Decimal:
        with localcontext(_RATE_CONTEXT):
            return Decimal(_whole(count, "A sample's bytes")) * 8 / self.seconds

    @property
    def tx_bps(self) -> Decimal:
        """``tx_bytes x 8 / seconds`` to 28 significant digits (``_RATE_CONTEXT``)."""
        return self._rate(self.tx_bytes)

    @property
    def rx_bps(self) -> Decimal | None:
        """``rx_bytes x 8 / seconds`` likewise; None when not measured."""
        return None if self.rx_bytes is None else self._rate(self.rx_bytes)


@dataclass(frozen=True)
class P95Group:
    """The 95th of one group of samples (the whole segment, or one day) in one
    direction rule: ``p95_bps`` is what the group bills; ``tx_p95_bps`` and
    ``rx_p95_bps`` are each direction's own 95th (``max_of_p95`` bills the larger)."""

    samples: int
    dropped: int
    p95_bps: Decimal | None
    tx_p95_bps: Decimal | None = None
    rx_p95_bps: Decimal | None = None


@dataclass(frozen=True)
class P95Figure:
    """The billed bandwidth of a segment (``p95_bandwidth``): ``p95_bps`` in bits/s,
    unrounded; ``groups``: the one monthly group, or each day's (local date -> group)."""

    direction: P95Direction
    window: P95Window
    p95_bps: Decimal | None
    samples: int
    dropped: int
    groups: tuple[tuple[str | None, P95Group], ...]


def _direction_p95(samples: Sequence[TrafficRate], direction: P95Direction) -> P95Group:
    """One group's 95th by the direction rule (``P95Direction``). A sample of no seconds
    has no rate and is left out; under ``rx`` a sample whose received bytes were not
    measured is left out too, and under ``max`` its sent bytes are its larger figure."""
    timed = [sample for sample in samples if sample.seconds > 0]
    tx = [sample.tx_bps for sample in timed]
    rx = [rate for rate in (sample.rx_bps for sample in timed) if rate is not None]
    if direction == P95Direction.TX:
        series = tx
    elif direction == P95Direction.RX:
        series = rx
    elif direction == P95Direction.MAX:
        series = [
            max(sample.tx_bps, sample.rx_bps if sample.rx_bps is not None else sample.tx_bps)
            for sample in timed
        ]
    else:
        tx_p95, rx_p95 = percentile_95(tx), percentile_95(rx)
        known = [value for value in (tx_p95, rx_p95) if value is not None]
        return P95Group(
            samples=len(timed),
            dropped=len(timed) * P95_DROP_PERCENT // 100,
            p95_bps=max(known) if known else None,
            tx_p95_bps=tx_p95,
            rx_p95_bps=rx_p95,
        )
    return P95Group(
        samples=len(series),
        dropped=len(series) * P95_DROP_PERCENT // 100,
        p95_bps=percentile_95(series),
    )


def p95_bandwidth(
    samples: Sequence[TrafficRate],
    *,
    direction: str = P95Direction.TX,
    window: str = P95Window.MONTHLY,
    zone_name: str = "Asia/Shanghai",
) -> P95Figure:
    """The bandwidth 95计费 bills for one segment's samples, in bits/s, unrounded.

    The window makes the groups, the direction rule gives each group's 95th
    (``percentile_95``, on each sample's rate ``bytes x 8 / seconds``), the window puts
    them together:

    - ``monthly``: one group, every sample of the segment; its 95th is billed.
    - ``daily_average``: one group per calendar day of ``zone_name`` (a sample belongs to
      the day its slot starts in). A day the segment covers only in part (a lease that
      starts or ends mid-day, a terms version that takes effect mid-day) is a day like
      any other, with the samples it has (as a mid-month start is under ``monthly``); a
      day without any sample (nothing was metered, which is not zero traffic) is left
      out. Billed: the sum of the days' 95ths / the number of those days, unrounded
      (50 significant digits).

    ``max_of_p95`` under ``daily_average`` takes each day's larger direction, then the
    average. No samples at all -> ``p95_bps`` None (nothing to bill)."""
    rule, span = P95Direction(direction), P95Window(window)
    if span == P95Window.MONTHLY:
        group = _direction_p95(samples, rule)
        return P95Figure(rule, span, group.p95_bps, group.samples, group.dropped, ((None, group),))
    clock = ZoneInfo(zone_name)
    days: dict[str, list[TrafficRate]] = {}
    for sample in sorted(samples, key=lambda item: item.slot_at):
        days.setdefault(sample.slot_at.astimezone(clock).date().isoformat(), []).append(sample)
    groups = tuple((day, _direction_p95(found, rule)) for day, found in days.items())
    billed = [group.p95_bps for _day, group in groups if group.p95_bps is not None]
    with localcontext(_CONTEXT):
        average = sum(billed, Decimal(0)) / len(billed) if billed else None
    return P95Figure(
        rule,
        span,
        average,
        sum(group.samples for _day, group in groups),
        sum(group.dropped for _day, group in groups),
        tuple((day, group) for day, group in groups if group.p95_bps is not None),
    )


@dataclass(frozen=True)
class P95Line:
    """A 95计费 invoice line's figures (``p95_line``)."""

    figure: P95Figure
    billable_mbps: Decimal
    amount: Decimal


def p95_line(
    samples: Sequence[TrafficRate],
    *,
    direction: str,
    window: str,
    zone_name: str,
    price_per_mbps: Number,
    segment_seconds: int,
    month_seconds: int,
) -> P95Line:
    """The 95计费 line of one segment: ``p95_bandwidth`` in billable Mbps (half-up to 0.01
    Mbps; 0.00 without samples) x ``price_per_mbps`` x ``segment_seconds /
    month_seconds``, rounded half-up to 0.01 CNY once. The invoice, the month-to-date
    estimate and the verifier all price the line with this."""
    figure = p95_bandwidth(samples, direction=direction, window=window, zone_name=zone_name)
    mbps = billable_mbps(figure.p95_bps) if figure.p95_bps is not None else ZERO_CNY
    price = _non_negative(price_per_mbps, "price_per_mbps")
    amount = to_fen(
        prorate(
            monthly_amount=mbps * price,
            covered_seconds=segment_seconds,
            period_seconds=month_seconds,
        )
    )
    return P95Line(figure, mbps, amount)


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)


def p95_detail(figure: P95Figure) -> dict[str, object]:
    """What an invoice line states of its 95th, all text (the audit bundle carries it and
    the verifier re-derives every key): the direction and window, the billed p95, each
    direction's own 95th under ``max_of_p95``, and each day's 95th under
    ``daily_average``. ``p95_bps`` itself is stated by the line's caller."""
    detail: dict[str, object] = {
        "p95_direction": str(figure.direction),
        "p95_window": str(figure.window),
    }
    if figure.window == P95Window.MONTHLY and figure.direction == P95Direction.MAX_OF_P95:
        ((_day, group),) = figure.groups
        detail["tx_p95_bps"] = _text(group.tx_p95_bps)
        detail["rx_p95_bps"] = _text(group.rx_p95_bps)
    if figure.window == P95Window.DAILY_AVERAGE:
        detail["days"] = len(figure.groups)
        detail["daily_p95_bps"] = [
            {
                "day": day,
                "samples": group.samples,
                "p95_bps": _text(group.p95_bps),
                **(
                    {"tx_p95_bps": _text(group.tx_p95_bps), "rx_p95_bps": _text(group.rx_p95_bps)}
                    if figure.direction == P95Direction.MAX_OF_P95
                    else {}
                ),
            }
            for day, group in figure.groups
        ]
    return detail
