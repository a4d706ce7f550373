"""The range the lease page's charts share (issue 33 item 4): one picker sets the
throughput, NCCL bus bandwidth and link-state charts (and their CSV exports) to the same
[start, end).

- ``?days=N``: the last N days, N one of ``selectors.CHART_WINDOWS`` (the page's windows
  since issue 17; links keep working);
- ``?range=24h``: the last 24 hours; ``?range=this-month`` / ``?range=last-month``: the
  tenant's calendar month (``gpulease_verify.periods.Period``), this one up to now;
- ``?from=YYYY-MM-DD&to=YYYY-MM-DD``: whole days in the tenant's time zone, both included,
  at most ``MAX_DAYS`` of them, ending no later than now.

Anything else (a date that is not one, an end before the start, a span too long) falls
back to the default window, with the reason for the page to show: never a 500."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.http import HttpRequest
from django.utils.translation import gettext as _

from common.instants import WRITE_YEARS
from gpulease_verify.periods import Period
from portal import selectors

MAX_DAYS = 366
PRESETS = ("24h", "this-month", "last-month")


@dataclass(frozen=True)
class ChartRange:
    start: datetime  # UTC
    end: datetime
    key: str  # "days-30", "24h", "this-month", "last-month" or "custom"
    title: str  # "the last 24 hours", "2026-11", "2026-11-01 to 2026-11-05"
    params: dict[str, str] = field(default_factory=dict)  # the query choosing it
    preset_days: int | None = None  # ?days=N: the pages' wording since issue 17
    error: str = ""  # why the range asked for was not taken
    first_day: date | None = None  # the picker's from/to, in the tenant's calendar
    last_day: date | None = None

    @property
    def days(self) -> float:
        """The span in days (a fraction for 24 hours or a month so far)."""
        return (self.end - self.start).total_seconds() / 86400

    @property
    def query(self) -> str:
        """The query string choosing this range, for CSV and incident links."""
        return urlencode(self.params)


def _days(days: int, instant: datetime, zone: ZoneInfo) -> ChartRange:
    start = instant - timedelta(days=days)
    return ChartRange(
        start,
        instant,
        f"days-{days}",
        _("the last %(days)s days") % {"days": days},
        {"days": str(days)},
        preset_days=days,
        first_day=start.astimezone(zone).date(),
        last_day=instant.astimezone(zone).date(),
    )


def _parse_day(text: str) -> date | None:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        return None
    first, last = WRITE_YEARS
    return day if first <= day.year <= last and len(text) == 10 else None


def chart_range(request: HttpRequest, zone_name: str, instant: datetime) -> ChartRange:
    """The range the request asks for (see the module's docstring)."""
    zone = ZoneInfo(zone_name)
    default = _days(selectors.CHART_DAYS, instant, zone)
    preset = request.GET.get("range", "")
    if preset == "24h":
        return ChartRange(
            instant - timedelta(hours=24),
            instant,
            "24h",
            _("the last 24 hours"),
            {"range": "24h"},
            first_day=(instant - timedelta(hours=24)).astimezone(zone).date(),
            last_day=instant.astimezone(zone).date(),
        )
    if preset in ("this-month", "last-month"):
        period = Period.containing(instant, zone_name)
        if preset == "last-month":
            period = period.previous
        start, end = period.bounds(zone_name)
        end = min(end, instant)
        return ChartRange(
            start,
            end,
            preset,
            str(period),
            {"range": preset},
            first_day=period.first_day,
            last_day=(end - timedelta(microseconds=1)).astimezone(zone).date(),
        )
    if "from" in request.GET or "to" in request.GET:
        first = _parse_day(request.GET.get("from", ""))
        last = _parse_day(request.GET.get("to", ""))
        if first is None or last is None:
            return _refused(default, _("Give the range as two dates, YYYY-MM-DD."))
        if last < first:
            return _refused(default, _("The range ends before it starts."))
        if (last - first).days + 1 > MAX_DAYS:
            return _refused(
                default, _("The range is longer than %(days)s days.") % {"days": MAX_DAYS}
            )
        start = datetime.combine(first, time(), zone)
        end = min(datetime.combine(last + timedelta(days=1), time(), zone), instant)
        if start >= end:
            return _refused(default, _("The range starts after now."))
        return ChartRange(
            start.astimezone(instant.tzinfo),
            end.astimezone(instant.tzinfo),
            "custom",
            _("%(first)s to %(last)s") % {"first": first, "last": last},
            {"from": first.isoformat(), "to": last.isoformat()},
            first_day=first,
            last_day=last,
        )
    try:
        days = int(request.GET.get("days", selectors.CHART_DAYS))
    except ValueError:
        return default
    return _days(days, instant, zone) if days in selectors.CHART_WINDOWS else default


def _refused(default: ChartRange, reason: str) -> ChartRange:
    return ChartRange(
        default.start,
        default.end,
        default.key,
        default.title,
        default.params,
        preset_days=default.preset_days,
        error=reason,
        first_day=default.first_day,
        last_day=default.last_day,
    )
