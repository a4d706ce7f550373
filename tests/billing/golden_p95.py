"""Golden vectors of 95计费 by direction and window (issue 32, item 1), each worked by hand
to the fen. Data only: tests/billing/test_golden_p95.py runs them through
``gpulease_verify.calculations.p95_line`` (and the readings ones through
``gpulease_verify.traffic.slot_traffic`` first), and a subset end to end.

How the 95th is taken (``calculations.percentile_95``): sort a group's rates from highest
to lowest, drop the top ``floor(n x 5 / 100)`` and bill the next one. So 1 to 19 samples
drop none (the highest is billed), 20 to 39 drop one, 40 to 59 drop two. A rate is
``bytes x 8 / seconds``; with 300-second slots 1 Mbps is 37,500,000 bytes, so the samples
below are written in Mbps (``mbps``) where that is exact. The line: the 95th in Mbps
rounded half-up to 0.01, x price, x segment seconds / month seconds, rounded half-up to
0.01 CNY once.

Month seconds (Asia/Shanghai): 28 days 2,419,200; 29 days 2,505,600; 30 days 2,592,000;
31 days 2,678,400. Times are Shanghai local (UTC+8); a daily window's days are Shanghai
days.

Each vector: ``name``; ``direction``, ``window``; ``period``; the segment ``start`` and
``end`` (local); ``price`` per Mbps; either ``samples`` (local slot, tx Mbps, rx Mbps,
optional seconds, or raw bytes with ``bytes=True``) or ``readings`` (one node's counters
at 5-minute slots: local time, tx counter, rx counter; the samples are what
``traffic.slot_traffic`` makes of them, on a 100 Gbit/s port); and the expected
``p95_bps`` (a decimal, or ``a/b`` for a quotient that does not end), ``mbps`` and
``amount``.
"""

from __future__ import annotations

from typing import Any

BYTES_PER_MBPS_SLOT = 37_500_000  # 1 Mbps over 300 s: 10^6 x 300 / 8
WRAP = 2**64


def mbps(value: int) -> int:
    """Bytes in a 300-second slot at ``value`` Mbps."""
    return value * BYTES_PER_MBPS_SLOT


def slots(day: str, first: str, values: list[tuple[int, int | None]]) -> list[tuple]:
    """Consecutive 5-minute samples from ``day first`` (local), (tx Mbps, rx Mbps) each."""
    hour, minute = (int(part) for part in first.split(":"))
    found = []
    for index, (tx, rx) in enumerate(values):
        total = hour * 60 + minute + 5 * index
        found.append((f"{day} {total // 60:02d}:{total % 60:02d}", tx, rx))
    return found


# 20 samples that tell ``max`` from ``max_of_p95``: tx 1,000 Mbps in one slot and 100 in
# the others; rx 900 in another slot and 50 in the others.
SPLIT_PEAKS = [(1000, 50), (100, 900)] + [(100, 50)] * 18

VECTORS: list[dict[str, Any]] = [
    # --- monthly, tx (the default: today's rule) ------------------------------------------
    {
        # 3 samples drop 0: the highest, 300 Mbps. 300 x ¥10 x 2,592,000 / 2,592,000
        # = ¥3,000.00.
        "name": "tx_monthly_30_days_whole_month_three_samples",
        "direction": "tx",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "10",
        "samples": [
            ("2026-11-03 10:00", 100, 7),
            ("2026-11-03 10:05", 200, 8),
            ("2026-11-03 10:10", 300, 9),
        ],
        "p95_bps": "300000000",
        "mbps": "300.00",
        "amount": "3000.00",
    },
    {
        # tx 10, 20, ..., 200 Mbps (20 samples) drop 1 (the 200): 190 Mbps.
        # 190 x ¥2.50 x 2,678,400 / 2,678,400 = ¥475.00.
        "name": "tx_monthly_31_days_twenty_samples_drop_one",
        "direction": "tx",
        "window": "monthly",
        "period": "2026-12",
        "start": "2026-12-01 00:00",
        "end": "2027-01-01 00:00",
        "price": "2.50",
        "samples": slots("2026-12-20", "08:00", [(10 * k, 1) for k in range(1, 21)]),
        "p95_bps": "190000000",
        "mbps": "190.00",
        "amount": "475.00",
    },
    {
        # Mid-month start in a 28-day February: 15 Feb 00:00 to 1 Mar 00:00 = 14 days =
        # 1,209,600 s. tx 1..40 Mbps (40 samples) drop 2: 38 Mbps.
        # 38 x ¥12 x 1,209,600 / 2,419,200 = 456 x 0.5 = ¥228.00.
        "name": "tx_monthly_28_days_mid_month_start",
        "direction": "tx",
        "window": "monthly",
        "period": "2026-02",
        "start": "2026-02-15 00:00",
        "end": "2026-03-01 00:00",
        "price": "12",
        "samples": slots("2026-02-20", "00:00", [(k, 0) for k in range(1, 41)]),
        "p95_bps": "38000000",
        "mbps": "38.00",
        "amount": "228.00",
    },
    {
        # Mid-month end in a 29-day February (2028): 1 Feb 00:00 to 10 Feb 12:00 = 9.5 days
        # = 820,800 s. 5 samples, highest 90 Mbps. 90 x ¥7 = ¥630 x 820,800 / 2,505,600
        # (= 19/58) = 11,970 / 58 = 206.3793... -> ¥206.38.
        "name": "tx_monthly_29_days_mid_month_end",
        "direction": "tx",
        "window": "monthly",
        "period": "2028-02",
        "start": "2028-02-01 00:00",
        "end": "2028-02-10 12:00",
        "price": "7",
        "samples": slots("2028-02-05", "12:00", [(50, 0), (60, 0), (70, 0), (80, 0), (90, 0)]),
        "p95_bps": "90000000",
        "mbps": "90.00",
        "amount": "206.38",
    },
    {
        # Missing slots: 21 samples spread over three days with holes between them (a
        # missing slot is no sample, not a zero). 21 drop floor(1.05) = 1: of tx 5, 10,
        # ..., 105 the 105 goes and 100 Mbps is billed. 100 x ¥1.2345 = ¥123.45.
        "name": "tx_monthly_missing_slots",
        "direction": "tx",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "1.2345",
        "samples": [
            (f"2026-11-{2 + k // 7:02d} {(3 * k) % 24:02d}:{5 * (k % 3):02d}", 5 * (k + 1), 0)
            for k in range(21)
        ],
        "p95_bps": "100000000",
        "mbps": "100.00",
        "amount": "123.45",
    },
    {
        # Raw bytes and a short first slot: a lease read at its start, 10:02, gives the slot
        # 10:00 a 180 s piece. 1,000,000,007 B over 180 s = 8,000,000,056 / 180 =
        # 44,444,444.7555... bit/s (to 28 digits); then 300 s of 1,500,000,000 B = 40 Mbps.
        # Two samples: the highest, 44.44 Mbps (44.4444447 rounds down). 44.44 x ¥3 x
        # 2,592,000 / 2,592,000 = ¥133.32.
        "name": "tx_monthly_raw_bytes_short_first_slot",
        "direction": "tx",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "3",
        "bytes": True,
        "samples": [
            ("2026-11-09 10:02", 1_000_000_007, 0, 180),
            ("2026-11-09 10:05", 1_500_000_000, 0),
        ],
        "p95_bps": "44444444.75555555555555555556",
        "mbps": "44.44",
        "amount": "133.32",
    },
    # --- monthly, rx --------------------------------------------------------------------
    {
        # rx 20, 40, 60 (tx larger, ignored): 60 Mbps. 60 x ¥4 = ¥240.00 for the month.
        "name": "rx_monthly_30_days",
        "direction": "rx",
        "window": "monthly",
        "period": "2026-09",
        "start": "2026-09-01 00:00",
        "end": "2026-10-01 00:00",
        "price": "4",
        "samples": [
            ("2026-09-10 00:00", 500, 20),
            ("2026-09-10 00:05", 600, 40),
            ("2026-09-10 00:10", 700, 60),
        ],
        "p95_bps": "60000000",
        "mbps": "60.00",
        "amount": "240.00",
    },
    {
        # Mid-month start and end in a 31-day month: 10 Jan 06:00 to 20 Jan 18:00 = 10.5
        # days = 907,200 s. rx 1..25 Mbps (25 samples) drop 1: 24 Mbps. 24 x ¥5 = ¥120 x
        # 907,200 / 2,678,400 (= 21/62) = 2,520 / 62 = 40.645... -> ¥40.65.
        "name": "rx_monthly_31_days_mid_month_start_and_end",
        "direction": "rx",
        "window": "monthly",
        "period": "2027-01",
        "start": "2027-01-10 06:00",
        "end": "2027-01-20 18:00",
        "price": "5",
        "samples": slots("2027-01-15", "09:00", [(999, k) for k in range(1, 26)]),
        "p95_bps": "24000000",
        "mbps": "24.00",
        "amount": "40.65",
    },
    # --- monthly, max and max_of_p95 -------------------------------------------------------
    {
        # SPLIT_PEAKS per interval max: 1000, 900, then 100 x 18; 20 samples drop 1 (the
        # 1000): 900 Mbps. 900 x ¥0.80 = ¥720.00.
        "name": "max_monthly_30_days_split_peaks",
        "direction": "max",
        "window": "monthly",
        "period": "2026-06",
        "start": "2026-06-01 00:00",
        "end": "2026-07-01 00:00",
        "price": "0.80",
        "samples": slots("2026-06-12", "13:00", SPLIT_PEAKS),
        "p95_bps": "900000000",
        "mbps": "900.00",
        "amount": "720.00",
    },
    {
        # The same samples, each direction alone: tx 1000 then 100 x 19 drop 1: 100; rx 900
        # then 50 x 19 drop 1: 50. The larger: 100 Mbps. 100 x ¥0.80 = ¥80.00.
        "name": "max_of_p95_monthly_30_days_split_peaks",
        "direction": "max_of_p95",
        "window": "monthly",
        "period": "2026-06",
        "start": "2026-06-01 00:00",
        "end": "2026-07-01 00:00",
        "price": "0.80",
        "samples": slots("2026-06-12", "13:00", SPLIT_PEAKS),
        "p95_bps": "100000000",
        "mbps": "100.00",
        "amount": "80.00",
        "tx_p95_bps": "100000000",
        "rx_p95_bps": "50000000",
    },
    {
        # 28-day February, mid-month start (22 Feb 00:00 to 1 Mar: 7 days = 604,800 s, a
        # quarter of 2,419,200). (tx, rx): (30, 70), (80, 20), (55, 55): max 70, 80, 55 ->
        # 3 samples drop 0: 80 Mbps. 80 x ¥6 = ¥480 x 1/4 = ¥120.00.
        "name": "max_monthly_28_days_mid_month_start",
        "direction": "max",
        "window": "monthly",
        "period": "2026-02",
        "start": "2026-02-22 00:00",
        "end": "2026-03-01 00:00",
        "price": "6",
        "samples": slots("2026-02-23", "23:40", [(30, 70), (80, 20), (55, 55)]),
        "p95_bps": "80000000",
        "mbps": "80.00",
        "amount": "120.00",
    },
    {
        # 29-day February, whole month. 20 samples: tx 10 x 20 (p95 10); rx 1..20 x 10
        # (10, 20, ..., 200) drop 1: 190. The larger: rx 190 Mbps. 190 x ¥1.10 = ¥209.00.
        "name": "max_of_p95_monthly_29_days_rx_wins",
        "direction": "max_of_p95",
        "window": "monthly",
        "period": "2028-02",
        "start": "2028-02-01 00:00",
        "end": "2028-03-01 00:00",
        "price": "1.10",
        "samples": slots("2028-02-29", "22:00", [(10, 10 * k) for k in range(1, 21)]),
        "p95_bps": "190000000",
        "mbps": "190.00",
        "amount": "209.00",
        "tx_p95_bps": "10000000",
        "rx_p95_bps": "190000000",
    },
    {
        # Samples stored before received bytes were metered (rx None) under max: such a
        # sample's larger figure is its tx. (tx, rx): (40, None), (10, 30): max 40, 30 ->
        # 40 Mbps. 40 x ¥2 = ¥80.00.
        "name": "max_monthly_unmeasured_rx_counts_its_tx",
        "direction": "max",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "2",
        "samples": [("2026-11-02 00:00", 40, None), ("2026-11-02 00:05", 10, 30)],
        "p95_bps": "40000000",
        "mbps": "40.00",
        "amount": "80.00",
    },
    {
        # No samples at all: nothing to bill, 0.00 Mbps, ¥0.00.
        "name": "rx_monthly_no_samples",
        "direction": "rx",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "9",
        "samples": [],
        "p95_bps": None,
        "mbps": "0.00",
        "amount": "0.00",
    },
    # --- daily_average ------------------------------------------------------------------
    {
        # Three days with samples in a 30-day month: 3 Nov [100, 200] -> 200; 4 Nov [300]
        # -> 300; 5 Nov [40, 50, 60] -> 60. The other 27 days have none and are left out.
        # (200 + 300 + 60) / 3 = 186.666... Mbps -> 186.67. 186.67 x ¥3 = ¥560.01.
        "name": "tx_daily_average_30_days_three_days",
        "direction": "tx",
        "window": "daily_average",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "3",
        "samples": [
            ("2026-11-03 10:00", 100, 0),
            ("2026-11-03 11:00", 200, 0),
            ("2026-11-04 10:00", 300, 0),
            ("2026-11-05 10:00", 40, 0),
            ("2026-11-05 10:05", 50, 0),
            ("2026-11-05 10:10", 60, 0),
        ],
        "p95_bps": "560000000/3",
        "mbps": "186.67",
        "amount": "560.01",
        "days": 3,
    },
    {
        # Shanghai days, not UTC days: 23:55 on 5 Nov is 5 Nov's (15:55 UTC); 00:00 on 6 Nov
        # (16:00 UTC, still 5 Nov in UTC) is 6 Nov's. Day 5 [10, 70] -> 70; day 6 [90, 20]
        # -> 90. (70 + 90) / 2 = 80 Mbps. 80 x ¥1.50 = ¥120.00 (in UTC days: one day, 90).
        "name": "tx_daily_average_days_cut_in_the_tenants_zone",
        "direction": "tx",
        "window": "daily_average",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "1.50",
        "samples": [
            ("2026-11-05 23:50", 10, 0),
            ("2026-11-05 23:55", 70, 0),
            ("2026-11-06 00:00", 90, 0),
            ("2026-11-06 00:05", 20, 0),
        ],
        "p95_bps": "80000000",
        "mbps": "80.00",
        "amount": "120.00",
        "days": 2,
    },
    {
        # 31-day month, partial first and last days: the lease runs 10 Dec 18:00 to 12 Dec
        # 06:00 (36 h = 129,600 s). 10 Dec (6 h of it) [rx 30, 50] -> 50; 11 Dec [rx 10,
        # 20, 25] -> 25; 12 Dec (6 h) [rx 90] -> 90. Each partial day counts as a day with
        # the samples it has: (50 + 25 + 90) / 3 = 55 Mbps. 55 x ¥20 = ¥1,100 x 129,600 /
        # 2,678,400 (= 3/62) = 3,300 / 62 = 53.2258... -> ¥53.23.
        "name": "rx_daily_average_31_days_partial_first_and_last_day",
        "direction": "rx",
        "window": "daily_average",
        "period": "2026-12",
        "start": "2026-12-10 18:00",
        "end": "2026-12-12 06:00",
        "price": "20",
        "samples": [
            ("2026-12-10 18:00", 1, 30),
            ("2026-12-10 23:55", 1, 50),
            ("2026-12-11 00:00", 1, 10),
            ("2026-12-11 12:00", 1, 20),
            ("2026-12-11 23:55", 1, 25),
            ("2026-12-12 05:55", 1, 90),
        ],
        "p95_bps": "55000000",
        "mbps": "55.00",
        "amount": "53.23",
        "days": 3,
    },
    {
        # A day without samples in the middle is left out (not a zero): 1 Sep [rx 40], 3 Sep
        # [rx 20]; 2 Sep has none. (40 + 20) / 2 = 30 Mbps (as a zero day: 20). 30 x ¥10 =
        # ¥300.00.
        "name": "rx_daily_average_a_day_without_samples_is_left_out",
        "direction": "rx",
        "window": "daily_average",
        "period": "2026-09",
        "start": "2026-09-01 00:00",
        "end": "2026-10-01 00:00",
        "price": "10",
        "samples": [("2026-09-01 12:00", 0, 40), ("2026-09-03 12:00", 0, 20)],
        "p95_bps": "30000000",
        "mbps": "30.00",
        "amount": "300.00",
        "days": 2,
    },
    {
        # Each day's 95th drops that day's top 5 %: 14 Feb (28-day month) has 20 samples tx
        # 1..20 x 5 Mbps (5, ..., 100) -> drop 1: 95; 15 Feb [tx 45] -> 45. (95 + 45) / 2 =
        # 70 Mbps. 70 x ¥4 = ¥280.00.
        "name": "tx_daily_average_28_days_each_day_drops_its_top",
        "direction": "tx",
        "window": "daily_average",
        "period": "2026-02",
        "start": "2026-02-01 00:00",
        "end": "2026-03-01 00:00",
        "price": "4",
        "samples": [
            *slots("2026-02-14", "20:00", [(5 * k, 0) for k in range(1, 21)]),
            ("2026-02-15 09:00", 45, 0),
        ],
        "p95_bps": "70000000",
        "mbps": "70.00",
        "amount": "280.00",
        "days": 2,
    },
    {
        # max per interval, daily, 29-day month: 28 Feb (tx, rx) (10, 60), (70, 5) -> max
        # 60, 70 -> 70; 29 Feb (20, 33) -> 33. (70 + 33) / 2 = 51.5 Mbps. 51.5 x ¥2 = ¥103.00.
        "name": "max_daily_average_29_days",
        "direction": "max",
        "window": "daily_average",
        "period": "2028-02",
        "start": "2028-02-01 00:00",
        "end": "2028-03-01 00:00",
        "price": "2",
        "samples": [
            ("2028-02-28 08:00", 10, 60),
            ("2028-02-28 08:05", 70, 5),
            ("2028-02-29 08:00", 20, 33),
        ],
        "p95_bps": "51500000",
        "mbps": "51.50",
        "amount": "103.00",
        "days": 2,
    },
    {
        # max_of_p95, daily, 31-day month: each day's larger direction. 7 Jan tx [10, 20]
        # -> 20, rx [15, 5] -> 15: 20; 8 Jan tx [1] -> 1, rx [44] -> 44: 44. (20 + 44) / 2 =
        # 32 Mbps. 32 x ¥0.25 = ¥8.00 (max of the averages, tx 10.5 vs rx 29.5, would bill
        # 29.5).
        "name": "max_of_p95_daily_average_31_days",
        "direction": "max_of_p95",
        "window": "daily_average",
        "period": "2027-01",
        "start": "2027-01-01 00:00",
        "end": "2027-02-01 00:00",
        "price": "0.25",
        "samples": [
            ("2027-01-07 10:00", 10, 15),
            ("2027-01-07 10:05", 20, 5),
            ("2027-01-08 10:00", 1, 44),
        ],
        "p95_bps": "32000000",
        "mbps": "32.00",
        "amount": "8.00",
        "days": 2,
    },
    # --- from counter readings: reset, 64-bit wrap, a missing reading ---------------------
    {
        # tx counter 0, 3.75 GB, then 1.875 GB (backwards: a 64-bit counter going back is a
        # reset, 2^64 - 3.75e9 + 1.875e9 B would be far above what 100 Gbit/s sends in 300
        # s), then 1.875 + 7.5 GB. Intervals: 3.75e9 B (100 Mbps), reset -> 1.875e9 B (the
        # bytes since the restart, 50 Mbps), 7.5e9 B (200 Mbps). 3 samples: 200 Mbps.
        # 200 x ¥0.50 = ¥100.00.
        "name": "tx_monthly_counter_reset",
        "direction": "tx",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "0.50",
        "readings": [
            ("2026-11-04 10:00", 0, 0),
            ("2026-11-04 10:05", mbps(100), 0),
            ("2026-11-04 10:10", mbps(50), 0),
            ("2026-11-04 10:15", mbps(250), 0),
        ],
        "p95_bps": "200000000",
        "mbps": "200.00",
        "amount": "100.00",
        "resets": 1,
    },
    {
        # The rx counter resets (the tx one does not): rx 5 GB -> 10 GB (+5e9: 133.33...
        # Mbps), then 0.75 GB (reset: 0.75e9 B = 20 Mbps). 2 samples: 133.333... Mbps ->
        # 133.33. 133.33 x ¥3 = ¥399.99.
        "name": "rx_monthly_counter_reset",
        "direction": "rx",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "3",
        "readings": [
            ("2026-11-04 10:00", 0, 5_000_000_000),
            ("2026-11-04 10:05", 1, 10_000_000_000),
            ("2026-11-04 10:10", 2, 750_000_000),
        ],
        "p95_bps": "133333333.3333333333333333333",
        "mbps": "133.33",
        "amount": "399.99",
    },
    {
        # The tx counter wraps past 2^64: 2^64 - 10^9 -> 2.75e9: 2^64 - (2^64 - 10^9) +
        # 2.75e9 = 3.75e9 B (100 Mbps, plausible at 100 Gbit/s), then +1.5e9 (40 Mbps).
        # 2 samples: 100 Mbps. 100 x ¥1 = ¥100.00.
        "name": "tx_monthly_counter_wrap",
        "direction": "tx",
        "window": "monthly",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "1",
        "readings": [
            ("2026-11-04 10:00", WRAP - 10**9, 0),
            ("2026-11-04 10:05", 2_750_000_000, 0),
            ("2026-11-04 10:10", 4_250_000_000, 0),
        ],
        "p95_bps": "100000000",
        "mbps": "100.00",
        "amount": "100.00",
        "wraps": 1,
    },
    {
        # The rx counter wraps, direction max: rx 2^64 - 5e8 -> 7e9: 7.5e9 B (200 Mbps); tx
        # 30 Mbps; then rx +3.75e8 (10 Mbps), tx +1.5e9 (40 Mbps). max per interval: 200,
        # 40 -> 200 Mbps. 200 x ¥2 x 1,209,600 / 2,419,200 (28-day February, the lease
        # from 15 Feb) = ¥200.00.
        "name": "max_monthly_rx_counter_wrap_28_days",
        "direction": "max",
        "window": "monthly",
        "period": "2026-02",
        "start": "2026-02-15 00:00",
        "end": "2026-03-01 00:00",
        "price": "2",
        "readings": [
            ("2026-02-20 10:00", 0, WRAP - 500_000_000),
            ("2026-02-20 10:05", mbps(30), 7_000_000_000),
            ("2026-02-20 10:10", mbps(70), 7_375_000_000),
        ],
        "p95_bps": "200000000",
        "mbps": "200.00",
        "amount": "200.00",
    },
    {
        # A missing reading: readings at 10:00, (10:05 missing), 10:10, 10:15. rx +7.5e9
        # over 10 minutes gives each of its two slots 3.75e9 (100 Mbps); then +1.5e9 (40
        # Mbps). Daily average of one day: 3 samples, 100 Mbps. tx is 0 throughout.
        # max_of_p95: max(0, 100) = 100 Mbps. 100 x ¥0.75 = ¥75.00.
        "name": "max_of_p95_daily_missing_reading_spread",
        "direction": "max_of_p95",
        "window": "daily_average",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "0.75",
        "readings": [
            ("2026-11-04 10:00", 0, 0),
            ("2026-11-04 10:10", 0, 7_500_000_000),
            ("2026-11-04 10:15", 0, 9_000_000_000),
        ],
        "p95_bps": "100000000",
        "mbps": "100.00",
        "amount": "75.00",
        "days": 1,
    },
    {
        # Readings across Shanghai midnight, daily average of tx: 23:55 -> 00:00 +1.5e9 (40
        # Mbps, 30 Nov's... here 4 Nov's last slot), 00:00 -> 00:05 +3.75e9 (100 Mbps, 5
        # Nov's). (40 + 100) / 2 = 70 Mbps. 70 x ¥1 = ¥70.00.
        "name": "tx_daily_average_readings_across_midnight",
        "direction": "tx",
        "window": "daily_average",
        "period": "2026-11",
        "start": "2026-11-01 00:00",
        "end": "2026-12-01 00:00",
        "price": "1",
        "readings": [
            ("2026-11-04 23:55", 0, 0),
            ("2026-11-05 00:00", mbps(40), 0),
            ("2026-11-05 00:05", mbps(140), 0),
        ],
        "p95_bps": "70000000",
        "mbps": "70.00",
        "amount": "70.00",
        "days": 2,
    },
]
