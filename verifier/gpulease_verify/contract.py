"""Contract rules an auditor needs: credit tiers and weekly windows (maintenance, heavy
probes), read in the tenant's zone."""

from datetime import datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo


def credit_tiers(value: list[dict[str, str]]) -> list[tuple[Decimal, Decimal]]:
    """(below_percent, credit_percent) pairs, the strictest (lowest) threshold first."""
    pairs = [(Decimal(t["below_percent"]), Decimal(t["credit_percent"])) for t in value]
    return sorted(pairs)


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)


def in_weekly_windows(windows: list[dict[str, Any]], instant: datetime, zone: str) -> bool:
    """Whether an aware instant falls inside any weekly window, read in the given zone."""
    local = instant.astimezone(ZoneInfo(zone))
    minute_of_week = local.weekday() * 1440 + local.hour * 60 + local.minute
    week = 7 * 1440
    for window in windows:
        start = window["weekday"] * 1440 + _minutes(window["start"])
        end = window["weekday"] * 1440 + _minutes(window["end"])
        if end <= start:
            end += 1440
        for shift in (0, -week):  # a Sunday window may run into Monday
            if start + shift <= minute_of_week < end + shift:
                return True
    return False
