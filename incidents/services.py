"""The one writer of incidents: every source opens, extends, updates, closes and notifies
through these functions, and each opening and closing records its cause and its actor.

The sources (``IncidentSource``) and what decides for each when to open and close stays
with it; only the writing is here:

- **ingest** (``billing.ingest``): K violating samples of a lease's probe target in a row
  open one, each further violation extends it, the next passing sample closes it; its
  metering gaps (``billing.metering_gaps``) are recorded whole, already closed;
- **telemetry** (``telemetry.services``): a fabric health rule's finding opens one, its end
  closes it;
- **witness** (``benchmarks.witness``): a switch contradicting a host's report opens (or
  extends) the node's measurement-integrity incident;
- **alertmanager** (``monitoring.alertmanager``): a firing alert opens (or joins) one per
  lease it touches, its resolution closes those no other firing alert holds open;
- **manual**: a person (an operator resolving an integrity dispute, clearing a port).

The actor is the person's user name for ``manual`` and the source itself otherwise
(``Actor.by``). Closing is idempotent: an incident already closed stays as it was, and
closing it again neither moves its end nor notifies twice. Notifying (email and signed
webhook, ``incidents.notifications``) is queued after the transaction commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.db.models import F, QuerySet, Value
from django.db.models.functions import Concat

from common.locks import locking
from incidents.choices import IncidentSource, IncidentState
from incidents.models import Incident


@dataclass(frozen=True)
class Actor:
    """Who writes: a source, and for a person (``manual``) the user name."""

    source: str
    name: str = ""

    @property
    def by(self) -> str:
        return self.name or str(self.source)

    @classmethod
    def person(cls, name: str) -> Actor:
        return cls(IncidentSource.MANUAL, name)


INGEST = Actor(IncidentSource.INGEST)
TELEMETRY = Actor(IncidentSource.TELEMETRY)
WITNESS = Actor(IncidentSource.WITNESS)
ALERTMANAGER = Actor(IncidentSource.ALERTMANAGER)


def find_open(
    *, lease_id: int, kind: str, pattern: str, target: str, lock: bool = False
) -> Incident | None:
    """The open incident of (lease, kind, pattern, target), of which there is at most one
    (the ``one_open_incident_per_target`` constraint); locked for update with ``lock``."""
    rows = locking(Incident.objects) if lock else Incident.objects
    return rows.filter(
        lease_id=lease_id, kind=kind, pattern=pattern, target=target, state=IncidentState.OPEN
    ).first()


def _worsen(incident: Incident, *, worst_bps: int | None, worst_latency_us: float | None) -> None:
    """Keep the lowest bandwidth and the highest latency seen."""
    if worst_bps is not None and (incident.worst_bps is None or worst_bps < incident.worst_bps):
        incident.worst_bps = worst_bps
    if worst_latency_us is not None and (
        incident.worst_latency_us is None or worst_latency_us > incident.worst_latency_us
    ):
        incident.worst_latency_us = worst_latency_us


def open_incident(
    *,
    actor: Actor,
    lease_id: int,
    terms_id: int,
    kind: str,
    pattern: str,
    target: str,
    opened_at: datetime,
    rule: str,
    detail: str = "",
    violations: int = 0,
    runs: Iterable[Any] = (),
    worst: Iterable[tuple[int | None, float | None]] = (),
    closed_at: datetime | None = None,
    gap_bytes: Decimal | None = None,
    notify: bool = False,
) -> Incident:
    """Open an incident, by ``actor``, with its evidence ``runs`` (or their ids) and the
    (bandwidth, latency) of each violating sample in ``worst``. With ``closed_at`` it is
    recorded whole (a metering gap: known only once it ended), closed by the same actor.
    ``notify`` queues the "opened" notification after commit."""
    incident = Incident(
        lease_id=lease_id,
        terms_id=terms_id,
        kind=kind,
        pattern=pattern,
        target=target,
        opened_at=opened_at,
        rule=rule,
        detail=detail,
        violations=violations,
        gap_bytes=gap_bytes,
        source=actor.source,
        opened_by=actor.by,
    )
    if closed_at is not None:
        incident.state, incident.closed_at = IncidentState.CLOSED, closed_at
        incident.closed_source, incident.closed_by = actor.source, actor.by
    for bps, latency in worst:
        _worsen(incident, worst_bps=bps, worst_latency_us=latency)
    incident.save()
    runs = list(runs)
    if runs:
        incident.runs.set(runs)
    if notify:
        notify_after_commit(incident, "opened")
    return incident


def extend(
    incident: Incident,
    *,
    runs: Iterable[Any] = (),
    violations: int = 0,
    worst_bps: int | None = None,
    worst_latency_us: float | None = None,
) -> Incident:
    """Add evidence to an open incident: more runs, more violating samples, a worse
    sample. Saves only what it changed."""
    before = (incident.violations, incident.worst_bps, incident.worst_latency_us)
    incident.violations += violations
    _worsen(incident, worst_bps=worst_bps, worst_latency_us=worst_latency_us)
    if (incident.violations, incident.worst_bps, incident.worst_latency_us) != before:
        incident.save(update_fields=["violations", "worst_bps", "worst_latency_us"])
    runs = list(runs)
    if runs:
        incident.runs.add(*runs)
    return incident


def open_or_extend(
    *,
    actor: Actor,
    lease_id: int,
    terms_id: int,
    kind: str,
    pattern: str,
    target: str,
    opened_at: datetime,
    rule: str,
    detail: str = "",
    violations: int = 0,
    runs: Iterable[Any] = (),
    notify: bool = False,
) -> tuple[Incident, bool]:
    """The open incident of (lease, kind, pattern, target), locked, extended by
    ``violations`` and ``runs``; or a new one when none is open. Returns (incident,
    whether it was opened now). A second report of the same fault never opens a second
    incident."""
    with transaction.atomic():
        incident = find_open(
            lease_id=lease_id, kind=kind, pattern=pattern, target=target, lock=True
        )
        if incident is not None:
            return extend(incident, runs=runs, violations=violations), False
        opened = open_incident(
            actor=actor,
            lease_id=lease_id,
            terms_id=terms_id,
            kind=kind,
            pattern=pattern,
            target=target,
            opened_at=opened_at,
            rule=rule,
            detail=detail,
            violations=violations,
            runs=runs,
            notify=notify,
        )
        return opened, True


_UPDATABLE = frozenset({"closed_at", "gap_bytes", "detail", "rule"})


def update(incident: Incident, **fields: Any) -> bool:
    """Correct what a source learned later about an incident (a metering gap's end and
    bytes, say): only the fields of ``_UPDATABLE``. Returns whether anything changed."""
    unknown = set(fields) - _UPDATABLE
    if unknown:
        raise ValueError(f"not updatable: {', '.join(sorted(unknown))}")
    changed = [name for name, value in fields.items() if getattr(incident, name) != value]
    for name in changed:
        setattr(incident, name, fields[name])
    if changed:
        incident.save(update_fields=changed)
    return bool(changed)


def close(
    incident: Incident, *, at: datetime, actor: Actor, note: str = "", notify: bool = False
) -> bool:
    """Close an open incident at ``at`` by ``actor``, appending ``note`` to its detail.
    Idempotent: an incident already closed (here, or by someone else meanwhile) stays as
    it was, and False says nothing happened. ``notify`` queues the "closed" notification
    after commit, once."""
    fields: dict[str, Any] = {
        "state": IncidentState.CLOSED,
        "closed_at": at,
        "closed_source": actor.source,
        "closed_by": actor.by,
    }
    if note:
        fields["detail"] = Concat(F("detail"), Value("\n" + note))
    if not Incident.objects.filter(pk=incident.pk, state=IncidentState.OPEN).update(**fields):
        incident.refresh_from_db()
        return False
    if note:
        fields["detail"] = f"{incident.detail}\n{note}"
    for name, value in fields.items():
        setattr(incident, name, value)
    if notify:
        notify_after_commit(incident, "closed")
    return True


def notify_after_commit(incident: Incident, event: str) -> None:
    """Queue the tenant's notification of ``event`` ("opened" or "closed") once the
    transaction commits (``incidents.tasks.notify_incident``)."""
    from incidents.tasks import notify_incident

    transaction.on_commit(lambda: notify_incident.delay(incident.pk, event))


# --- written by telemetry ---


def lock_open_of_leases(*, lease_ids: Iterable[int], kind: str) -> QuerySet[Incident]:
    """The open incidents of ``kind`` of the leases, locked for update."""
    return locking(Incident.objects).filter(
        lease_id__in=lease_ids,
        kind=kind,
        state=IncidentState.OPEN,
    )


def lock_open_at(
    *, lease: Any, kind: str, target: str, patterns: Iterable[str]
) -> QuerySet[Incident]:
    """The lease's open incidents of ``kind`` at ``target`` by one of ``patterns``, locked
    for update."""
    return locking(Incident.objects).filter(
        lease=lease,
        kind=kind,
        state=IncidentState.OPEN,
        target=target,
        pattern__in=patterns,
    )
