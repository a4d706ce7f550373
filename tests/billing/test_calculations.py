"""Hand-checked numbers for gpulease_verify.calculations. Pure arithmetic: no database."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal as D
from zoneinfo import ZoneInfo

import pytest

from gpulease_verify.calculations import (
    CreditReason,
    DeltaKind,
    ImpactSegment,
    allreduce_seconds,
    billable_mbps,
    bytes_to_gb,
    communication_share,
    counter_deltas,
    credit_percent,
    gpu_hour_price,
    gpu_hours_lost,
    invoice_totals,
    network_cost_share,
    node_rent_line,
    overlap_seconds,
    p95_charge,
    percentile_95,
    prorate,
    sla_credit,
    traffic_charge,
    training_impact,
    training_shortfalls,
)
from gpulease_verify.money import to_fen
from gpulease_verify.periods import Period
from leases.contract_rules import credit_tiers, default_credit_tiers

SHANGHAI = ZoneInfo("Asia/Shanghai")
DAY = 86_400


def sh(text: str) -> datetime:
    """'2026-11-16 00:00' read in Asia/Shanghai."""
    return datetime.fromisoformat(text).replace(tzinfo=SHANGHAI)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# --- 95th percentile -------------------------------------------------------------------


def test_p95_of_a_30_day_month_drops_the_top_432_samples():
    # 30 days x 288 five-minute samples = 8640; floor(8640 * 5 / 100) = 432 dropped.
    # Samples 1..8640 bps: after dropping 8640..8209 the highest left is 8208.
    samples = list(range(1, 8641))
    assert percentile_95(samples) == D(8208)
    assert percentile_95(list(reversed(samples))) == D(8208)  # order does not matter


def test_p95_ties_need_no_rule():
    # 40 samples: 2 dropped. Five equal peaks of 900: two are dropped, the third billed.
    samples = [900] * 5 + [100] * 35
    assert percentile_95(samples) == D(900)
    # 40 samples with exactly two peaks: both dropped, the plateau below is billed.
    assert percentile_95([900] * 2 + [100] * 38) == D(100)


@pytest.mark.parametrize(
    ("count", "billed"),
    [
        (1, 1),  # one sample: it is billed
        (19, 19),  # floor(19 * 5 / 100) = 0 dropped: the maximum
        (20, 19),  # floor(20 * 5 / 100) = 1 dropped: the second highest
        (39, 38),  # floor(39 * 5 / 100) = 1
        (40, 38),  # floor(40 * 5 / 100) = 2
    ],
)
def test_p95_partial_periods_use_the_same_rule(count, billed):
    assert percentile_95(list(range(1, count + 1))) == D(billed)


def test_p95_without_samples_is_none_and_floats_are_refused():
    assert percentile_95([]) is None
    with pytest.raises(TypeError):
        percentile_95([1.5])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        percentile_95([-1])


def test_p95_charge_rounds_the_mbps_then_the_money():
    # 123,456,789 bps = 123.456789 Mbps -> 123.46 Mbps (half-up to 0.01).
    assert billable_mbps(123_456_789) == D("123.46")
    assert billable_mbps(5_000) == D("0.01")  # 0.005 Mbps rounds half-up
    # 123.46 Mbps x 12.3456 CNY = 1524.187776 -> 1524.19 CNY.
    assert p95_charge(p95_bps=123_456_789, price_per_mbps=D("12.3456")) == D("1524.19")
    # 1 Gbps = 1000.00 Mbps x 30 CNY = 30,000.00.
    assert p95_charge(p95_bps=10**9, price_per_mbps=30) == D("30000.00")


# --- traffic metering ------------------------------------------------------------------

T0 = utc("2026-11-01 00:00")


def readings(*values: int, step: int = 300) -> list[tuple[datetime, int]]:
    return [(T0 + timedelta(seconds=step * i), value) for i, value in enumerate(values)]


def test_32_bit_counter_wrap():
    # 2**32 = 4,294,967,296; 4,294,967,296 - 4,294,967,000 + 1,000 = 1,296 bytes.
    (delta,) = counter_deltas(readings(4_294_967_000, 1_000), counter_bits=32)
    assert (delta.bytes, delta.kind) == (1_296, DeltaKind.WRAP)
    assert (delta.start, delta.end) == (T0, T0 + timedelta(seconds=300))


def test_64_bit_counter_going_back_is_a_reset():
    # A 64-bit counter does not wrap in practice: 5e12 -> 1e6 is a restart from 0.
    deltas = counter_deltas(readings(4_000_000_000_000, 5_000_000_000_000, 1_000_000, 3_000_000))
    assert [(d.bytes, d.kind) for d in deltas] == [
        (1_000_000_000_000, DeltaKind.NORMAL),
        (1_000_000, DeltaKind.RESET),
        (2_000_000, DeltaKind.NORMAL),
    ]


def test_wrap_plausibility_against_the_port_speed():
    # 10 Mbps port, 300 s: at most 10e6 x 300 / 8 = 375,000,000 bytes, x 1.1 = 412,500,000.
    # 1,296 bytes implied: a wrap.
    (delta,) = counter_deltas(readings(4_294_967_000, 1_000), counter_bits=32, max_rate_bps=10**7)
    assert delta.kind == DeltaKind.WRAP
    # 2**32 - 1,000,000,000 + 500 = 3,294,967,796 bytes would be 88 Mbps: a reset, 500 bytes.
    (delta,) = counter_deltas(readings(1_000_000_000, 500), counter_bits=32, max_rate_bps=10**7)
    assert (delta.bytes, delta.kind) == (500, DeltaKind.RESET)
    # Exactly at the tolerance is still a wrap: prev = 2**32 - 412,500,000, new = 0.
    (delta,) = counter_deltas(readings(2**32 - 412_500_000, 0), counter_bits=32, max_rate_bps=10**7)
    assert (delta.bytes, delta.kind) == (412_500_000, DeltaKind.WRAP)
    (delta,) = counter_deltas(readings(2**32 - 412_500_001, 0), counter_bits=32, max_rate_bps=10**7)
    assert delta.kind == DeltaKind.RESET
    # A 64-bit counter near its top, 100 Gbps port: 1,000 + 500 = 1,500 bytes, a wrap.
    (delta,) = counter_deltas(readings(2**64 - 1_000, 500), max_rate_bps=100 * 10**9)
    assert (delta.bytes, delta.kind) == (1_500, DeltaKind.WRAP)


def test_counter_rate_feeds_the_percentile():
    # 3,750,000,000 bytes in 300 s = 3.75e9 x 8 / 300 = 100,000,000 bps = 100 Mbps.
    (delta,) = counter_deltas(readings(0, 3_750_000_000))
    assert delta.seconds == D(300)
    assert delta.rate_bps == D(100_000_000)


def test_counter_readings_are_checked():
    with pytest.raises(ValueError, match="strictly increasing"):
        counter_deltas([(T0, 1), (T0, 2)])
    with pytest.raises(ValueError, match="does not fit in 32 bits"):
        counter_deltas(readings(2**32), counter_bits=32)
    assert counter_deltas(readings(5)) == []


def test_traffic_charge_does_not_round_the_gb():
    assert bytes_to_gb(1_234_567_891) == D("1.234567891")
    # 1.234567891 GB x 10.00 = 12.34567891 -> 12.35 CNY. Rounding the GB first (1.23 GB)
    # would give 12.30: the exact GB figure is the rule.
    assert traffic_charge(total_bytes=1_234_567_891, price_per_gb=D("10.00")) == D("12.35")
    # 6,250,000 bytes = 0.00625 GB x 0.80 = 0.005 -> 0.01 half-up.
    assert traffic_charge(total_bytes=6_250_000, price_per_gb=D("0.80")) == D("0.01")
    # 1 PB = 1,000,000 GB x 0.5 = 500,000.00.
    assert traffic_charge(total_bytes=10**15, price_per_gb=D("0.5")) == D("500000.00")


# --- proration -------------------------------------------------------------------------


def test_half_a_november_is_half_the_rent():
    # Assigned 2026-11-16 00:00 Shanghai to month end: 15 days = 1,296,000 s of 2,592,000.
    # 45,000 x 1,296,000 / 2,592,000 = 22,500.00.
    start, end = Period.parse("2026-11").bounds("Asia/Shanghai")
    line = node_rent_line(
        monthly_rate=D("45000.00"),
        assignments=[(sh("2026-11-16 00:00"), None)],
        period_start=start,
        period_end=end,
    )
    assert (line.node_seconds, line.period_seconds, line.amount) == (
        15 * DAY,
        30 * DAY,
        D("22500.00"),
    )


def test_cutting_in_utc_would_bill_eight_more_hours():
    # Cut in UTC, 2026-11-16 00:00 Shanghai (= 11-15 16:00Z) to 12-01 00:00Z is 15 days
    # 8 hours = 1,324,800 s: 45,000 x 1,324,800 / 2,592,000 = 23,000.00, not 22,500.00.
    line = node_rent_line(
        monthly_rate=D("45000.00"),
        assignments=[(sh("2026-11-16 00:00"), None)],
        period_start=utc("2026-11-01 00:00"),
        period_end=utc("2026-12-01 00:00"),
    )
    assert (line.node_seconds, line.amount) == (1_324_800, D("23000.00"))


def test_a_node_swap_is_one_node_month():
    # Old node 11-01 00:00 to 11-10 12:00 = 9.5 days = 820,800 s; the new node from then on
    # = 20.5 days = 1,771,200 s; together 2,592,000 s = one node-month = 45,000.00.
    start, end = Period.parse("2026-11").bounds("Asia/Shanghai")
    swap = sh("2026-11-10 12:00")
    assert (
        overlap_seconds(start=sh("2026-10-01 00:00"), end=swap, period_start=start, period_end=end)
        == 820_800
    )
    assert overlap_seconds(start=swap, end=None, period_start=start, period_end=end) == 1_771_200
    line = node_rent_line(
        monthly_rate=D("45000.00"),
        assignments=[(sh("2026-10-01 00:00"), swap), (swap, None)],
        period_start=start,
        period_end=end,
    )
    assert (line.node_seconds, line.amount) == (30 * DAY, D("45000.00"))


def test_rent_is_rounded_once_per_line():
    # Three nodes of 10 days each in a 30-day month at 100.00: 100 x 3 x 864,000 / 2,592,000
    # = 100.00. Rounding each node first would give 3 x 33.33 = 99.99.
    start, end = Period.parse("2026-11").bounds("Asia/Shanghai")
    ten_days = [
        (sh("2026-11-01 00:00"), sh("2026-11-11 00:00")),
        (sh("2026-11-11 00:00"), sh("2026-11-21 00:00")),
        (sh("2026-11-21 00:00"), sh("2026-12-01 00:00")),
    ]
    line = node_rent_line(
        monthly_rate=100, assignments=ten_days, period_start=start, period_end=end
    )
    assert line.amount == D("100.00")
    one = prorate(monthly_amount=100, covered_seconds=10 * DAY, period_seconds=30 * DAY)
    assert one != D("33.33")  # unrounded: 33.333...
    assert one.quantize(D("0.0001")) == D("33.3333")


def test_overlap_edges():
    start, end = Period.parse("2026-11").bounds("Asia/Shanghai")
    # Entirely before or after, and touching the edges (half-open intervals): 0.
    assert (
        overlap_seconds(start=sh("2026-10-01 00:00"), end=start, period_start=start, period_end=end)
        == 0
    )
    assert overlap_seconds(start=end, end=None, period_start=start, period_end=end) == 0
    # Spanning the whole month: the whole month.
    assert (
        overlap_seconds(start=sh("2026-01-01 00:00"), end=None, period_start=start, period_end=end)
        == 2_592_000
    )
    # Fractions of a second are dropped.
    assert (
        overlap_seconds(
            start=start + timedelta(microseconds=500_000),
            end=start + timedelta(seconds=10),
            period_start=start,
            period_end=end,
        )
        == 9
    )


# --- SLA credits -----------------------------------------------------------------------

TIERS = credit_tiers(default_credit_tiers())  # below 99.5 -> 10, below 99 -> 25, below 95 -> 50


@pytest.mark.parametrize(
    ("compliance", "percent"),
    [
        ("100", "0"),
        ("99.5", "0"),  # exactly at the boundary: nothing from the "below 99.5" tier
        ("99.49", "10"),
        ("99.0", "10"),  # at 99: only "below 99.5" applies
        ("98.99", "25"),
        ("95.0", "25"),
        ("94.99", "50"),
        ("0", "50"),
    ],
)
def test_credit_tier_boundaries(compliance, percent):
    assert credit_percent(compliance_percent=D(compliance), tiers=TIERS) == D(percent)


def test_largest_credit_wins_in_any_order():
    odd = [(D("99"), D("30")), (D("95"), D("20"))]  # a looser tier that pays more
    assert credit_percent(compliance_percent=D("90"), tiers=odd) == D("30")
    assert credit_percent(compliance_percent=D("90"), tiers=list(reversed(odd))) == D("30")
    assert credit_percent(compliance_percent=D("90"), tiers=[]) == D("0")


def test_sla_credit_is_a_negative_line():
    # 98.99% -> 25% of 12,345.67 = 3,086.4175 -> 3,086.42 (half-up), as a deduction.
    result = sla_credit(
        base=D("12345.67"), compliance_percent=D("98.99"), tiers=TIERS, cap_percent=50
    )
    assert result.amount == D("-3086.42")
    assert (result.percent_applied, result.tier_percent) == (D("25"), D("25"))
    assert (result.capped, result.reason) == (False, CreditReason.TIER)
    # 10% of 0.05 = 0.005 -> magnitude 0.01 half-up -> -0.01.
    small = sla_credit(base=D("0.05"), compliance_percent=D("99.4"), tiers=TIERS, cap_percent=50)
    assert small.amount == D("-0.01")


def test_sla_credit_cap():
    # Tier 50% (94.99 < 95), cap 30%: 30% of 10,000.00 = 3,000.00.
    result = sla_credit(
        base=D("10000.00"), compliance_percent=D("94.99"), tiers=TIERS, cap_percent=30
    )
    assert (result.tier_percent, result.percent_applied) == (D("50"), D("30"))
    assert (result.amount, result.capped, result.reason) == (
        D("-3000.00"),
        True,
        CreditReason.CAPPED,
    )


def test_no_credit_when_met_or_unknown():
    met = sla_credit(base=D("10000"), compliance_percent=D("99.5"), tiers=TIERS, cap_percent=50)
    assert (met.amount, met.reason) == (D("0.00"), CreditReason.NO_TIER)
    assert not met.amount.is_signed()  # 0.00, never -0.00
    unknown = sla_credit(base=D("10000"), compliance_percent=None, tiers=TIERS, cap_percent=50)
    assert (unknown.amount, unknown.percent_applied, unknown.reason) == (
        D("0.00"),
        D("0"),
        CreditReason.COMPLIANCE_UNKNOWN,
    )
    with pytest.raises(ValueError, match="between 0 and 100"):
        credit_percent(compliance_percent=D("100.01"), tiers=TIERS)


# --- invoice totals --------------------------------------------------------------------


def test_tax_is_rounded_half_up_once():
    # 1,234.25 x 6 / 100 = 74.055 -> 74.06; total 1,234.25 + 74.06 = 1,308.31.
    totals = invoice_totals(lines=[D("1000.00"), D("234.25")], tax_rate_percent=D("6"))
    assert (totals.subtotal, totals.tax, totals.total) == (
        D("1234.25"),
        D("74.06"),
        D("1308.31"),
    )


def test_lines_are_rounded_before_they_are_summed():
    # Three items of 0.005 each: each line rounds half-up to 0.01, so the subtotal is 0.03
    # (rounding the sum 0.015 would give 0.02). Unrounded lines are refused.
    lines = [to_fen(D("0.005"))] * 3
    totals = invoice_totals(lines=lines, tax_rate_percent=0)
    assert (totals.subtotal, totals.tax, totals.total) == (D("0.03"), D("0.00"), D("0.03"))
    with pytest.raises(ValueError, match="not rounded"):
        invoice_totals(lines=[D("0.005")] * 3, tax_rate_percent=0)


def test_invoice_with_a_credit_adds_up():
    # Rent 22,500.00 + network 8,000.00 + traffic 0.99 - credit 2,000.00 = 28,500.99;
    # tax 6% = 1,710.0594 -> 1,710.06; total 30,211.05 = lines + tax exactly.
    lines = [D("22500.00"), D("8000.00"), D("0.99"), D("-2000.00")]
    totals = invoice_totals(lines=lines, tax_rate_percent=D("6.00"))
    assert (totals.subtotal, totals.tax, totals.total) == (
        D("28500.99"),
        D("1710.06"),
        D("30211.05"),
    )
    assert sum(lines) + totals.tax == totals.total
    assert totals.total.as_tuple().exponent == -2


# --- network cost share ----------------------------------------------------------------


def test_network_cost_share():
    # 8x A100 at 40,000.00 rent + 6,000.00 network fee: 6,000 / 46,000 = 0.130434... -> 0.1304.
    assert network_cost_share(node_rent=D("40000"), network_fee=D("6000")) == D("0.1304")
    # With 1,000.00 usage: 7,000 / 47,000 = 0.148936... -> 0.1489.
    assert network_cost_share(node_rent=D("40000"), network_fee=D("6000"), usage=D("1000")) == D(
        "0.1489"
    )
    # Half-up at the 4th decimal: 1 / 16 = 0.0625 exact; 1 / 32 = 0.03125 -> 0.0313.
    assert network_cost_share(node_rent=31, network_fee=1) == D("0.0313")
    assert network_cost_share(node_rent=0, network_fee=0) is None


# --- training impact -------------------------------------------------------------------


def test_allreduce_time_of_a_7b_model_on_32_gpus():
    # 7e9 params x 2 bytes = 14e9 bytes; x 2(32-1)/32 = 1.9375 -> 27.125e9 bytes per GPU.
    # At 100 GB/s busbw (8e11 bits/s): 27.125e9 / 100e9 = 0.27125 s.
    # At 90 GB/s (7.2e11 bits/s): 27.125e9 / 90e9 = 0.3013888... s (= 217/720).
    common = {"parameters": 7 * 10**9, "bytes_per_parameter": 2, "gpus": 32}
    assert allreduce_seconds(**common, busbw_bps=800 * 10**9) == D("0.27125")
    at_90 = allreduce_seconds(**common, busbw_bps=720 * 10**9)
    assert at_90.quantize(D("0.000001")) == D("0.301389")
    # One GPU: nothing to reduce.
    assert allreduce_seconds(parameters=7 * 10**9, bytes_per_parameter=2, gpus=1, busbw_bps=1) == 0


def test_communication_share_is_an_upper_bound_without_overlap():
    # 0.27125 / (0.27125 + 1) = 217/1017 = 0.213372...
    share = communication_share(t_comm=D("0.27125"), t_compute=1)
    assert share.quantize(D("0.000001")) == D("0.213373")


def test_gpu_hour_price():
    # 45,000 / 8 GPUs / 720 h = 7.8125 CNY per GPU-hour, exact.
    assert gpu_hour_price(node_rent_per_month=45000, gpus_per_node=8, month_hours=720) == D(
        "7.8125"
    )


def test_training_impact_of_90_instead_of_100_gb_per_s():
    # 7B, fp16, 32 GPUs, 1.000 s compute per step, 720 wall hours at 7.8125 CNY/GPU-hour.
    # t_step measured = 1 + 217/720 = 937/720 = 1.301389 s; contracted = 1.27125 s.
    # Shares: 217/937 = 0.231590 and 217/1017 = 0.213373.
    # Slowdown = (937/720) / (1017/800) = 1.023708.
    # Lost share = 1 - 1.27125 / (937/720) = (217/7200) / (937/720) = 217/9370.
    # GPU-hours lost = 32 x 720 x 217/9370 = 4,999,680/9370 = 533.583778.
    # CNY lost = 533.583778 x 7.8125 = 39,060,000/9370 = 4,168.6233 -> 4,168.62.
    impact = training_impact(
        parameters=7 * 10**9,
        bytes_per_parameter=2,
        gpus=32,
        compute_seconds_per_step=1,
        measured_busbw_bps=720 * 10**9,
        contracted_busbw_bps=800 * 10**9,
        wall_hours=720,
        gpu_hour_price=D("7.8125"),
    )
    six = D("0.000001")
    assert impact.t_step_measured_s.quantize(six) == D("1.301389")
    assert impact.t_step_contracted_s == D("1.27125")
    assert impact.comm_share_measured.quantize(six) == D("0.231590")
    assert impact.comm_share_contracted.quantize(six) == D("0.213373")
    assert impact.slowdown.quantize(six) == D("1.023708")
    assert impact.gpu_hours_lost.quantize(six) == D("533.583778")
    assert impact.cost_lost == D("4168.62")


def test_no_loss_when_the_network_beats_the_contract():
    impact = training_impact(
        parameters=7 * 10**9,
        bytes_per_parameter=2,
        gpus=32,
        compute_seconds_per_step=1,
        measured_busbw_bps=800 * 10**9,
        contracted_busbw_bps=720 * 10**9,
        wall_hours=720,
        gpu_hour_price=D("7.8125"),
    )
    assert (impact.gpu_hours_lost, impact.cost_lost) == (D(0), D("0.00"))
    assert impact.slowdown < 1


# 7B, fp16, 1 s of compute on 16 GPUs: t_comm(bw) = 7e9 x 2 x 2(15/16) x 8 / bw = 210e9 / bw,
# so t_step is 3.1 s at 100 Gbps, 3.625 s at 80, 4 s at 70 and 4.5 s at 60.
JOB = {"parameters": 7 * 10**9, "bytes_per_parameter": 2, "compute_seconds_per_step": 1}
GBPS = 10**9


def _segment(*hourly_gbps: int, hours=4, threshold="95", price="7.8125"):  # type: ignore[no-untyped-def]
    return ImpactSegment(
        wall_hours=D(hours),
        gpus=16,
        hourly_busbw_bps=tuple(D(gbps * GBPS) for gbps in hourly_gbps),
        contracted_busbw_bps=D(100 * GBPS),
        sla_threshold_percent=D(threshold),
        gpu_hour_price=D(price),
    )


def test_gpu_hours_lost_against_a_reference_and_none_at_or_above_it():
    # 70 against 80 Gbps: 1 - 3.625/4 = 3/32; 16 GPUs x 4 h x 3/32 = 6 GPU-hours.
    common = {**JOB, "gpus": 16, "wall_hours": 4, "measured_busbw_bps": 70 * GBPS}
    assert gpu_hours_lost(**common, reference_busbw_bps=80 * GBPS) == 6
    assert gpu_hours_lost(**common, reference_busbw_bps=70 * GBPS) == 0
    assert gpu_hours_lost(**common, reference_busbw_bps=60 * GBPS) == 0


def test_shortfalls_below_threshold_and_below_contract():
    # Threshold 80 % of 100 Gbps, 70 Gbps for 4 h at 7.8125 CNY per GPU-hour:
    # below threshold 6 GPU-hours, 46.875 -> 46.88; below contract 1 - 3.1/4 = 0.225,
    # 16 x 4 x 0.225 = 14.4 GPU-hours, 112.50.
    result = training_shortfalls(segments=[_segment(70, 70, threshold="80")], **JOB)
    assert (result.below_threshold.gpu_hours, result.below_threshold.cny) == (6, D("46.88"))
    assert (result.below_contract.gpu_hours, result.below_contract.cny) == (
        D("14.4"),
        D("112.50"),
    )


def test_each_hour_is_judged_so_a_dip_is_not_averaged_away():
    # Threshold 80 Gbps; one hour at 100, one at 60: their mean, 80, would pass and owe
    # nothing. Judged hour by hour, over the segment's 2 hours:
    #   at 60 below threshold: 1 - 3.625/4.5 = 7/36; mean with the 100 Gbps hour's 0 = 7/72;
    #   16 x 2 x 7/72 = 28/9 = 3.111... GPU-hours; x 7.8125 = 24.3055... -> 24.31.
    #   at 60 below contract: 1 - 3.1/4.5 = 14/45; mean 7/45; 16 x 2 x 7/45 = 224/45 =
    #   4.9777... GPU-hours; x 7.8125 = 38.8888... -> 38.89.
    result = training_shortfalls(segments=[_segment(100, 60, hours=2, threshold="80")], **JOB)
    six = D("0.000001")
    assert result.below_threshold.gpu_hours.quantize(six) == D("3.111111")
    assert result.below_threshold.cny == D("24.31")
    assert result.below_contract.gpu_hours.quantize(six) == D("4.977778")
    assert result.below_contract.cny == D("38.89")


def test_totals_add_the_segments_rounded_amounts():
    # Two segments each losing 6 GPU-hours at 7.8125: 46.875 -> 46.88 each. The total is
    # 93.76, the sum of the amounts shown, not 93.75 (12 x 7.8125 rounded once).
    segments = [_segment(70, threshold="80"), _segment(70, threshold="80")]
    result = training_shortfalls(segments=segments, **JOB)
    assert [part.below_threshold.cny for part in result.segments] == [D("46.88"), D("46.88")]
    assert (result.below_threshold.gpu_hours, result.below_threshold.cny) == (12, D("93.76"))


def test_no_shortfall_without_a_measurement_or_without_a_guarantee():
    unmeasured = training_shortfalls(segments=[_segment()], **JOB)
    assert unmeasured.below_contract.cny == D("0.00")
    # A 0 % threshold guarantees nothing: nothing is owed, the contract gap still shows.
    no_guarantee = training_shortfalls(segments=[_segment(70, threshold="0")], **JOB)
    assert no_guarantee.below_threshold.cny == D("0.00")
    assert no_guarantee.below_contract.cny == D("112.50")
    assert training_shortfalls(segments=[], **JOB).below_threshold.gpu_hours == 0


def test_shortfalls_refuse_a_float_bandwidth():
    segment = ImpactSegment(
        wall_hours=D(1),
        gpus=16,
        hourly_busbw_bps=(70e9,),  # type: ignore[arg-type]
        contracted_busbw_bps=D(100 * GBPS),
        sla_threshold_percent=D(95),
        gpu_hour_price=D("7.8125"),
    )
    with pytest.raises(TypeError, match="measured_busbw_bps must be an int or a Decimal"):
        training_shortfalls(segments=[segment], **JOB)
