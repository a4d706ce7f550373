"""The billed window of a lease's month and its segments: pure rules that
``billing.invoicing`` bills by and an auditor recomputes from an audit bundle.

1. **Acceptance.** An acceptance attempt is the runs of a lease with trigger
   ``acceptance`` and one slot (skipped runs left out). It passes when none failed,
   timed out, was unreachable, unparsable, missed or is unfinished, every verdict given is
   "pass" and there is at least one. Billing starts at the latest ``finished_at`` of the
   first passing attempt, in slot order (``billing_start``).
2. **Window.** ``[max(period start, lease start, billing start), min(period end, lease
   end))``, then from the first instant a terms version is in force (``billed_window``).
3. **Segments.** The window cut wherever a terms version takes effect inside it; a piece
   before any version is in force is dropped (``cut``).
4. **Node-seconds.** Each live (non-void) assignment ``[from, until or lease end)``
   clipped to the segment, in whole seconds, added up (``assignment_spans``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from itertools import pairwise

# Only these leases are billed (drafts and cancelled leases never are).
BILLED_STATUSES = ("active", "ended")
ACCEPTANCE_FAILURES = frozenset({"failed", "timeout", "unreachable", "unparsable", "missed"})
ACCEPTANCE_UNFINISHED = frozenset({"scheduled", "running"})


def attempt_passes(attempt: Sequence[tuple[str, str, datetime | None]]) -> bool:
    """(state, verdict, finished_at) of each run of one acceptance attempt."""
    states = {state for state, _verdict, _finished in attempt}
    given = [verdict for _state, verdict, _finished in attempt if verdict != "none"]
    if states & (ACCEPTANCE_FAILURES | ACCEPTANCE_UNFINISHED) or not given:
        return False
    return all(verdict == "pass" for verdict in given)


def billing_start(
    runs: Iterable[tuple[datetime, str, str, datetime | None]],
) -> datetime | None:
    """(slot_at, state, verdict, finished_at) of a lease's acceptance runs, skipped ones
    left out: the latest finish of the first passing attempt, None while none passed."""
    attempts: dict[datetime, list[tuple[str, str, datetime | None]]] = defaultdict(list)
    for slot_at, state, verdict, finished_at in runs:
        attempts[slot_at].append((state, verdict, finished_at))
    for slot_at in sorted(attempts):
        attempt = attempts[slot_at]
        finished = [when for _state, _verdict, when in attempt if when is not None]
        if attempt_passes(attempt) and finished:
            return max(finished)
    return None


def cut(
    *, start: datetime, end: datetime, effective_from: Iterable[datetime]
) -> list[tuple[datetime, datetime]]:
    """``[start, end)`` cut at every instant a terms version takes effect inside it,
    without the piece (if any) before the first version is in force."""
    starts = sorted(effective_from)
    cuts = sorted({start, end} | {when for when in starts if start < when < end})
    return [(lo, hi) for lo, hi in pairwise(cuts) if starts and starts[0] <= lo]


def billed_window(
    *,
    period: tuple[datetime, datetime],
    lease: tuple[datetime, datetime | None],
    effective_from: Iterable[datetime],
    requires_acceptance: bool,
    accepted: datetime | None,
) -> tuple[datetime, datetime] | None:
    """The billed window (module docstring, 2), None when nothing is billed this month."""
    start = max(period[0], lease[0])
    end = min(period[1], lease[1]) if lease[1] else period[1]
    if requires_acceptance:
        if accepted is None:
            return None
        start = max(start, accepted)
    if start >= end:
        return None
    parts = cut(start=start, end=end, effective_from=effective_from)
    return (parts[0][0], parts[-1][1]) if parts else None


def assignment_spans(
    *,
    assignments: Iterable[tuple[datetime, datetime | None]],
    lease_end: datetime | None,
    segment: tuple[datetime, datetime],
) -> list[tuple[datetime, datetime] | None]:
    """Each assignment ``(from, until)`` clipped to the segment: (lo, hi), None for one
    outside it. An open assignment runs to the lease's end, else the segment's."""
    spans: list[tuple[datetime, datetime] | None] = []
    for assigned_from, assigned_until in assignments:
        until = assigned_until or lease_end or segment[1]
        lo, hi = max(assigned_from, segment[0]), min(until, segment[1])
        spans.append((lo, hi) if lo < hi else None)
    return spans


__all__ = [
    "ACCEPTANCE_FAILURES",
    "ACCEPTANCE_UNFINISHED",
    "BILLED_STATUSES",
    "assignment_spans",
    "attempt_passes",
    "billed_window",
    "billing_start",
    "cut",
]
