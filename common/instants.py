"""Which instants a request may name, in one place for the API's fields and filters and the
portal's forms.

A parser takes any UTC offset below 24 hours and any year from 1 to 9999; the database
and the calendar arithmetic do not (PostgreSQL refuses an offset of -19:16 in a filter,
SQLite's adapter overflows converting 9999-12-31T23:59:59-14:00 to UTC, a month after
9999-12 does not exist). No zone on Earth is further from UTC than ±14:00 (Kiribati's
Line Islands are +14:00), so an offset beyond that is a typing mistake, not a place.

Writes (a lease's dates, a token's expiry, a measurement's time) take the years 2000 to
2999, the same span as the API's billing months; filters take 1970 to 9999.

An instant sent to the API carries its UTC offset (``Z``, ``+08:00``): a bare
2026-11-10T08:00:00 would be read in the server's zone (Asia/Shanghai by default), eight
hours from what a client in UTC meant, so it is refused, naming the field. A portal form
is different: its browser field has no zone, and the page says which one it is read in
(InstantFormField)."""

from datetime import UTC, datetime, timedelta

from django import forms
from django.utils.translation import gettext as _

MAX_OFFSET = timedelta(hours=14)
WRITE_YEARS = (2000, 2999)
FILTER_YEARS = (1970, 9999)


def naive_problem() -> str:
    return _(
        "Give the instant with its UTC offset (2026-11-10T08:00:00+08:00, or Z for UTC): "
        "without one it is ambiguous."
    )


def instant_problem(value: datetime, years: tuple[int, int]) -> str | None:
    """Why ``value`` (as parsed, offset kept) is not an instant we take, or None."""
    offset = value.utcoffset()
    if offset is None:
        return naive_problem()
    if abs(offset) > MAX_OFFSET:
        return _("A UTC offset is at most ±14:00.")
    first, last = years
    try:
        in_utc = value.astimezone(UTC)
    except OverflowError:
        in_utc = None
    if in_utc is None or not first <= value.year <= last or not first <= in_utc.year <= last:
        return _("Give an instant between %(first)s and %(last)s.") % {
            "first": first,
            "last": last,
        }
    return None


class InstantFormField(forms.DateTimeField):
    """A form's date and time within WRITE_YEARS (a naive value is read in the current
    zone, as forms.DateTimeField does)."""

    def to_python(self, value):  # type: ignore[no-untyped-def]
        instant = super().to_python(value)
        if instant is not None:
            problem = instant_problem(instant, WRITE_YEARS)
            if problem:
                raise forms.ValidationError(problem, code="invalid")
        return instant
