import pytest
from django.core.exceptions import ValidationError

from leases.contract_rules import (
    credit_tiers,
    in_weekly_windows,
    validate_credit_tiers,
    validate_probe_cadence,
    validate_weekly_windows,
)
from tests.factories import at

SUNDAY_NIGHT = [{"weekday": 6, "start": "23:00", "end": "02:00"}]


@pytest.mark.parametrize(
    ("instant", "inside"),
    [
        ("2026-11-29 22:59", False),  # Sunday, before
        ("2026-11-29 23:00", True),
        ("2026-11-30 01:59", True),  # Monday morning, the window runs past midnight
        ("2026-11-30 02:00", False),
        ("2026-11-22 23:30", True),  # the previous Sunday
    ],
)
def test_weekly_window_read_in_the_tenant_zone(instant, inside):
    assert in_weekly_windows(SUNDAY_NIGHT, at(instant), "Asia/Shanghai") is inside


def test_weekly_window_zone_matters():
    # 23:30 Sunday in Shanghai is 15:30 Sunday UTC: inside for Shanghai, outside for UTC.
    instant = at("2026-11-29 23:30")
    assert in_weekly_windows(SUNDAY_NIGHT, instant, "Asia/Shanghai")
    assert not in_weekly_windows(SUNDAY_NIGHT, instant, "UTC")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"link": 300, "bandwidth": 60}, "Unknown probe kind bandwidth"),
        ({"link": 30}, "at most once a minute"),
        ({"link": "300"}, "at most once a minute"),
        # 30 days and a second: a slot further back than the partitions runs are read in
        ({"collective": 2_592_001}, "at least once every 30 days: give 2592000 seconds"),
    ],
)
def test_bad_cadence_is_refused_in_a_sentence(value, message):
    with pytest.raises(ValidationError, match=message):
        validate_probe_cadence(value)


def test_cadences_from_a_minute_to_thirty_days_are_accepted():
    validate_probe_cadence({"link": 60, "collective": 2_592_000})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([{"weekday": 7, "start": "01:00", "end": "02:00"}], "weekday must be 0"),
        ([{"weekday": 1, "start": "1:00", "end": "02:00"}], "start must be HH:MM"),
        ([{"weekday": 1, "start": "02:00", "end": "02:00"}], "empty"),
    ],
)
def test_bad_windows_are_refused(value, message):
    with pytest.raises(ValidationError, match=message):
        validate_weekly_windows(value)


def test_credit_tiers_validated_and_sorted():
    tiers = [
        {"below_percent": "99.5", "credit_percent": "10"},
        {"below_percent": "95", "credit_percent": "50"},
    ]
    validate_credit_tiers(tiers)
    assert [str(below) for below, _ in credit_tiers(tiers)] == ["95", "99.5"]
    with pytest.raises(ValidationError, match="between 0 and 100"):
        validate_credit_tiers([{"below_percent": "99", "credit_percent": "150"}])
    with pytest.raises(ValidationError, match="same compliance"):
        validate_credit_tiers([*tiers, {"below_percent": "95.0", "credit_percent": "60"}])
