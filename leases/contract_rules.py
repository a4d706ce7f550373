"""Pure rules for the JSON parts of contract terms: their defaults, their validation and
how to read them. No ORM here, so billing and audit recomputation can reuse it."""

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

from gpulease_verify.contract import credit_tiers, in_weekly_windows
from leases.choices import ProbeKind

# Seconds between probes of each kind.
DEFAULT_PROBE_CADENCE_S: dict[str, int] = {
    ProbeKind.LINK: 300,
    ProbeKind.COUNTERS: 300,
    ProbeKind.THROUGHPUT: 3600,
    ProbeKind.LATENCY: 3600,
    ProbeKind.COLLECTIVE: 86400,
}
MIN_CADENCE_S = 60
# A probe runs at least monthly: a run's slot then lies at most this long before it ran,
# which bounds the monthly partitions a query by run time reads (benchmarks SLOT_REACH).
MAX_CADENCE_S = 30 * 86400

# Public-cloud style: monthly compliance below a level earns a share of the network fee.
DEFAULT_CREDIT_TIERS: list[dict[str, str]] = [
    {"below_percent": "99.5", "credit_percent": "10"},
    {"below_percent": "99", "credit_percent": "25"},
    {"below_percent": "95", "credit_percent": "50"},
]

# DOMAIN.md: 25 Gbps RoCE is the floor for multi-node training.
MULTI_NODE_FLOOR_GBPS = Decimal("25")

_HHMM = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def default_probe_cadence() -> dict[str, int]:
    return dict(DEFAULT_PROBE_CADENCE_S)


def default_credit_tiers() -> list[dict[str, str]]:
    return [dict(tier) for tier in DEFAULT_CREDIT_TIERS]


def validate_probe_cadence(value: Any) -> None:
    if not isinstance(value, dict):
        raise ValidationError(_("Probe cadence must map each probe kind to seconds."))
    unknown = sorted(set(value) - set(ProbeKind.values))
    if unknown:
        raise ValidationError(
            _("Unknown probe kind %(kinds)s; known kinds are %(known)s.")
            % {"kinds": ", ".join(unknown), "known": ", ".join(ProbeKind.values)}
        )
    for kind, seconds in value.items():
        if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < MIN_CADENCE_S:
            raise ValidationError(
                _(
                    "The %(kind)s probe must run at most once a minute: "
                    "give whole seconds, %(min)s or more."
                )
                % {"kind": kind, "min": MIN_CADENCE_S}
            )
        if seconds > MAX_CADENCE_S:
            raise ValidationError(
                _(
                    "The %(kind)s probe must run at least once every 30 days: "
                    "give %(max)s seconds or fewer."
                )
                % {"kind": kind, "max": MAX_CADENCE_S}
            )


def _percent(raw: Any, what: str, index: int) -> Decimal:
    try:
        value = Decimal(str(raw))
    except (InvalidOperation, ValueError):
        raise ValidationError(
            _("Credit tier %(n)s: %(what)s must be a number.") % {"n": index, "what": what}
        ) from None
    if not Decimal(0) <= value <= Decimal(100):
        raise ValidationError(
            _("Credit tier %(n)s: %(what)s must be between 0 and 100.") % {"n": index, "what": what}
        )
    return value


def validate_credit_tiers(value: Any) -> None:
    if not isinstance(value, list):
        raise ValidationError(_("Credit tiers must be a list."))
    seen: set[Decimal] = set()
    for index, tier in enumerate(value, start=1):
        if not isinstance(tier, dict) or set(tier) != {"below_percent", "credit_percent"}:
            raise ValidationError(
                _("Credit tier %(n)s must have exactly below_percent and credit_percent.")
                % {"n": index}
            )
        below = _percent(tier["below_percent"], "below_percent", index)
        _percent(tier["credit_percent"], "credit_percent", index)
        if below in seen:
            raise ValidationError(
                _("Two credit tiers start below the same compliance, %(p)s%%.") % {"p": below}
            )
        seen.add(below)


def validate_weekly_windows(value: Any) -> None:
    """A list of {"weekday": 0-6 (Monday 0), "start": "HH:MM", "end": "HH:MM"}; end may be
    "24:00"; a window that ends before it starts runs past midnight."""
    if not isinstance(value, list):
        raise ValidationError(_("Windows must be a list."))
    for index, window in enumerate(value, start=1):
        if not isinstance(window, dict) or set(window) - {"weekday", "start", "end", "note"}:
            raise ValidationError(
                _("Window %(n)s must have weekday, start and end (and optionally note).")
                % {"n": index}
            )
        weekday = window.get("weekday")
        if not isinstance(weekday, int) or isinstance(weekday, bool) or not 0 <= weekday <= 6:
            raise ValidationError(
                _("Window %(n)s: weekday must be 0 (Monday) to 6 (Sunday).") % {"n": index}
            )
        start, end = window.get("start"), window.get("end")
        if not isinstance(start, str) or not _HHMM.match(start):
            raise ValidationError(_("Window %(n)s: start must be HH:MM.") % {"n": index})
        if not isinstance(end, str) or not (_HHMM.match(end) or end == "24:00"):
            raise ValidationError(_("Window %(n)s: end must be HH:MM.") % {"n": index})
        if start == end:
            raise ValidationError(_("Window %(n)s is empty: start equals end.") % {"n": index})


def describe_window(window: dict[str, Any]) -> str:
    return f"{WEEKDAYS[window['weekday']]} {window['start']}-{window['end']}"


__all__ = [
    "DEFAULT_CREDIT_TIERS",
    "DEFAULT_PROBE_CADENCE_S",
    "MULTI_NODE_FLOOR_GBPS",
    "credit_tiers",
    "default_credit_tiers",
    "default_probe_cadence",
    "describe_window",
    "in_weekly_windows",
    "validate_credit_tiers",
    "validate_probe_cadence",
    "validate_weekly_windows",
]


def validate_health_thresholds(value: Any) -> None:
    """Overrides of ``gpulease_verify.health.HealthThresholds``: known names, numbers >= 0."""
    from gpulease_verify.health import HealthThresholds

    if not isinstance(value, dict):
        raise ValidationError(_("Health thresholds must map rule settings to numbers."))
    try:
        HealthThresholds.from_terms(value)
    except ValueError as error:
        raise ValidationError(str(error)) from None
