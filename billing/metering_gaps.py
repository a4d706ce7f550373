"""Metering gaps: a node of a lease not read for longer than the reading reach
(``gpulease_verify.traffic.READING_REACH``, three days). The counters prove what it sent
over the gap, so those bytes are billed by time like any interval; but the rate of each
slot of the gap is an average, not a measurement, and the operator must know before an
invoice goes out.

- Ingest records each gap once (``record``), as a metering-gap incident of the node:
  opened at the gap's first reading, closed at the reading that ended it (the gap is only
  known once it is over), with the bytes billed by time over it and its two readings as
  evidence. Ingest recomputes windows again and again: the same gap (lease, node, start)
  is never recorded twice.
- Issuing an invoice reports the gaps that reach into its period (``reported``): it warns,
  it does not refuse (the bytes are the counters' own, and holding an invoice back would
  not make them better measured). The report is recorded on the invoice
  (``Invoice.metering_gaps``) and shown by the admin's issue action, the API's answer and
  the ``bill`` command.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

from django.db.models import QuerySet
from django.utils.translation import gettext as _

from gpulease_verify.canonical import iso_utc
from gpulease_verify.traffic import READING_REACH, Gap
from incidents import selectors as incident_selectors
from incidents import services as incident_services
from incidents.choices import METERING_GAP_PATTERN, MeteringIncidentKind
from incidents.models import Incident
from leases.models import Lease
from leases.selectors import TermsTimeline

_MICRO = timedelta(microseconds=1)
GB = Decimal(10**9)
RULE = f"metering gap: counters readings more than {READING_REACH.days} days apart"


def _detail(gap: Gap) -> str:
    days = (gap.end - gap.start) / timedelta(days=1)
    return (
        f"{gap.node} was not read from {iso_utc(gap.start)} to {iso_utc(gap.end)} "
        f"({days:.2f} days, more than the {READING_REACH.days}-day reading reach): the "
        f"{gap.bytes} B its counters rose by over that time are billed by time, at their "
        "average rate over the gap, not measured slot by slot."
    )


def record(
    *, lease: Lease, gaps: Sequence[Gap], evidence: Mapping[Gap, Sequence[tuple[int, datetime]]]
) -> list[Incident]:
    """Record each gap of the lease as its node's metering-gap incident, once: a gap
    already recorded (same node and start) is brought up to date, not recorded again.
    ``evidence``: gap -> (id, slot) of its two readings. Returns the incidents made now."""
    existing = {
        (incident.target, incident.opened_at): incident
        for incident in incident_selectors.metering_gaps_at(
            lease=lease,
            targets={gap.node for gap in gaps},
            opened_at={gap.start for gap in gaps},
        )
    }
    timeline: TermsTimeline | None = None
    made = []
    for gap in gaps:
        incident = existing.get((gap.node, gap.start))
        if incident is not None:
            if (incident.closed_at, incident.gap_bytes) != (gap.end, Decimal(gap.bytes)):
                incident_services.update(
                    incident, closed_at=gap.end, gap_bytes=Decimal(gap.bytes), detail=_detail(gap)
                )
            continue
        timeline = timeline or TermsTimeline.for_lease(lease)
        terms = timeline.at(gap.start) or next(iter(timeline))
        # Recorded whole by ingest, which finds it: opened and closed at once.
        incident = incident_services.open_incident(
            actor=incident_services.INGEST,
            lease_id=lease.pk,
            kind=MeteringIncidentKind.GAP,
            pattern=METERING_GAP_PATTERN,
            target=gap.node,
            opened_at=gap.start,
            closed_at=gap.end,
            rule=RULE,
            detail=_detail(gap),
            gap_bytes=Decimal(gap.bytes),
            terms_id=terms.pk,
            runs=[pk for pk, _slot in evidence[gap]],
        )
        made.append(incident)
    return made


def reach(lease: Lease, start: datetime, end: datetime) -> timedelta:
    """How far outside ``[start, end)`` the readings that close its edge intervals can lie:
    ``READING_REACH``, or farther where a recorded metering gap of the lease reaches over
    an edge."""
    farthest = READING_REACH
    for opened_at, closed_at in incident_selectors.metering_gap_spans(
        lease=lease, start=start, end=end
    ):
        assert closed_at is not None  # a gap is recorded once it is over
        farthest = max(farthest, start - opened_at, closed_at - end)
    return farthest


def within(*, tenant_id: int, start: datetime, end: datetime) -> QuerySet[Incident]:
    """The metering gaps of the tenant's leases that reach into ``[start, end)``."""
    return incident_selectors.metering_gaps_of_tenant(tenant_id=tenant_id, start=start, end=end)


def bytes_within(incident: Incident, start: datetime, end: datetime) -> int:
    """The part of a gap's bytes that its interval gives to the slots of ``[start, end)``
    (a billing period: its bounds lie on the slot grid), before the probe tax: the pieces
    of ``gpulease_verify.traffic.slot_shares`` up to an instant add up to
    ``floor(B t / T)``, ``t`` the time from the gap's start."""
    assert incident.closed_at is not None and incident.gap_bytes is not None
    total, first, last = int(incident.gap_bytes), incident.opened_at, incident.closed_at
    whole = (last - first) // _MICRO

    def upto(instant: datetime) -> int:
        return total * ((min(max(instant, first), last) - first) // _MICRO) // whole

    return upto(end) - upto(start)


def reported(*, tenant_id: int, start: datetime, end: datetime) -> list[dict[str, Any]]:
    """What issuing records of each metering gap that reaches into the period
    ``[start, end)``: its incident, lease, node, start and end (ISO UTC), the bytes billed
    by time over the whole gap and those of them billed in the period."""
    return [
        {
            "incident": incident.pk,
            "lease": incident.lease.reference,
            "node": incident.target,
            "start": iso_utc(incident.opened_at),
            "end": iso_utc(incident.closed_at),
            "bytes": str(int(incident.gap_bytes or 0)),
            "bytes_in_period": str(bytes_within(incident, start, end)),
        }
        for incident in within(tenant_id=tenant_id, start=start, end=end)
        .select_related("lease")
        .order_by("lease__reference", "target", "opened_at")
    ]


def sentence(gap: Mapping[str, Any], zone: str) -> str:
    """One reported gap as the operator reads it, times on the tenant's clock."""

    def local(text: str) -> str:
        instant = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M")

    return _(
        "Metering gap: node %(node)s of lease %(lease)s was not read from %(start)s to "
        "%(end)s (%(zone)s), more than %(days)d days; %(gb)s GB of its traffic in this "
        "period is billed by time over the gap, not measured slot by slot (incident "
        "%(incident)s)."
    ) % {
        "node": gap["node"],
        "lease": gap["lease"],
        "start": local(gap["start"]),
        "end": local(gap["end"]),
        "zone": zone,
        "days": READING_REACH.days,
        "gb": f"{Decimal(gap['bytes_in_period']) / GB:.3f}",
        "incident": gap["incident"],
    }
