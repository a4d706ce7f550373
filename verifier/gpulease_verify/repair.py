"""Time to repair and the repair-time objective's credit, from incidents alone.

A network fault (an incident of an SLA probe kind, or a fabric-health one: ``REPAIR_KINDS``;
never a measurement-integrity dispute or a metering gap) has four instants: the fault
(``opened_at``, its first violating sample), acknowledged and mitigated (the provider's
statements) and resolved (``closed_at``, its first passing sample). Its repair time is
resolved minus fault, in minutes rounded half-up to 0.1 (``minutes``): evidence alone, so
the provider's statements cannot shorten it.

The repair-time objective (terms ``repair_objective_minutes``, null: none) and its credit
(``repair_credit_percent``), for one billed window (``repair_credit``):

- the faults counted are those **resolved** in the window, ``start <= closed_at < end``: one
  that began in October and was resolved on 1 November is November's, whole; one resolved
  at December's first instant is December's;
- a fault **missed** the objective when its repair minutes (as shown, 0.1 min) exceed it:
  61.0 min against 60 is a miss, 60.0 is not;
- ``percent_due`` = misses x ``repair_credit_percent``; ``percent_applied`` = the lower of
  that and 100 minus the SLA credit's percent applied, so the SLA credit and the repair
  credit together never take more than the whole credit base;
- ``amount`` = -(base x percent_applied / 100), the magnitude half-up to 0.01 CNY and
  never more than the base minus the SLA credit's magnitude (two half-up roundings could
  otherwise add up to one fen over the base).

The month's credit is the SLA credit plus the repair credit: one credit line of the lease
(quantity: the two percents added), or one voucher where the terms say ``credit_mode``
voucher. The objective and the percent are those of the terms version in force at the end
of the billed window, as the SLA tiers and cap are.

``check`` re-derives all of it from an audit bundle's ``incidents`` and ``credit.repair``,
and checks each incident's instants against the chained runs that opened and resolved it.
This module reads no database: the server and an auditor's ``gpulease-verify`` use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from gpulease_verify.canonical import iso_utc, parse_instant
from gpulease_verify.money import to_fen

# The SLA probe kinds (leases.choices.ProbeKind) and fabric health (FabricIncidentKind).
REPAIR_KINDS = frozenset({"link", "counters", "throughput", "latency", "collective", "telemetry"})
TENTH = Decimal("0.1")
HUNDRED = Decimal(100)
ZERO = Decimal("0.00")
MICROSECONDS_PER_MINUTE = Decimal(60_000_000)


def exact_minutes(opened: datetime, closed: datetime) -> Decimal:
    """closed - opened in minutes, exactly (to the microsecond)."""
    delta = closed - opened
    micro = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return Decimal(micro) / MICROSECONDS_PER_MINUTE


def minutes(opened: datetime, closed: datetime) -> Decimal:
    """A repair time as shown: closed - opened in minutes, half-up to 0.1."""
    return exact_minutes(opened, closed).quantize(TENTH, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Repair:
    """One network fault resolved in the window, with its repair time."""

    id: int
    kind: str
    opened_at: datetime
    closed_at: datetime
    minutes: Decimal
    missed: bool

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "opened_at": iso_utc(self.opened_at),
            "closed_at": iso_utc(self.closed_at),
            "repair_minutes": str(self.minutes),
            "missed": self.missed,
        }


@dataclass(frozen=True)
class RepairCredit:
    """The repair-time objective's outcome for one billed window (module docstring)."""

    objective_minutes: int | None
    credit_percent: Decimal
    repairs: tuple[Repair, ...]
    percent_due: Decimal
    percent_applied: Decimal
    amount: Decimal  # negative or 0.00
    capped: bool

    @property
    def misses(self) -> tuple[Repair, ...]:
        return tuple(repair for repair in self.repairs if repair.missed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "objective_minutes": self.objective_minutes,
            "credit_percent": str(self.credit_percent),
            "incidents": [repair.as_dict() for repair in self.repairs],
            "misses": len(self.misses),
            "percent_due": str(self.percent_due),
            "percent_applied": str(self.percent_applied),
            "capped": self.capped,
            "amount": str(self.amount),
        }


def resolved_in(incidents: Iterable[Any], start: datetime, end: datetime) -> list[Any]:
    """The network faults of ``incidents`` resolved in [start, end), by resolution then id.
    Each has ``id``, ``kind``, ``opened_at`` and ``closed_at`` (None while open)."""
    found = [
        incident
        for incident in incidents
        if incident.kind in REPAIR_KINDS
        and incident.closed_at is not None
        and start <= incident.closed_at < end
    ]
    return sorted(found, key=lambda incident: (incident.closed_at, incident.id))


def repair_credit(
    *,
    incidents: Iterable[Any],
    start: datetime,
    end: datetime,
    objective_minutes: int | None,
    credit_percent: Decimal,
    base: Decimal,
    sla_percent: Decimal = Decimal(0),
    sla_amount: Decimal = ZERO,
) -> RepairCredit:
    """The repair credit of the window [start, end) (module docstring). ``base``: the
    credit base; ``sla_percent``, ``sla_amount``: the SLA credit's percent applied and
    amount (negative), which the repair credit never takes past the whole base."""
    percent = Decimal(credit_percent)
    repairs = tuple(
        Repair(
            id=int(incident.id),
            kind=incident.kind,
            opened_at=incident.opened_at,
            closed_at=incident.closed_at,
            minutes=(shown := minutes(incident.opened_at, incident.closed_at)),
            missed=objective_minutes is not None and shown > objective_minutes,
        )
        for incident in resolved_in(incidents, start, end)
    )
    missed = sum(1 for repair in repairs if repair.missed)
    due = percent * missed
    room = max(HUNDRED - Decimal(sla_percent), Decimal(0))
    applied = min(due, room)
    magnitude = to_fen(Decimal(base) * applied / HUNDRED) if base > 0 else ZERO
    left = max(Decimal(base) - abs(Decimal(sla_amount)), ZERO)
    capped = due > room or magnitude > left
    magnitude = min(magnitude, left)
    return RepairCredit(
        objective_minutes=objective_minutes,
        credit_percent=percent,
        repairs=repairs,
        percent_due=due,
        percent_applied=applied,
        amount=-magnitude if magnitude else ZERO,
        capped=capped,
    )


def objective_of(terms: Mapping[str, Any] | None) -> tuple[int | None, Decimal]:
    """(objective minutes, credit percent) of a bundle's terms entry; a version from
    before the objective existed has none."""
    if terms is None:
        return None, Decimal(0)
    objective = terms.get("repair_objective_minutes")
    return (
        None if objective is None else int(objective),
        Decimal(str(terms.get("repair_credit_percent", "0"))),
    )


def credit_line(
    sla_percent: Decimal, sla_amount: Decimal, repair: RepairCredit | None
) -> tuple[Decimal, Decimal]:
    """(quantity, amount) of the lease's one credit line: the SLA credit's percent and
    amount plus the repair credit's."""
    if repair is None:
        return sla_percent, sla_amount
    return sla_percent + repair.percent_applied, sla_amount + repair.amount


# --- an audit bundle -------------------------------------------------------------------


@dataclass(frozen=True)
class _Fault:
    id: int
    kind: str
    opened_at: datetime
    closed_at: datetime | None


def faults(bundle: Mapping[str, Any]) -> list[_Fault]:
    """The bundle's incidents as ``repair_credit`` reads them."""
    return [
        _Fault(
            int(entry["id"]),
            entry["kind"],
            parse_instant(entry["opened_at"]),
            parse_instant(entry["closed_at"]) if entry.get("closed_at") else None,
        )
        for entry in bundle.get("incidents") or []
    ]


def _evidence(entry: Mapping[str, Any], runs: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """An incident's instants against the chained runs the bundle carries (their hashed
    content): opened at the slot of the first run that opened it, resolved when the run
    that resolved it finished. A run outside the bundle's stretch is not checked."""
    name = f"incident {entry['id']}"
    problems: list[str] = []
    opening = [runs[i] for i in entry.get("opened_by_runs") or [] if i in runs]
    if opening:
        first = min(opening, key=lambda run: parse_instant(run["content"]["slot_at"]))
        slot = first["content"]["slot_at"]
        if parse_instant(slot) != parse_instant(entry["opened_at"]):
            problems.append(
                f"{name} opened_at: the bundle says {entry['opened_at']}, but the first run "
                f"that opened it (run {first['id']}, chain link {first['chain_index']}) is "
                f"of slot {slot}"
            )
    closer = entry.get("closed_by_run")
    if closer is None:
        if entry.get("closed_source") == "ingest" and entry.get("closed_at"):
            problems.append(
                f"{name} was resolved by ingest at {entry['closed_at']}, but the bundle names "
                "no run that resolved it"
            )
        return problems
    run = runs.get(int(closer))
    if run is None or not entry.get("closed_at"):
        return problems
    content = run["content"]
    finished = content.get("finished_at")
    if finished is None or parse_instant(finished) != parse_instant(entry["closed_at"]):
        problems.append(
            f"{name} closed_at: the bundle says {entry['closed_at']}, but the run that "
            f"resolved it (run {run['id']}, chain link {run['chain_index']}) finished at "
            f"{finished}"
        )
    if content.get("kind") != entry["kind"]:
        problems.append(
            f"{name} is a {entry['kind']} fault, but the run that resolved it (run "
            f"{run['id']}) is a {content.get('kind')} run"
        )
    return problems


def check(
    bundle: Mapping[str, Any],
    window: tuple[datetime, datetime] | None,
    terms: Mapping[str, Any] | None,
    base: Decimal | None,
    sla_percent: Decimal,
    sla_amount: Decimal,
) -> tuple[RepairCredit | None, list[str], list[str]]:
    """(the repair credit recomputed, mismatches, notes) of a bundle: each incident's
    instants against its runs, its repair minutes, which faults missed the objective, and
    the repair credit the bundle's ``credit.repair`` states. None when nothing is billed,
    the base is 0, or the bundle is from before incidents were carried."""
    if "incidents" not in bundle or window is None or base is None or base <= 0:
        return None, [], []
    runs = {int(run["id"]): run for run in bundle.get("runs", []) if "id" in run}
    problems: list[str] = []
    for entry in bundle["incidents"]:
        problems += _evidence(entry, runs)
        stated = entry.get("repair_minutes")
        if stated is not None and entry.get("closed_at"):
            recomputed = minutes(
                parse_instant(entry["opened_at"]), parse_instant(entry["closed_at"])
            )
            if Decimal(stated) != recomputed:
                problems.append(
                    f"incident {entry['id']} repair minutes: the bundle says {stated}, "
                    f"recomputed {recomputed} from {entry['opened_at']} to {entry['closed_at']}"
                )
    objective, percent = objective_of(terms)
    result = repair_credit(
        incidents=faults(bundle),
        start=window[0],
        end=window[1],
        objective_minutes=objective,
        credit_percent=percent,
        base=base,
        sla_percent=sla_percent,
        sla_amount=sla_amount,
    )
    said = (bundle.get("credit") or {}).get("repair")
    if said is not None:
        wanted = result.as_dict()
        by_id = {int(row["id"]): row for row in said.get("incidents", [])}
        for repair in result.repairs:
            row = by_id.pop(repair.id, None)
            if row is None:
                problems.append(
                    f"repair credit: incident {repair.id}, resolved {iso_utc(repair.closed_at)} "
                    "in the window, is missing from it"
                )
                continue
            if Decimal(row["repair_minutes"]) != repair.minutes:
                problems.append(
                    f"repair credit: incident {repair.id} took {row['repair_minutes']} min "
                    f"by the bundle, recomputed {repair.minutes}"
                )
            if bool(row["missed"]) != repair.missed:
                problems.append(
                    f"repair credit: incident {repair.id} ({repair.minutes} min against an "
                    f"objective of {objective} min) "
                    + ("missed the objective" if repair.missed else "met the objective")
                    + f", the bundle says {'missed' if row['missed'] else 'met'}"
                )
        for extra in sorted(by_id):
            problems.append(
                f"repair credit: incident {extra} is counted, but it was not resolved in the "
                "billed window"
            )
        for field in ("objective_minutes", "misses", "percent_applied", "amount"):
            a, b = said.get(field), wanted[field]
            same = a == b if a is None or b is None else Decimal(str(a)) == Decimal(str(b))
            if not same:
                problems.append(
                    f"repair credit {field.replace('_', ' ')}: the bundle says {a}, recomputed {b}"
                )
    elif result.amount != 0:
        problems.append(
            f"repair credit: {len(result.misses)} fault(s) missed the objective, a credit of "
            f"{result.amount} is due, the bundle states none"
        )
    notes = [
        f"repair: {len(result.repairs)} network fault(s) resolved in the window, "
        + (
            f"{len(result.misses)} over the {objective}-minute objective: "
            f"{result.percent_applied}% of the credit base = {result.amount}"
            if objective is not None
            else "no repair-time objective"
        )
    ]
    return result, problems, notes


__all__ = [
    "REPAIR_KINDS",
    "Repair",
    "RepairCredit",
    "check",
    "credit_line",
    "exact_minutes",
    "faults",
    "minutes",
    "objective_of",
    "repair_credit",
    "resolved_in",
]
