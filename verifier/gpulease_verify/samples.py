"""Pure rules for SLA samples: what a finished run counts as, and what a link-check slot
gives to availability. No ORM: ``billing.ingest`` applies them to stored runs, and
``billing.audit`` to the runs written in an audit bundle, so both count the same way.
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from gpulease_verify.contract import in_weekly_windows

# A run in one of these states measured nothing: an unknown sample, never a compliant one.
UNKNOWN_STATES = frozenset({"failed", "timeout", "unreachable", "unparsable", "missed"})
OUTCOMES = ("passed", "failed", "unknown", "excluded", "informational")


def classify_sample(
    *,
    state: str,
    verdict: str,
    slot_at: datetime,
    maintenance_windows: list[dict[str, Any]] | None,
    zone: str,
) -> str:
    """``excluded`` (skipped, or its slot inside a maintenance window of the terms the run
    was judged by, read in the tenant's zone), ``unknown`` (it measured nothing),
    ``passed`` / ``failed`` (its verdict), else ``informational`` (no rule to judge by)."""
    if state == "skipped" or (
        maintenance_windows and in_weekly_windows(maintenance_windows, slot_at, zone)
    ):
        return "excluded"
    if state in UNKNOWN_STATES:
        return "unknown"
    if verdict == "pass":
        return "passed"
    if verdict == "fail":
        return "failed"
    return "informational"


def link_slot_outcome(outcomes: Iterable[str]) -> str | None:
    """What one link-check slot (every node's run of that slot) gives its minutes to:
    None when any run is excluded (the slot is not counted), ``unavailable`` when any node
    failed, ``available`` when every node passed, ``unknown`` otherwise."""
    seen = list(outcomes)
    if "excluded" in seen:
        return None
    if "failed" in seen:
        return "unavailable"
    if all(outcome == "passed" for outcome in seen):
        return "available"
    return "unknown"


def telemetry_slot_outcome(given: str | None, *, telemetry_down: bool) -> str | None:
    """A link-check slot's outcome once the passive telemetry is heard: a slot the checks
    found available, or could not tell, is unavailable when telemetry saw one of the
    lease's ports unavailable within it (down at a poll, or a down-then-up cycle between
    two polls: a flap between two link checks counts; not an interval the switch-side
    witness disputed). An excluded slot stays excluded and an unavailable one
    unavailable."""
    if given is None or given == "unavailable" or not telemetry_down:
        return given
    return "unavailable"


__all__ = [
    "OUTCOMES",
    "UNKNOWN_STATES",
    "classify_sample",
    "link_slot_outcome",
    "telemetry_slot_outcome",
]
