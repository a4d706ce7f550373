"""Pure rules for SLA samples: what a finished run counts as, and what a link-check slot
gives to availability. No ORM: ``billing.ingest`` applies them to stored runs, and
``billing.audit`` to the runs written in an audit bundle, so both count the same way.

**Confirm before you count.** Under terms with ``confirm_failures`` (the default), a
scheduled throughput or collective run whose tool figure fails is measured again at once,
after ``confirm_pause_s``: the same runs of its batch (a concurrent group again together,
so an oversubscribed uplink is loaded as it was), each stored as a run of its own with
trigger ``confirmation`` and the same lease, kind, tool, pattern, target and slot as the
run it confirms (the unique key of a slot makes that pair one to one). Both runs are links
of the chain and both count in the probe tax. The SLA sample stays the scheduled run's,
with the verdict ``confirmed_verdict`` gives: a fail counts as failed only when its
confirmation failed too; a confirmation that passed clears it; one that measured nothing
(or was disputed by the switch) leaves the fail standing. A one-off stall of a loaded
machine is not a breach; a link that is short twice in a row is.

**Degraded minutes.** A throughput slot whose sample failed (``short_spans``) marks the
link-check minutes it covers as degraded when the links were up in them
(``gpulease_verify.compliance.slot_availability``).
"""

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from gpulease_verify.contract import in_weekly_windows

# A run in one of these states measured nothing: an unknown sample, never a compliant one.
UNKNOWN_STATES = frozenset({"failed", "timeout", "unreachable", "unparsable", "missed"})
OUTCOMES = ("passed", "failed", "unknown", "excluded", "informational")
CONFIRMATION = "confirmation"  # the trigger of a confirming run
CONFIRMED_KINDS = frozenset({"throughput", "collective"})


def confirmation_key(
    *, kind: str, tool: str, pattern: str, target: str, slot_at: object
) -> tuple[str, str, str, str, object]:
    """What a scheduled run and its confirmation share (with the lease): the run a
    confirmation confirms is the scheduled run with the same key."""
    return (kind, tool, pattern, target, slot_at)


def confirmed_verdict(verdict: str, confirmation: str | None) -> str:
    """The verdict a scheduled sample counts with, given its confirmation's (None: it has
    none): a fail stands unless the confirmation passed."""
    if verdict == "fail" and confirmation == "pass":
        return "pass"
    return verdict


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


def short_spans(
    slots: Iterable[tuple[datetime, datetime, str]],
) -> list[tuple[datetime, datetime]]:
    """The throughput slots that degrade the minutes they cover: (slot_at, deadline_at,
    outcome) of each scheduled throughput sample (its ``classify_sample`` outcome, the
    confirmation heard). A slot (every pair of its batch) is short when none of its
    samples is excluded and one failed: measured below the terms' SLA threshold, as its
    verdict says. Returns each short slot's ``[slot_at, deadline_at)`` once."""
    outcomes: dict[tuple[datetime, datetime], list[str]] = {}
    for slot_at, deadline_at, outcome in slots:
        outcomes.setdefault((slot_at, deadline_at), []).append(outcome)
    return sorted(
        span for span, seen in outcomes.items() if "failed" in seen and "excluded" not in seen
    )


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
    "CONFIRMATION",
    "CONFIRMED_KINDS",
    "OUTCOMES",
    "UNKNOWN_STATES",
    "classify_sample",
    "confirmation_key",
    "confirmed_verdict",
    "link_slot_outcome",
    "short_spans",
    "telemetry_slot_outcome",
]
