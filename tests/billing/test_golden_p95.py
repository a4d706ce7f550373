"""The golden vectors of 95计费 (tests/billing/golden_p95.py) against the one pure function
that prices the line, ``gpulease_verify.calculations.p95_line``; the readings vectors
through ``gpulease_verify.traffic.slot_traffic`` first (reset and wrap by
``counter_deltas``). Each vector's hand arithmetic is written beside it."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from decimal import Context, Decimal
from zoneinfo import ZoneInfo

import pytest

from gpulease_verify.calculations import (
    P95Direction,
    P95Window,
    TrafficRate,
    p95_detail,
    p95_line,
)
from gpulease_verify.periods import Period
from gpulease_verify.traffic import Reading, slot_traffic
from tests.billing.golden_p95 import BYTES_PER_MBPS_SLOT, VECTORS

ZONE = "Asia/Shanghai"


def local(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(ZONE))


def samples_of(vector: dict) -> list[TrafficRate]:
    if "readings" in vector:
        readings = [
            Reading(at=local(when), step_s=300, ports={"data0": tx}, rx_ports={"data0": rx})
            for when, tx, rx in vector["readings"]
        ]
        start, end = local(vector["start"]), local(vector["end"])
        made = slot_traffic(
            {"n1": readings}, start=start, end=end, counter_bits=64, max_rate_bps=100 * 10**9
        )
        return [TrafficRate(s.slot_at, s.seconds, s.bytes, s.rx_bytes) for s in made]
    scale = 1 if vector.get("bytes") else BYTES_PER_MBPS_SLOT
    found = []
    for when, tx, rx, *seconds in vector["samples"]:
        found.append(
            TrafficRate(
                local(when),
                seconds[0] if seconds else 300,
                tx * scale,
                None if rx is None else rx * scale,
            )
        )
    return found


def expected_bps(text: str | None) -> Decimal | None:
    if text is None:
        return None
    if "/" in text:
        numerator, denominator = text.split("/")
        return Context(prec=50).divide(Decimal(numerator), Decimal(denominator))
    return Decimal(text)


def priced(vector: dict):  # type: ignore[no-untyped-def]
    start, end = local(vector["start"]), local(vector["end"])
    return p95_line(
        [s for s in samples_of(vector) if start <= s.slot_at < end],
        direction=vector["direction"],
        window=vector["window"],
        zone_name=ZONE,
        price_per_mbps=Decimal(vector["price"]),
        segment_seconds=int((end - start).total_seconds()),
        month_seconds=Period.parse(vector["period"]).seconds(ZONE),
    )


def test_the_suite_covers_every_direction_window_and_month_length():
    assert len(VECTORS) >= 24
    assert len({vector["name"] for vector in VECTORS}) == len(VECTORS)
    pairs = Counter((vector["direction"], vector["window"]) for vector in VECTORS)
    for direction in P95Direction:
        for window in P95Window:
            assert pairs[(direction.value, window.value)] >= 1, (direction, window)
    lengths = {Period.parse(vector["period"]).seconds(ZONE) // 86400 for vector in VECTORS}
    assert lengths == {28, 29, 30, 31}
    assert any("reset" in vector["name"] for vector in VECTORS)
    assert any("wrap" in vector["name"] for vector in VECTORS)


@pytest.mark.parametrize("vector", VECTORS, ids=[vector["name"] for vector in VECTORS])
def test_golden_vector(vector):  # type: ignore[no-untyped-def]
    line = priced(vector)
    assert line.figure.p95_bps == expected_bps(vector["p95_bps"])
    assert str(line.billable_mbps) == vector["mbps"]
    assert str(line.amount) == vector["amount"]  # to the fen
    detail = p95_detail(line.figure)
    assert (detail["p95_direction"], detail["p95_window"]) == (
        vector["direction"],
        vector["window"],
    )
    if "days" in vector:
        assert detail["days"] == vector["days"]
    for key in ("tx_p95_bps", "rx_p95_bps"):
        if key in vector:
            assert detail[key] == vector[key]


def test_a_sample_in_the_last_minutes_of_a_day_is_that_days_in_the_tenants_zone():
    # 23:55 Shanghai is 15:55 UTC; the same samples cut in UTC make one day, 90 Mbps.
    vector = next(v for v in VECTORS if v["name"].endswith("cut_in_the_tenants_zone"))
    utc = p95_line(
        samples_of(vector),
        direction="tx",
        window="daily_average",
        zone_name="UTC",
        price_per_mbps=Decimal("1.50"),
        segment_seconds=2_592_000,
        month_seconds=2_592_000,
    )
    assert (utc.billable_mbps, utc.amount) == (Decimal("90.00"), Decimal("135.00"))
    assert priced(vector).billable_mbps == Decimal("80.00")


def test_the_default_rule_is_todays_for_every_monthly_tx_vector():
    """``tx``/``monthly`` is ``percentile_95`` of the sent rates, as metering did before."""
    from gpulease_verify.calculations import percentile_95

    for vector in VECTORS:
        if (vector["direction"], vector["window"]) != ("tx", "monthly"):
            continue
        rates = [s.tx_bps for s in samples_of(vector) if s.seconds > 0]
        assert priced(vector).figure.p95_bps == percentile_95(rates), vector["name"]


def _made(vector: dict) -> list:  # type: ignore[type-arg]
    readings = [
        Reading(at=local(when), step_s=300, ports={"data0": tx}, rx_ports={"data0": rx})
        for when, tx, rx in vector["readings"]
    ]
    return slot_traffic(
        {"n1": readings},
        start=local(vector["start"]),
        end=local(vector["end"]),
        counter_bits=64,
        max_rate_bps=100 * 10**9,
    )


def test_a_reset_and_a_wrap_are_counted_on_their_slot_in_either_direction():
    by_name = {vector["name"]: vector for vector in VECTORS}
    # tx reset: 3.75e9, then only the 1.875e9 since the restart, then 7.5e9 B
    made = _made(by_name["tx_monthly_counter_reset"])
    assert [(s.bytes, s.resets) for s in made] == [
        (3_750_000_000, 0),
        (1_875_000_000, 1),
        (7_500_000_000, 0),
    ]
    # tx wrap: 2^64 - 10^9 -> 2.75e9 is 3.75e9 B, counted as a wrap
    made = _made(by_name["tx_monthly_counter_wrap"])
    assert [(s.bytes, s.wraps) for s in made] == [(3_750_000_000, 1), (1_500_000_000, 0)]
    # rx reset: +5e9, then 0.75e9 (the bytes since the restart); the sent counter's
    # resets are what a sample counts, as before received bytes were metered
    made = _made(by_name["rx_monthly_counter_reset"])
    assert [(s.rx_bytes, s.resets) for s in made] == [(5_000_000_000, 0), (750_000_000, 0)]
    # rx wrap: 2^64 - 5e8 -> 7e9 is 7.5e9 B
    made = _made(by_name["max_monthly_rx_counter_wrap_28_days"])
    assert [s.rx_bytes for s in made] == [7_500_000_000, 375_000_000]
    # a missing reading: 7.5e9 received over 10 minutes, 3.75e9 to each of its slots
    made = _made(by_name["max_of_p95_daily_missing_reading_spread"])
    assert [s.rx_bytes for s in made] == [3_750_000_000, 3_750_000_000, 1_500_000_000]
