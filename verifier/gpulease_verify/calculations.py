"""Pure billing arithmetic: 95th percentile, traffic metering, proration, SLA credits,
invoice totals, network cost share and the training-impact estimate.

No ORM and no Django here. An auditor recomputes an invoice with this module, the
contract terms and the raw measurements alone, so every function states its rule and its
rounding in its docstring.

Conventions for the whole module:

- Money is ``Decimal`` CNY. The only roundings are the named ones, always ``ROUND_HALF_UP``
  (half away from zero, ``gpulease_verify.money.ROUNDING``), and each happens once, at the point the
  docstring names.
- Inputs are ``int`` or ``Decimal``; a ``float`` (or ``bool``) is refused with ``TypeError``
  because its binary value would leak into the money.
- Intermediate arithmetic runs in a fixed Decimal context of 50 significant digits
  (``ROUND_HALF_EVEN`` for those far digits only), independent of the caller's context.
  A quotient that does not terminate (45,000 x 1/3) is therefore carried to 50 digits
  before the one named rounding.
- Bandwidth is in bits per second, traffic in bytes, time in seconds (``Decimal``).
  Mbps = 10^6 bits/s, GB = 10^9 bytes, GB/s = 10^9 bytes/s (decimal units, as in the
  contracts and in nccl-tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
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
from itertools import pairwise
from zoneinfo import ZoneInfo

from gpulease_verify.money import FEN, ROUNDING, to_fen

Number = int | Decimal

# Intermediate precision; see the module docstring.
_CONTEXT = Context(
    prec=50, rounding=ROUND_HALF_EVEN, traps=[InvalidOperation, DivisionByZero, Overflow]
)

# A sample's rate, bytes x 8 / seconds, is carried to 28 significant digits (half-even):
# Python's default context, in which every rate an invoice line ever stated was computed,
# so a line billed before the rate had its one home here re-derives to the same digits.
_RATE_CONTEXT = Context(
    prec=28, rounding=ROUND_HALF_EVEN, traps=[InvalidOperation, DivisionByZero, Overflow]
)

P95_DROP_PERCENT = 5
BITS_PER_MBPS = 10**6
BYTES_PER_GB = 10**9
MBPS_QUANTUM = Decimal("0.01")
SHARE_QUANTUM = Decimal("0.0001")
# A wrap is plausible when the bytes it implies stay within max rate x interval x 1.1.
WRAP_TOLERANCE = Decimal("1.1")
HUNDRED = Decimal(100)
ZERO_CNY = Decimal("0.00")


def _dec(value: Number, name: str) -> Decimal:
    """An exact Decimal of an int or Decimal; floats and bools are refused."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise TypeError(f"{name} must be an int or a Decimal, not {type(value).__name__}.")
    result = Decimal(value)
    if not result.is_finite():
        raise ValueError(f"{name} must be a finite number, not {result}.")
    return result


def _non_negative(value: Number, name: str) -> Decimal:
    result = _dec(value, name)
    if result < 0:
        raise ValueError(f"{name} cannot be negative ({result}).")
    return result


def _positive(value: Number, name: str) -> Decimal:
    result = _dec(value, name)
    if result <= 0:
        raise ValueError(f"{name} must be greater than zero ({result}).")
    return result


def _whole(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}.")
    return value


# --------------------------------------------------------------------------------------
# 1. 95th percentile billing (95计费)
# --------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------
# 2. Traffic metering from NIC byte counters (按量计费)
# --------------------------------------------------------------------------------------


class DeltaKind(StrEnum):
    NORMAL = "normal"
    WRAP = "wrap"
    RESET = "reset"


@dataclass(frozen=True, slots=True)
class Delta:
    """Bytes counted between two consecutive readings of one counter."""

    start: datetime
    end: datetime
    bytes: int
    kind: DeltaKind

    @property
    def seconds(self) -> Decimal:
        """The interval in seconds, exact to the microsecond."""
        return Decimal((self.end - self.start) // timedelta(microseconds=1)) / 10**6

    @property
    def rate_bps(self) -> Decimal:
        """The average rate over the interval, ``bytes * 8 / seconds`` in bits/s, unrounded
        (50 significant digits): the 5-minute sample that feeds ``percentile_95``."""
        with localcontext(_CONTEXT):
            return Decimal(self.bytes * 8) / self.seconds


def counter_deltas(
    readings: Sequence[tuple[datetime, int]],
    *,
    counter_bits: int = 64,
    max_rate_bps: int | None = None,
) -> list[Delta]:
    """Bytes between consecutive readings of a monotonic NIC byte counter.

    ``readings`` are ``(time, counter value)`` in strictly increasing time; a counter value
    is ``0 <= value < 2**counter_bits``. For each consecutive pair ``(prev, new)``:

    - ``new >= prev``: ``normal``, ``bytes = new - prev``.
    - ``new < prev`` and a wrap is plausible: ``wrap``, ``bytes = 2**counter_bits - prev
      + new`` (the counter passed its maximum once).
    - ``new < prev`` otherwise: ``reset`` (the counter restarted from 0: driver reload,
      reboot, NIC replaced), ``bytes = new``. The bytes counted between ``prev`` and the
      restart are unknown and are not billed: a reset can only under-bill.

    A wrap is plausible when:

    - ``max_rate_bps`` is given (the port speed): the wrapped byte count does not exceed
      ``max_rate_bps * interval_seconds / 8 * 1.1`` (10% tolerance for clock skew between
      poller and NIC). Compared exactly in integers.
    - ``max_rate_bps`` is not given: only for counters of 32 bits or fewer. A 64-bit byte
      counter takes over eleven years to wrap at 400 Gbps, so going backwards is a reset.

    Only one wrap per interval can be seen. A 32-bit byte counter wraps every 0.34 s at
    100 Gbps, so for fast ports only 64-bit counters (Linux ``/sys/class/net/*/statistics``
    and ``ethtool -S`` on 64-bit kernels) give trustworthy traffic.
    """
    bits = _whole(counter_bits, "counter_bits")
    if bits <= 0:
        raise ValueError("counter_bits must be positive.")
    modulus = 2**bits
    if max_rate_bps is not None and (_whole(max_rate_bps, "max_rate_bps") <= 0):
        raise ValueError("max_rate_bps must be greater than zero.")
    for when, value in readings:
        _whole(value, "A counter reading")
        if not 0 <= value < modulus:
            raise ValueError(f"Counter reading {value} at {when} does not fit in {bits} bits.")

    deltas: list[Delta] = []
    for (start, prev), (end, new) in pairwise(readings):
        if end <= start:
            raise ValueError(f"Readings must be in strictly increasing time: {end} after {start}.")
        if new >= prev:
            deltas.append(Delta(start=start, end=end, bytes=new - prev, kind=DeltaKind.NORMAL))
            continue
        wrapped = modulus - prev + new
        if max_rate_bps is None:
            plausible = bits <= 32
        else:
            # wrapped <= max_rate_bps * interval_us / 10^6 / 8 * 11/10, in integers.
            interval_us = (end - start) // timedelta(microseconds=1)
            plausible = wrapped * 8 * 10 * 10**6 <= max_rate_bps * interval_us * 11
        if plausible:
            deltas.append(Delta(start=start, end=end, bytes=wrapped, kind=DeltaKind.WRAP))
        else:
            deltas.append(Delta(start=start, end=end, bytes=new, kind=DeltaKind.RESET))
    return deltas


def bytes_to_gb(byte_count: int) -> Decimal:
    """Bytes to GB, GB = 10^9 bytes (not GiB). Exact: no rounding."""
    count = _whole(byte_count, "byte_count")
    if count < 0:
        raise ValueError("byte_count cannot be negative.")
    return Decimal(count).scaleb(-9, _CONTEXT)


def traffic_charge(*, total_bytes: int, price_per_gb: Number) -> Decimal:
    """The pay-per-use traffic charge in CNY.

    Rule: ``bytes_to_gb(total_bytes) * price_per_gb``, rounded half-up to 0.01 CNY. The GB
    figure is exact and is *not* rounded before the multiplication (unlike 95计费's Mbps),
    so the charge is the same whether traffic is summed in bytes or in GB.
    """
    price = _non_negative(price_per_gb, "price_per_gb")
    with localcontext(_CONTEXT):
        return to_fen(bytes_to_gb(total_bytes) * price)


# --------------------------------------------------------------------------------------
# 3. Proration (node rent per node-month)
# --------------------------------------------------------------------------------------


def overlap_seconds(
    *, start: datetime, end: datetime | None, period_start: datetime, period_end: datetime
) -> int:
    """Whole seconds of ``[start, end)`` that fall inside ``[period_start, period_end)``.

    ``end=None`` means open-ended (still assigned). No overlap -> 0. A fraction of a second
    is dropped (floor); assignments normally start and end on whole seconds.
    """
    if period_end < period_start:
        raise ValueError("The period ends before it starts.")
    if end is not None and end < start:
        raise ValueError("The interval ends before it starts.")
    lo = max(start, period_start)
    hi = period_end if end is None else min(end, period_end)
    if hi <= lo:
        return 0
    return (hi - lo) // timedelta(seconds=1)


def prorate(*, monthly_amount: Number, covered_seconds: int, period_seconds: int) -> Decimal:
    """``monthly_amount * covered_seconds / period_seconds``, *unrounded* (50 digits).

    Rounding happens once per invoice line, after the prorated parts of that line are
    summed (see ``node_rent_line``). ``covered_seconds`` may exceed ``period_seconds`` when
    it counts node-seconds of several nodes.
    """
    amount = _dec(monthly_amount, "monthly_amount")
    covered = _whole(covered_seconds, "covered_seconds")
    period = _whole(period_seconds, "period_seconds")
    if covered < 0:
        raise ValueError("covered_seconds cannot be negative.")
    if period <= 0:
        raise ValueError("period_seconds must be greater than zero.")
    with localcontext(_CONTEXT):
        return amount * covered / period


@dataclass(frozen=True, slots=True)
class NodeRentLine:
    node_seconds: int
    period_seconds: int
    amount: Decimal


def node_rent_line(
    *,
    monthly_rate: Number,
    assignments: Sequence[tuple[datetime, datetime | None]],
    period_start: datetime,
    period_end: datetime,
) -> NodeRentLine:
    """One invoice line of node rent for a billing period.

    Rule: ``node_seconds`` = the sum over assignments ``[from, until)`` (``until=None`` =
    still assigned) of their whole seconds inside the period (``overlap_seconds``); a node
    swap is two assignments, several nodes are several assignments. ``amount =
    monthly_rate * node_seconds / period_seconds``, rounded half-up to 0.01 CNY once, on
    the sum (never per assignment: three nodes of a third of a month at 100.00 are 100.00,
    not 3 x 33.33).
    """
    period = (period_end - period_start) // timedelta(seconds=1)
    node_seconds = sum(
        overlap_seconds(start=start, end=end, period_start=period_start, period_end=period_end)
        for start, end in assignments
    )
    amount = prorate(
        monthly_amount=monthly_rate, covered_seconds=node_seconds, period_seconds=period
    )
    return NodeRentLine(node_seconds=node_seconds, period_seconds=period, amount=to_fen(amount))


# --------------------------------------------------------------------------------------
# 4. SLA credits
# --------------------------------------------------------------------------------------


def credit_percent(
    *, compliance_percent: Number, tiers: Sequence[tuple[Decimal, Decimal]]
) -> Decimal:
    """The credit percentage the tier table gives for a monthly compliance.

    ``tiers`` are ``(below_percent, credit_percent)`` pairs as returned by
    ``leases.contract_rules.credit_tiers`` (any order works). A tier applies when
    compliance is *strictly* below its ``below_percent``: exactly at the boundary earns
    nothing from that tier (99.5 with "below 99.5" -> 0). When several tiers apply the
    largest credit wins. No tier applies -> 0. No rounding; the cap is applied in
    ``sla_credit``.
    """
    compliance = _dec(compliance_percent, "compliance_percent")
    if not 0 <= compliance <= 100:
        raise ValueError(f"Compliance must be between 0 and 100 percent, not {compliance}.")
    earned = [credit for below, credit in tiers if compliance < below]
    return max(earned, default=Decimal(0))


class CreditReason(StrEnum):
    COMPLIANCE_UNKNOWN = "compliance_unknown"  # no usable measurements: no credit
    NO_TIER = "no_tier"  # compliance at or above every tier
    TIER = "tier"  # a tier's percentage applied
    CAPPED = "capped"  # a tier applied but the cap was lower


@dataclass(frozen=True, slots=True)
class CreditResult:
    """``amount`` is the invoice line: negative (a deduction) or 0.00, never positive."""

    percent_applied: Decimal
    tier_percent: Decimal
    amount: Decimal
    capped: bool
    reason: CreditReason


def sla_credit(
    *,
    base: Number,
    compliance_percent: Number | None,
    tiers: Sequence[tuple[Decimal, Decimal]],
    cap_percent: Number,
) -> CreditResult:
    """The SLA credit on the credit base for one billing period (the network fee billed,
    the usage charge or a contracted base, as the terms' ``credit_base`` says).

    Rule: ``percent_applied = min(credit_percent(compliance, tiers), cap_percent)``;
    ``amount = -(base * percent_applied / 100)`` with the magnitude rounded half-up
    to 0.01 CNY.

    Sign convention: the credit is a deduction, so ``amount`` is negative (or 0.00) and
    goes on the invoice as is, a negative line. ``percent_applied`` and ``tier_percent``
    are positive percentages.

    ``compliance_percent=None`` (compliance unknown: no measurement in the period) gives no
    credit, with reason ``compliance_unknown``; whether missing evidence should count
    against the provider is a contract question decided before this function.
    """
    fee = _non_negative(base, "base")
    cap = _non_negative(cap_percent, "cap_percent")
    if cap > 100:
        raise ValueError(f"The credit cap cannot exceed 100 percent ({cap}).")
    if compliance_percent is None:
        return CreditResult(
            percent_applied=Decimal(0),
            tier_percent=Decimal(0),
            amount=ZERO_CNY,
            capped=False,
            reason=CreditReason.COMPLIANCE_UNKNOWN,
        )
    tier = credit_percent(compliance_percent=compliance_percent, tiers=tiers)
    if tier == 0:
        return CreditResult(
            percent_applied=Decimal(0),
            tier_percent=tier,
            amount=ZERO_CNY,
            capped=False,
            reason=CreditReason.NO_TIER,
        )
    capped = tier > cap
    applied = cap if capped else tier
    with localcontext(_CONTEXT):
        magnitude = to_fen(fee * applied / HUNDRED)
    return CreditResult(
        percent_applied=applied,
        tier_percent=tier,
        amount=-magnitude if magnitude else ZERO_CNY,
        capped=capped,
        reason=CreditReason.CAPPED if capped else CreditReason.TIER,
    )


# --------------------------------------------------------------------------------------
# 5. Invoice totals
# --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RateGroup:
    """The lines of an invoice taxed at one rate: their sum, and its tax rounded once."""

    tax_rate_percent: Decimal
    subtotal: Decimal
    tax: Decimal

    @property
    def total(self) -> Decimal:
        return self.subtotal + self.tax


@dataclass(frozen=True, slots=True)
class Totals:
    subtotal: Decimal
    tax: Decimal
    total: Decimal
    groups: tuple[RateGroup, ...] = ()


def _fen_amount(value: Number) -> Decimal:
    amount = _dec(value, "An invoice line")
    if amount != amount.quantize(FEN, rounding=ROUNDING):
        raise ValueError(f"Invoice line {amount} is not rounded to 0.01 CNY.")
    return amount


def invoice_totals_by_rate(lines: Sequence[tuple[Number, Number]]) -> Totals:
    """Subtotal, tax and total of an invoice (or a credit note) whose lines carry their
    own VAT rate: ``lines`` are (amount, tax rate percent) pairs.

    Rule: every amount is already rounded to 0.01 CNY (refused otherwise, ``ValueError``);
    credits are negative lines. The lines are grouped by rate (rates compared as numbers,
    so 6 and 6.00 are one group); per group, ``subtotal`` = the exact sum of its amounts
    and ``tax = subtotal x rate / 100`` rounded half-up to 0.01 CNY, once per group. The
    invoice's ``subtotal`` = the sum of the lines, ``tax`` = the sum of the group taxes,
    ``total = subtotal + tax``. ``groups`` lists the groups by ascending rate. Rounding
    once per group, not per line: 3 lines of 0.10 at 6% are 0.30 x 6% = 0.018 -> 0.02,
    where per line each 0.006 -> 0.01 would make 0.03.
    """
    sums: dict[Decimal, Decimal] = {}
    with localcontext(_CONTEXT):
        for amount, rate in lines:
            key = _non_negative(rate, "tax_rate_percent")
            if key == key.quantize(FEN):
                key = key.quantize(FEN)  # 6 and 6.00 are one group, printed 6.00
            sums[key] = sums.get(key, ZERO_CNY) + _fen_amount(amount)
        groups = tuple(
            RateGroup(rate, total.quantize(FEN), to_fen(total * rate / HUNDRED))
            for rate, total in sorted(sums.items())
        )
        subtotal = sum((group.subtotal for group in groups), ZERO_CNY)
        tax = sum((group.tax for group in groups), ZERO_CNY)
        return Totals(subtotal=subtotal, tax=tax, total=subtotal + tax, groups=groups)


def invoice_totals(*, lines: Sequence[Number], tax_rate_percent: Number) -> Totals:
    """Subtotal, tax and total of an invoice whose lines all carry one rate: one rate
    group (``invoice_totals_by_rate``), so the tax is rounded once, on the subtotal. The
    printed lines plus the printed tax always add up to the printed total, to the fen."""
    return invoice_totals_by_rate([(amount, tax_rate_percent) for amount in lines])


# --------------------------------------------------------------------------------------
# 6. Network cost share
# --------------------------------------------------------------------------------------


def network_cost_share(
    *, node_rent: Number, network_fee: Number, usage: Number = 0
) -> Decimal | None:
    """The share of the network in the bill, as a fraction (0.1304 = 13.04%).

    Rule: ``(network_fee + usage) / (node_rent + network_fee + usage)``, all before credits
    and tax, rounded half-up to 4 decimals. ``usage`` is the traffic or 95计费 charge.
    A zero denominator -> None. DOMAIN.md: 10-15% is typical for 8x A100 on 100G.
    """
    rent = _non_negative(node_rent, "node_rent")
    fee = _non_negative(network_fee, "network_fee")
    use = _non_negative(usage, "usage")
    denominator = rent + fee + use
    if denominator == 0:
        return None
    with localcontext(_CONTEXT):
        return ((fee + use) / denominator).quantize(SHARE_QUANTUM, rounding=ROUNDING)


# --------------------------------------------------------------------------------------
# 7. Training impact (an estimate, not a billed amount)
# --------------------------------------------------------------------------------------


def allreduce_seconds(
    *, parameters: int, bytes_per_parameter: Number, gpus: int, busbw_bps: Number
) -> Decimal:
    """Seconds per step to all-reduce the gradients, by the ring algorithm.

    Rule: each GPU moves ``2(N-1)/N * parameters * bytes_per_parameter`` bytes; nccl-tests'
    bus bandwidth already includes the ``2(N-1)/N`` factor (busbw = algbw * 2(N-1)/N), so
    ``t_comm = parameters * bytes_per_parameter * 2(N-1)/N / (busbw_bps / 8)``.
    ``busbw_bps`` is in bits/s (100 GB/s = 8 * 10^11 bits/s). One GPU -> 0. Latency terms
    and bucket overheads are ignored. Unrounded Decimal seconds.
    """
    params = _whole(parameters, "parameters")
    n = _whole(gpus, "gpus")
    width = _positive(bytes_per_parameter, "bytes_per_parameter")
    busbw = _positive(busbw_bps, "busbw_bps")
    if params < 0:
        raise ValueError("parameters cannot be negative.")
    if n < 1:
        raise ValueError("gpus must be at least 1.")
    with localcontext(_CONTEXT):
        moved = params * width * 2 * (n - 1) / n
        return moved * 8 / busbw


def communication_share(*, t_comm: Number, t_compute: Number) -> Decimal:
    """``t_comm / (t_comm + t_compute)``, unrounded.

    Assumes no overlap of compute and communication, so it is an upper bound: frameworks
    overlap the all-reduce of early buckets with the backward pass of later layers.
    """
    comm = _non_negative(t_comm, "t_comm")
    compute = _non_negative(t_compute, "t_compute")
    if comm + compute == 0:
        raise ValueError("A step cannot take zero time.")
    with localcontext(_CONTEXT):
        return comm / (comm + compute)


def gpu_hour_price(
    *, node_rent_per_month: Number, gpus_per_node: int, month_hours: Number
) -> Decimal:
    """CNY per GPU-hour: ``node_rent_per_month / gpus_per_node / month_hours``, unrounded
    (a rate, not an amount: 45,000 / 8 / 720 = 7.8125)."""
    rent = _non_negative(node_rent_per_month, "node_rent_per_month")
    gpus = _whole(gpus_per_node, "gpus_per_node")
    hours = _positive(month_hours, "month_hours")
    if gpus < 1:
        raise ValueError("gpus_per_node must be at least 1.")
    with localcontext(_CONTEXT):
        return rent / gpus / hours


def _step_seconds(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds: Decimal,
    busbw_bps: Decimal,
) -> Decimal:
    t_comm = allreduce_seconds(
        parameters=parameters,
        bytes_per_parameter=bytes_per_parameter,
        gpus=gpus,
        busbw_bps=busbw_bps,
    )
    with localcontext(_CONTEXT):
        step = compute_seconds + t_comm
    if step == 0:
        raise ValueError("A step cannot take zero time.")
    return step


def gpu_hours_lost(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds_per_step: Number,
    measured_busbw_bps: Number,
    reference_busbw_bps: Number,
    wall_hours: Number,
) -> Decimal:
    """GPU-hours a data-parallel job loses by running its all-reduce at the measured
    instead of the reference bus bandwidth, unrounded.

    Rule: ``gpus * wall_hours * (1 - t_step(reference) / t_step(measured))``, with
    ``t_step = compute_seconds_per_step + allreduce_seconds(...)``: of the wall hours run at
    the measured bandwidth, the share the same steps would not have needed at the
    reference one. 0 when measured >= reference (a network that beats the reference
    earns nothing back).
    """
    return _hours_lost(
        parameters=parameters,
        bytes_per_parameter=bytes_per_parameter,
        gpus=gpus,
        compute_seconds_per_step=compute_seconds_per_step,
        measured=[measured_busbw_bps],
        reference_busbw_bps=reference_busbw_bps,
        wall_hours=wall_hours,
    )[0]


def _hours_lost(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds_per_step: Number,
    measured: Sequence[Number],
    reference_busbw_bps: Number,
    wall_hours: Number,
) -> list[Decimal]:
    """``gpu_hours_lost`` for each of ``measured`` against one reference: the reference
    step is computed once, and each distinct measured figure once (a month's hours)."""
    compute = _non_negative(compute_seconds_per_step, "compute_seconds_per_step")
    wall = _non_negative(wall_hours, "wall_hours")
    reference = _positive(reference_busbw_bps, "reference_busbw_bps")
    figures = [_positive(one, "measured_busbw_bps") for one in measured]

    def step(busbw: Decimal) -> Decimal:
        return _step_seconds(
            parameters=parameters,
            bytes_per_parameter=bytes_per_parameter,
            gpus=gpus,
            compute_seconds=compute,
            busbw_bps=busbw,
        )

    t_step_r: Decimal | None = None
    known: dict[Decimal, Decimal] = {}
    lost = []
    for figure in figures:
        if figure >= reference:
            lost.append(Decimal(0))
            continue
        if figure not in known:
            if t_step_r is None:
                t_step_r = step(reference)
            t_step_m = step(figure)
            with localcontext(_CONTEXT):
                known[figure] = gpus * wall * (1 - t_step_r / t_step_m)
        lost.append(known[figure])
    return lost


@dataclass(frozen=True, slots=True)
class TrainingImpact:
    """Seconds, shares and factors are unrounded Decimals; ``cost_lost`` is CNY to 0.01."""

    t_comm_measured_s: Decimal
    t_comm_contracted_s: Decimal
    t_step_measured_s: Decimal
    t_step_contracted_s: Decimal
    comm_share_measured: Decimal
    comm_share_contracted: Decimal
    slowdown: Decimal
    gpu_hours_lost: Decimal
    cost_lost: Decimal


def training_impact(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds_per_step: Number,
    measured_busbw_bps: Number,
    contracted_busbw_bps: Number,
    wall_hours: Number,
    gpu_hour_price: Number,
) -> TrainingImpact:
    """What the shortfall of measured against contracted bus bandwidth cost a
    data-parallel training job. An estimate for the customer report, never billed.

    Rule, with ``t_comm`` from ``allreduce_seconds`` and no compute/communication overlap
    (an upper bound):

    - ``t_step = compute_seconds_per_step + t_comm``, at measured and at contracted busbw;
    - ``slowdown = t_step_measured / t_step_contracted`` (below 1 when the network beat
      the contract);
    - ``gpu_hours_lost``: ``gpu_hours_lost`` with the contracted bandwidth as reference;
    - ``cost_lost = gpu_hours_lost * gpu_hour_price``, rounded half-up to 0.01 CNY.
    """
    compute = _non_negative(compute_seconds_per_step, "compute_seconds_per_step")
    price = _non_negative(gpu_hour_price, "gpu_hour_price")
    measured = _positive(measured_busbw_bps, "measured_busbw_bps")
    contracted = _positive(contracted_busbw_bps, "contracted_busbw_bps")
    t_comm_m, t_comm_c = (
        allreduce_seconds(
            parameters=parameters,
            bytes_per_parameter=bytes_per_parameter,
            gpus=gpus,
            busbw_bps=busbw,
        )
        for busbw in (measured, contracted)
    )
    lost_hours = gpu_hours_lost(
        parameters=parameters,
        bytes_per_parameter=bytes_per_parameter,
        gpus=gpus,
        compute_seconds_per_step=compute,
        measured_busbw_bps=measured,
        reference_busbw_bps=contracted,
        wall_hours=wall_hours,
    )
    with localcontext(_CONTEXT):
        t_step_m = compute + t_comm_m
        t_step_c = compute + t_comm_c
        if t_step_m == 0:
            raise ValueError("A step cannot take zero time.")
        return TrainingImpact(
            t_comm_measured_s=t_comm_m,
            t_comm_contracted_s=t_comm_c,
            t_step_measured_s=t_step_m,
            t_step_contracted_s=t_step_c,
            comm_share_measured=communication_share(t_comm=t_comm_m, t_compute=compute),
            comm_share_contracted=communication_share(t_comm=t_comm_c, t_compute=compute),
            slowdown=t_step_m / t_step_c,
            gpu_hours_lost=lost_hours,
            cost_lost=to_fen(lost_hours * price),
        )


@dataclass(frozen=True, slots=True)
class ImpactSegment:
    """Elapsed time under one terms version and what was measured in it: the mean bus
    bandwidth of each measured hour, in bits/s."""

    wall_hours: Decimal
    gpus: int
    hourly_busbw_bps: tuple[Decimal, ...]
    contracted_busbw_bps: Decimal
    sla_threshold_percent: Decimal
    gpu_hour_price: Decimal

    @property
    def threshold_busbw_bps(self) -> Decimal:
        """What the SLA guarantees: ``sla_threshold_percent`` of the contracted, exact."""
        with localcontext(_CONTEXT):
            return self.contracted_busbw_bps * self.sla_threshold_percent / HUNDRED


@dataclass(frozen=True, slots=True)
class Shortfall:
    """GPU-hours unrounded; ``cny`` to the fen."""

    gpu_hours: Decimal
    cny: Decimal


@dataclass(frozen=True, slots=True)
class SegmentShortfalls:
    below_threshold: Shortfall
    below_contract: Shortfall


@dataclass(frozen=True, slots=True)
class TrainingShortfalls:
    """Totals over the segments, and each segment's own figures in the same order."""

    below_threshold: Shortfall
    below_contract: Shortfall
    segments: tuple[SegmentShortfalls, ...]


@dataclass(frozen=True, slots=True)
class _JobModel:
    parameters: int
    bytes_per_parameter: Number
    compute_seconds_per_step: Number


def _segment_shortfall(
    segment: ImpactSegment, *, reference_bps: Decimal, model: _JobModel
) -> Shortfall:
    if not segment.hourly_busbw_bps or reference_bps <= 0:
        return Shortfall(gpu_hours=Decimal(0), cny=ZERO_CNY)
    lost = _hours_lost(
        parameters=model.parameters,
        bytes_per_parameter=model.bytes_per_parameter,
        compute_seconds_per_step=model.compute_seconds_per_step,
        gpus=segment.gpus,
        measured=segment.hourly_busbw_bps,
        reference_busbw_bps=reference_bps,
        wall_hours=segment.wall_hours,
    )
    with localcontext(_CONTEXT):
        hours = sum(lost, Decimal(0)) / len(lost)
        return Shortfall(gpu_hours=hours, cny=to_fen(hours * segment.gpu_hour_price))


def _total(parts: Sequence[Shortfall]) -> Shortfall:
    with localcontext(_CONTEXT):
        return Shortfall(
            gpu_hours=sum((part.gpu_hours for part in parts), Decimal(0)),
            cny=sum((part.cny for part in parts), ZERO_CNY),
        )


def training_shortfalls(
    *,
    segments: Sequence[ImpactSegment],
    parameters: int,
    bytes_per_parameter: Number,
    compute_seconds_per_step: Number,
) -> TrainingShortfalls:
    """The two shortfalls of a window cut into terms segments, each judged by its own terms.

    Rule, per segment: each measured hour's loss is ``gpu_hours_lost`` over the segment's
    wall hours at that hour's mean bus bandwidth against the reference; the segment
    loses the mean of those (an unmeasured hour is taken to be like the measured ones; a
    segment with no measured hour loses nothing). Two references:

    - below threshold: ``contracted * sla_threshold_percent / 100``, what the SLA
      guarantees and the provider owes;
    - below contract: the contracted bandwidth itself, informational.

    Each segment's ``cny = gpu_hours * its gpu_hour_price``, rounded half-up to 0.01; a
    total's ``cny`` is the sum of its segments' rounded ``cny`` (so the parts add up) and
    its ``gpu_hours`` the unrounded sum. Both are 0 wherever every measured hour reached
    the reference, so at 100 % compliance the below-threshold shortfall is 0.
    """
    model = _JobModel(parameters, bytes_per_parameter, compute_seconds_per_step)
    parts = tuple(
        SegmentShortfalls(
            below_threshold=_segment_shortfall(
                segment, reference_bps=segment.threshold_busbw_bps, model=model
            ),
            below_contract=_segment_shortfall(
                segment, reference_bps=segment.contracted_busbw_bps, model=model
            ),
        )
        for segment in segments
    )
    return TrainingShortfalls(
        below_threshold=_total([part.below_threshold for part in parts]),
        below_contract=_total([part.below_contract for part in parts]),
        segments=parts,
    )


__all__ = [
    "BITS_PER_MBPS",
    "BYTES_PER_GB",
    "P95_DIRECTIONS",
    "P95_DROP_PERCENT",
    "P95_WINDOWS",
    "CreditReason",
    "CreditResult",
    "Delta",
    "DeltaKind",
    "ImpactSegment",
    "NodeRentLine",
    "P95Direction",
    "P95Figure",
    "P95Group",
    "P95Line",
    "P95Window",
    "RateGroup",
    "SegmentShortfalls",
    "Shortfall",
    "Totals",
    "TrafficRate",
    "TrainingImpact",
    "TrainingShortfalls",
    "allreduce_seconds",
    "billable_mbps",
    "bytes_to_gb",
    "communication_share",
    "counter_deltas",
    "credit_percent",
    "gpu_hour_price",
    "gpu_hours_lost",
    "invoice_totals",
    "invoice_totals_by_rate",
    "network_cost_share",
    "node_rent_line",
    "overlap_seconds",
    "p95_bandwidth",
    "p95_charge",
    "p95_detail",
    "p95_line",
    "percentile_95",
    "prorate",
    "sla_credit",
    "training_impact",
    "training_shortfalls",
]
