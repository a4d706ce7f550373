"""Billing periods: the one home for calendar-month arithmetic.

A ``Period`` is a calendar month, written ``YYYY-MM`` (ASCII digits only). Its bounds are
cut in a time zone: November 2026 in Asia/Shanghai runs from 2026-10-31T16:00Z to
2026-11-30T16:00Z. Every month shift, previous/next month, bounds and "which month is this
instant in" goes through here; nothing else in the code adds or subtracts months by hand.

Pure Python (no Django), so an auditor's verifier can use the same rules.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# ASCII only: `\d` would also take full-width digits (U+FF10 to U+FF19), and `$` a trailing
# newline.
_PATTERN = re.compile(r"([0-9]{4})-(0[1-9]|1[0-2])", re.ASCII)
PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])$"  # the same rule, for OpenAPI and HTML forms

# Year 1's January has no previous month, and 9999's December no next one (datetime stops
# at 9999-12-31), so periods stay inside the years where both neighbours exist.
MIN_YEAR, MAX_YEAR = 2, 9998


class PeriodError(ValueError):
    """Not a billing period; the message says why, in one line."""


@lru_cache(maxsize=64)
def zone(name: str) -> ZoneInfo:
    """The IANA zone ``name``, or PeriodError."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise PeriodError(f"{name!r} is not a known time zone.") from None


@dataclass(frozen=True, order=True)
class Period:
    year: int
    month: int

    def __post_init__(self) -> None:
        if not 1 <= self.month <= 12:
            raise PeriodError(f"A month is 1 to 12, not {self.month}.")
        if not MIN_YEAR <= self.year <= MAX_YEAR:
            raise PeriodError(f"A billing period's year lies in {MIN_YEAR} to {MAX_YEAR}.")

    # -- making one -------------------------------------------------------------------

    @classmethod
    def parse(cls, text: object) -> Period:
        """``"2026-11"`` -> Period(2026, 11). Anything else, including full-width digits,
        surrounding whitespace or a trailing newline, is a PeriodError."""
        if isinstance(text, Period):
            return text
        match = _PATTERN.fullmatch(text) if isinstance(text, str) else None
        if match is None:
            raise PeriodError(f"A billing period is written YYYY-MM, not {text!r}.")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def containing(cls, instant: datetime, zone_name: str) -> Period:
        """The month that ``instant`` (aware) lies in, on the wall clock of ``zone_name``."""
        if instant.tzinfo is None:
            raise ValueError("The instant must be timezone-aware.")
        local = instant.astimezone(zone(zone_name))
        return cls(local.year, local.month)

    @classmethod
    def of_date(cls, day: date) -> Period:
        return cls(day.year, day.month)

    # -- arithmetic -------------------------------------------------------------------

    def shift(self, months: int) -> Period:
        """The period ``months`` later (negative: earlier). 2026-12 shifted by 1 is 2027-01."""
        index = self.year * 12 + (self.month - 1) + months
        return Period(index // 12, index % 12 + 1)

    @property
    def previous(self) -> Period:
        return self.shift(-1)

    @property
    def next(self) -> Period:
        return self.shift(1)

    def months_until(self, other: Period) -> int:
        """How many months ``other`` lies after this one (negative when before)."""
        return (other.year - self.year) * 12 + (other.month - self.month)

    @staticmethod
    def span(first: Period, last: Period) -> Iterator[Period]:
        """Every period from ``first`` to ``last``, both included, oldest first."""
        for step in range(first.months_until(last) + 1):
            yield first.shift(step)

    # -- the month on a clock ---------------------------------------------------------

    @property
    def first_day(self) -> date:
        return date(self.year, self.month, 1)

    @property
    def days(self) -> int:
        return (self.next.first_day - self.first_day).days

    def local_start(self, zone_name: str) -> datetime:
        """Local midnight on the 1st, aware, in ``zone_name``. Where a DST jump skips that
        midnight, the offset in force before the jump is used (zoneinfo's fold=0)."""
        return datetime(self.year, self.month, 1, tzinfo=zone(zone_name))

    def start(self, zone_name: str) -> datetime:
        """The first instant of the month, in UTC."""
        return self.local_start(zone_name).astimezone(UTC)

    def end(self, zone_name: str) -> datetime:
        """The first instant after the month (the next month's start), in UTC."""
        return self.next.start(zone_name)

    def bounds(self, zone_name: str) -> tuple[datetime, datetime]:
        """``[start, end)`` in UTC."""
        return self.start(zone_name), self.end(zone_name)

    def seconds(self, zone_name: str) -> int:
        """The month's length on that clock: 30 days in a DST-free zone = 2,592,000 s."""
        start, end = self.bounds(zone_name)
        return (end - start) // timedelta(seconds=1)

    def contains(self, instant: datetime, zone_name: str) -> bool:
        start, end = self.bounds(zone_name)
        return start <= instant < end

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"
