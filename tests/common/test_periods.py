"""gpulease_verify.periods: the one home of month arithmetic, checked against hand-worked dates."""

from datetime import UTC, date, datetime, timedelta

import pytest

from gpulease_verify.periods import PATTERN, Period, PeriodError

DAY = 86_400


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_november_in_shanghai_starts_at_16_00_utc():
    november = Period.parse("2026-11")
    assert november.bounds("Asia/Shanghai") == (utc("2026-10-31 16:00"), utc("2026-11-30 16:00"))
    assert november.bounds("UTC") == (utc("2026-11-01 00:00"), utc("2026-12-01 00:00"))
    # 30 days x 86,400 = 2,592,000 s.
    assert november.seconds("Asia/Shanghai") == 2_592_000


def test_december_rolls_into_the_next_year():
    december = Period.parse("2026-12")
    assert december.next == Period(2027, 1)
    assert december.end("Asia/Shanghai") == utc("2026-12-31 16:00")
    assert Period(2027, 1).previous == december
    assert str(december.next) == "2027-01"


@pytest.mark.parametrize(
    ("start", "months", "expected"),
    [
        ("2026-11", 1, "2026-12"),
        ("2026-11", 2, "2027-01"),  # the demo's "month after next" that asked for month 13
        ("2026-12", 1, "2027-01"),
        ("2027-01", -1, "2026-12"),
        ("2026-03", -3, "2025-12"),
        ("2026-03", 9, "2026-12"),
        ("2026-03", 10, "2027-01"),
        ("2026-01", -25, "2023-12"),
        ("2026-05", 0, "2026-05"),
    ],
)
def test_shifts_cross_year_ends(start, months, expected):
    assert str(Period.parse(start).shift(months)) == expected
    assert Period.parse(start).months_until(Period.parse(expected)) == months


@pytest.mark.parametrize(
    ("period", "days"),
    [("2027-02", 28), ("2028-02", 29), ("2100-02", 28), ("2000-02", 29), ("2026-12", 31)],
)
def test_month_lengths_follow_the_gregorian_calendar(period, days):
    assert Period.parse(period).days == days
    assert Period.parse(period).seconds("Asia/Shanghai") == days * DAY


def test_dst_months_are_an_hour_short_or_long():
    # Europe/Berlin: 29 March 2026 loses an hour, 25 October 2026 gains one.
    assert Period.parse("2026-03").seconds("Europe/Berlin") == 31 * DAY - 3_600  # 2,674,800
    assert Period.parse("2026-10").seconds("Europe/Berlin") == 31 * DAY + 3_600  # 2,682,000


@pytest.mark.parametrize(
    ("instant", "zone", "expected"),
    [
        # The last minute of November in Shanghai is 15:59 UTC on the 30th ...
        ("2026-11-30 15:59", "Asia/Shanghai", "2026-11"),
        # ... and 16:00 UTC is already 1 December there, while still 30 November in UTC.
        ("2026-11-30 16:00", "Asia/Shanghai", "2026-12"),
        ("2026-11-30 16:00", "UTC", "2026-11"),
        ("2026-12-31 15:59", "Asia/Shanghai", "2026-12"),
        ("2026-12-31 16:00", "Asia/Shanghai", "2027-01"),
        ("2028-02-28 16:00", "Asia/Shanghai", "2028-02"),  # 29 Feb 2028 00:00 local
        ("2027-02-28 16:00", "Asia/Shanghai", "2027-03"),  # 1 Mar 2027 00:00 local
        ("2026-12-31 23:59", "UTC", "2026-12"),
        ("2027-01-01 00:00", "UTC", "2027-01"),
        ("2026-11-30 23:00", "Pacific/Kiritimati", "2026-12"),  # UTC+14
        ("2026-12-01 11:00", "Pacific/Pago_Pago", "2026-12"),  # UTC-11
        ("2026-12-01 10:59", "Pacific/Pago_Pago", "2026-11"),
    ],
)
def test_an_instant_lies_in_the_month_of_its_local_clock(instant, zone, expected):
    period = Period.containing(utc(instant), zone)
    assert str(period) == expected
    assert period.contains(utc(instant), zone)
    assert not period.next.contains(utc(instant), zone)


@pytest.mark.parametrize(
    "text",
    [
        "2026-13",
        "2026-00",
        "2026-1",
        "26-11",
        "2026/11",
        "２０２６-11",  # full-width digits  # noqa: RUF001
        "2026-11\n",
        " 2026-11",
        "2026-11 ",
        "2026-11-01",
        "",
        "0001-01",  # no month before it
        "9999-12",  # no month after it
        "2026-1\x00",
    ],
)
def test_anything_but_ascii_yyyy_mm_is_refused(text):
    with pytest.raises(PeriodError, match=r"YYYY-MM|year lies"):
        Period.parse(text)


def test_non_strings_are_refused_with_the_same_error():
    for value in (None, 202611, b"2026-11", ["2026-11"]):
        with pytest.raises(PeriodError, match="YYYY-MM"):
            Period.parse(value)


def test_unknown_zones_are_refused():
    with pytest.raises(PeriodError, match="not a known time zone"):
        Period(2026, 11).bounds("Mars/Olympus_Mons")


def test_span_lists_every_month_between_both_ends():
    assert [str(p) for p in Period.span(Period(2026, 11), Period(2027, 2))] == [
        "2026-11",
        "2026-12",
        "2027-01",
        "2027-02",
    ]
    assert list(Period.span(Period(2027, 2), Period(2026, 11))) == []


def test_the_pattern_for_forms_matches_what_parse_accepts():
    import re

    assert re.fullmatch(PATTERN, "2026-11")
    assert not re.fullmatch(PATTERN, "2026-13")


def test_every_month_of_a_decade_tiles_the_timeline_without_gaps():
    # Month ends meet the next month's start exactly, in zones either side of UTC.
    for zone in ("Asia/Shanghai", "UTC", "America/New_York", "Pacific/Kiritimati"):
        period = Period(2025, 1)
        total = timedelta()
        for _ in range(120):
            assert period.end(zone) == period.next.start(zone)
            total += period.end(zone) - period.start(zone)
            period = period.next
        assert Period(2025, 1).start(zone) + total == Period(2035, 1).start(zone)
    assert Period(2025, 1).first_day == date(2025, 1, 1)
