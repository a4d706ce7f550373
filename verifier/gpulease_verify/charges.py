"""The billed amounts: traffic in GB, proration of node rent, SLA credits, invoice totals
per VAT rate and the network's share of the bill. Conventions:
``gpulease_verify.arithmetic``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, localcontext
from enum import StrEnum

from gpulease_verify.arithmetic import (
    _CONTEXT,
    HUNDRED,
    ZERO_CNY,
    Number,
    _dec,
    _non_negative,
    _whole,
)
from gpulease_verify.money import FEN, ROUNDING, to_fen

BYTES_PER_GB = 10**9
SHARE_QUANTUM = Decimal("0.0001")


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


# Proration (node rent per node-month)


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


# Network cost share


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
