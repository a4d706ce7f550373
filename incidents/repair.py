"""Time to repair: each network fault's four instants and a lease-month's mean time to repair.

- **fault**: the incident's ``opened_at``, the first violating sample's (evidence);
- **acknowledged**: provider staff say they are on it (``acknowledge``);
- **mitigated**: provider staff say a workaround is in place (``mitigate``: a node swapped
  out, traffic moved off a port), which acknowledges too if nobody had;
- **resolved**: the incident's ``closed_at``, the first passing sample's (evidence).

Repair time is resolved minus fault, from evidence alone, so the provider's own statements
cannot shorten it. A month's figures count the faults resolved in its window (an incident
that opens in one month and is resolved in the next counts in the next, whole); minutes are
rounded half-up to 0.1. Only network faults count: an SLA probe kind or a fabric-health
rule, never a measurement-integrity dispute or a metering gap, which are not repairs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from common.locks import locking
from gpulease_verify import repair as rules
from incidents.choices import IncidentState
from incidents.models import Incident

# The SLA probe kinds and fabric health (the verifier's list: it reads no choices).
REPAIR_KINDS = rules.REPAIR_KINDS
NOTE_MAX = 2000
TENTH = Decimal("0.1")


class RepairError(ValidationError):
    """A statement the incident's state does not allow (the API answers 409)."""


def repair_minutes(incident: Incident) -> Decimal | None:
    """Resolved minus fault, in minutes half-up to 0.1 (``gpulease_verify.repair.minutes``);
    None while the incident is open."""
    if incident.closed_at is None:
        return None
    return rules.minutes(incident.opened_at, incident.closed_at)


def _statement(incident_id: int, at: datetime | None, note: str) -> tuple[Incident, datetime]:
    incident = locking(Incident.objects).select_related("lease").get(pk=incident_id)
    at = at or timezone.now()
    if incident.state != IncidentState.OPEN:
        raise RepairError(
            _(
                "Incident %(id)s is resolved; only an open incident can be acknowledged or "
                "mitigated."
            )
            % {"id": incident.pk}
        )
    if incident.kind not in REPAIR_KINDS:
        raise RepairError(
            _("Incident %(id)s is a %(kind)s, not a network fault to repair.")
            % {"id": incident.pk, "kind": incident.get_kind_display()}
        )
    if at < incident.opened_at:
        raise RepairError(
            _("A statement about incident %(id)s cannot come before its fault.")
            % {"id": incident.pk}
        )
    if len(note) > NOTE_MAX:
        raise ValidationError({"note": _("The note is over %(n)s characters.") % {"n": NOTE_MAX}})
    return incident, at


def _add_note(incident: Incident, note: str) -> None:
    note = note.strip()
    if note:
        incident.repair_note = "\n".join(filter(None, [incident.repair_note, note]))[-NOTE_MAX:]


@transaction.atomic
def acknowledge(
    *, incident_id: int, user: Any, note: str = "", at: datetime | None = None
) -> Incident:
    incident, at = _statement(incident_id, at, note)
    if incident.acknowledged_at is not None:
        raise RepairError(
            _("Incident %(id)s was already acknowledged at %(at)s.")
            % {"id": incident.pk, "at": incident.acknowledged_at.isoformat()}
        )
    incident.acknowledged_at, incident.acknowledged_by = at, user
    _add_note(incident, note)
    incident.save(update_fields=["acknowledged_at", "acknowledged_by", "repair_note"])
    return incident


@transaction.atomic
def mitigate(
    *, incident_id: int, user: Any, note: str = "", at: datetime | None = None
) -> Incident:
    incident, at = _statement(incident_id, at, note)
    if incident.mitigated_at is not None:
        raise RepairError(
            _("Incident %(id)s was already mitigated at %(at)s.")
            % {"id": incident.pk, "at": incident.mitigated_at.isoformat()}
        )
    if incident.acknowledged_at is None:
        incident.acknowledged_at, incident.acknowledged_by = at, user
    elif at < incident.acknowledged_at:
        raise RepairError(
            _("Incident %(id)s cannot be mitigated before it was acknowledged.")
            % {"id": incident.pk}
        )
    incident.mitigated_at, incident.mitigated_by = at, user
    _add_note(incident, note)
    incident.save(
        update_fields=[
            "acknowledged_at",
            "acknowledged_by",
            "mitigated_at",
            "mitigated_by",
            "repair_note",
        ]
    )
    return incident


@dataclass(frozen=True)
class TimeToRepair:
    """A window's network faults resolved in it: how many, mean and longest repair time,
    and the mean time to acknowledge of those the provider acknowledged."""

    resolved: int
    mean_minutes: Decimal | None
    longest_minutes: Decimal | None
    acknowledged: int
    mean_acknowledge_minutes: Decimal | None

    def as_dict(self) -> dict[str, Any]:
        def text(value: Decimal | None) -> str | None:
            return None if value is None else str(value)

        return {
            "resolved": self.resolved,
            "mean_minutes": text(self.mean_minutes),
            "longest_minutes": text(self.longest_minutes),
            "acknowledged": self.acknowledged,
            "mean_acknowledge_minutes": text(self.mean_acknowledge_minutes),
        }


def _mean(values: list[Decimal]) -> Decimal | None:
    if not values:
        return None
    return (sum(values, Decimal(0)) / len(values)).quantize(TENTH, rounding=ROUND_HALF_UP)


def time_to_repair(
    incidents: Iterable[Incident], *, start: datetime, end: datetime
) -> TimeToRepair:
    """Over the incidents given (a lease's), those of REPAIR_KINDS resolved in [start, end).
    The mean is of the exact durations, rounded once."""
    exact: list[Decimal] = []
    acknowledge: list[Decimal] = []
    for incident in incidents:
        closed = incident.closed_at
        if incident.kind not in REPAIR_KINDS or closed is None or not start <= closed < end:
            continue
        exact.append(rules.exact_minutes(incident.opened_at, closed))
        if incident.acknowledged_at is not None:
            acknowledge.append(rules.exact_minutes(incident.opened_at, incident.acknowledged_at))
    longest = max(exact) if exact else None
    return TimeToRepair(
        resolved=len(exact),
        mean_minutes=_mean(exact),
        longest_minutes=None if longest is None else longest.quantize(TENTH, ROUND_HALF_UP),
        acknowledged=len(acknowledge),
        mean_acknowledge_minutes=_mean(acknowledge),
    )
