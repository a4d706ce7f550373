"""The passive telemetry cycle: read every leased node's ports and counters over its
kept-open connection, store what moved, read the switch ports that witness them, judge
fabric health, and open or close incidents.

Every ``TELEMETRY_TICK_S`` (beat), a node is read when its lease's terms ask for
telemetry and its interval (``telemetry_interval_s``) has passed since its last
reading. The reading's text is not stored: its deltas against the previous reading are
(``telemetry.models.PortSample``), and the reading itself replaces the previous one as
the base of the next deltas. A poll that fails or prints something unreadable keeps its
text and reason on the node's reading and counts nothing.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from benchmarks import selectors
from benchmarks.chain import as_sample, link_telemetry
from benchmarks.probes import commands
from benchmarks.transports import AsyncTransport, TransportError
from billing.choices import FabricIncidentKind, IncidentState
from billing.ingest import hour_of, recompute_hour
from billing.models import Incident
from common.locks import locking
from gpulease_verify import health
from gpulease_verify.canonical import iso_utc
from gpulease_verify.chain import telemetry_content
from gpulease_verify.telemetry import (
    PortSample as Sample,
)
from gpulease_verify.telemetry import (
    Snapshot,
    TelemetryParseError,
    parse_snapshot,
    port_samples,
    sample_entry,
    switch_entry,
)
from leases.choices import ProbeKind
from leases.models import Lease, LeaseTerms, Node
from leases.selectors import TermsTimeline
from telemetry import poller, witness
from telemetry.models import NodeReading, PortSample, SwitchReading, TelemetryBatch
from telemetry.switch_snmp import SwitchPortReading

log = logging.getLogger(__name__)

HOUR = timedelta(hours=1)

# Reads the witness ports now: hostname -> its switch port's counters (``witness.read``).
SwitchReader = Callable[[Mapping[str, witness.WitnessPort]], Mapping[str, SwitchPortReading]]

# Below this many bytes in an interval, host and switch are not compared: a few packets
# of ARP or neighbour discovery would make any tolerance meaningless.
WITNESS_MIN_BYTES = 8 * 1024 * 1024


@dataclass
class PollResult:
    nodes: int = 0
    samples: int = 0
    failed: list[str] = field(default_factory=list)
    switch_readings: int = 0
    opened: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    disputed: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Held:
    node: Node
    lease: Lease
    terms: LeaseTerms


def held_nodes(now: datetime | None, *, site_id: int | None = None) -> list[Held]:
    """Every node an active lease holds now (at ``site_id`` only, when given) whose terms
    ask for telemetry: a fixed number of queries."""
    now = now or timezone.now()
    leases = {
        lease.pk: lease
        for lease in Lease.objects.active()
        .filter(probes_enabled=True, starts_at__lte=now)
        .filter(Q(ends_at__isnull=True) | Q(ends_at__gt=now))
        .select_related("tenant")
    }
    timelines: dict[int, list[LeaseTerms]] = defaultdict(list)
    for terms in LeaseTerms.objects.filter(lease_id__in=list(leases)):
        timelines[terms.lease_id].append(terms)
    found = []
    for lease_id, nodes in selectors.lease_nodes_at(list(leases), now).items():
        in_force = TermsTimeline(timelines[lease_id]).at(now)
        if in_force is None or not in_force.telemetry_interval_s:
            continue
        found += [
            Held(node, leases[lease_id], in_force)
            for node in nodes
            if site_id is None or node.leaf_switch.fabric.site_id == site_id
        ]
    return found


def _due(held: Sequence[Held], now: datetime) -> list[Held]:
    last: dict[int, datetime | None] = dict(
        NodeReading.objects.filter(node__in=[h.node.pk for h in held]).values_list("node_id", "at")
    )
    # Half a tick of slack: a beat a little early must not skip a whole interval.
    slack = timedelta(seconds=settings.TELEMETRY_TICK_S / 2)
    due = []
    for h in held:
        polled = last.get(h.node.pk)
        interval = timedelta(seconds=h.terms.telemetry_interval_s)
        if polled is None or polled <= now - interval + slack:
            due.append(h)
    return due


def poll(
    *,
    now: datetime | None = None,
    connect: Callable[[Node], AsyncTransport] | None = None,
    only: Iterable[Node] | None = None,
    site_id: int | None = None,
) -> PollResult:
    """One telemetry cycle over the nodes due (of one site, when given; or ``only`` these,
    due or not)."""
    from benchmarks.services import transport_for

    now = now or timezone.now()
    held = held_nodes(now, site_id=site_id)
    if only is not None:
        wanted = {node.pk for node in only}
        due = [h for h in held if h.node.pk in wanted]
    else:
        due = _due(held, now)
    due = _claim(due, now)
    if not due:
        return PollResult()
    nodes = [h.node for h in due]
    plan = selectors.plan_nodes(nodes, selectors.ports_of(nodes))
    texts = {node.pk: commands.telemetry(plan[node.hostname]) for node in nodes}
    answers = poller.poller(connect or transport_for).read(
        nodes, texts, timeout_s=settings.TELEMETRY_COMMAND_TIMEOUT_S
    )
    return record(due, now, {node.pk: _failure(answers[node.pk]) for node in nodes})


def record(
    due: Sequence[Held],
    now: datetime,
    printed: Mapping[int, tuple[str | None, str]],
    *,
    read_switch: SwitchReader = witness.read,
) -> PollResult:
    """Store what one cycle read: ``printed`` is node id -> (why the poll failed, or None;
    what it printed). Each node's interval against its previous reading, the switch ports
    that witness them (``read_switch``: hostname -> its port's reading now), a chain link
    per lease, availability and the health rules' incidents, as ``poll`` does after
    reading the nodes."""
    result = PollResult(nodes=len(due))
    if not due:
        return result
    nodes = [h.node for h in due]
    terms_of = {h.node.pk: h.terms for h in due}
    limits_of: dict[int, health.HealthThresholds] = {}
    readings = {
        reading.node_id: reading
        for reading in NodeReading.objects.filter(node__in=[node.pk for node in nodes])
    }
    fresh: dict[int, list[Sample]] = {}  # node id -> this interval's samples, every port
    stored: list[PortSample] = []
    with transaction.atomic():
        for node in nodes:
            reading = readings.setdefault(node.pk, NodeReading(node=node))
            error, raw = printed[node.pk]
            snapshot = None
            if error is None:
                try:
                    snapshot = parse_snapshot(raw)
                except TelemetryParseError as parse_error:
                    error = f"unparsable: {parse_error}"
            if snapshot is None:
                reading.failed_at, reading.error, reading.raw_output = now, error or "", raw
                reading.claimed_until = None
                result.failed.append(node.hostname)
                continue
            base = Snapshot.from_json(reading.snapshot) if reading.snapshot else None
            seconds = max(0.0, (now - reading.at).total_seconds()) if reading.at else 0.0
            samples = [
                health.compact(sample)
                for sample in port_samples(base, snapshot, at=now, seconds=seconds)
            ]
            fresh[node.pk] = samples
            terms = terms_of[node.pk]
            if terms.pk not in limits_of:
                limits_of[terms.pk] = thresholds_of(terms)
            kept = _to_store(reading, samples, limits_of[terms.pk])
            stored += [_row(node, sample) for sample in kept]
            reading.at, reading.snapshot = now, snapshot.to_json()
            reading.error, reading.raw_output, reading.claimed_until = "", "", None
        switch_rows, result.disputed = _witness(due, now, fresh, stored, readings, read_switch)
        _store(due, now, stored, switch_rows)
        _recount_availability(due, stored)
        result.samples, result.switch_readings = len(stored), len(switch_rows)
        NodeReading.objects.bulk_create(
            readings.values(),
            update_conflicts=True,
            unique_fields=["node"],
            update_fields=[
                "at",
                "snapshot",
                "pending",
                "switch",
                "claimed_until",
                "failed_at",
                "error",
                "raw_output",
            ],
        )
        result.opened, result.closed = _judge(due, now, stored)
    return result


def _claim(due: Sequence[Held], now: datetime) -> list[Held]:
    """The due nodes no other cycle is reading, held for this one (``claimed_until``)."""
    ids = [h.node.pk for h in due]
    NodeReading.objects.bulk_create([NodeReading(node=h.node) for h in due], ignore_conflicts=True)
    hold = timedelta(seconds=3 * settings.TELEMETRY_COMMAND_TIMEOUT_S)
    with transaction.atomic():
        free = set(
            locking(NodeReading.objects, skip_locked=True)
            .filter(node__in=ids)
            .filter(Q(claimed_until__isnull=True) | Q(claimed_until__lt=now))
            .values_list("node_id", flat=True)
        )
        NodeReading.objects.filter(node__in=free).update(claimed_until=now + hold)
    return [h for h in due if h.node.pk in free]


def _store(
    due: Sequence[Held], at: datetime, rows: list[PortSample], readings: list[SwitchReading]
) -> list[TelemetryBatch]:
    """Save the poll's rows as one batch per lease, each a link of the lease's chain."""
    lease_of = {h.node.pk: h.lease for h in due}
    host_lease = {h.node.hostname: h.lease for h in due}
    by_lease: dict[int, Lease] = {}
    for row in rows:
        by_lease.setdefault(lease_of[row.node_id].pk, lease_of[row.node_id])
    for reading in readings:
        lease = host_lease[reading._hostname]  # type: ignore[attr-defined]
        by_lease.setdefault(lease.pk, lease)
    if not by_lease:
        return []
    batches = {lease_id: TelemetryBatch(lease=lease, at=at) for lease_id, lease in by_lease.items()}
    TelemetryBatch.objects.bulk_create(batches.values())
    for row in rows:
        row.batch = batches[lease_of[row.node_id].pk]
    for reading in readings:
        reading.batch = batches[host_lease[reading._hostname].pk]  # type: ignore[attr-defined]
    PortSample.objects.bulk_create(rows)
    SwitchReading.objects.bulk_create(readings)
    hostname = {h.node.pk: h.node.hostname for h in due}
    samples: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        samples[row.batch_id].append(sample_entry(hostname[row.node_id], as_sample(row)))
    switch: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for reading in readings:
        switch[reading.batch_id].append(
            switch_entry(
                switch=reading._switch_name,  # type: ignore[attr-defined]
                port=reading.if_name,
                in_octets=int(reading.in_octets),
                out_octets=int(reading.out_octets),
                oper_up=reading.oper_up,
                in_errors=reading.in_errors,
                out_discards=reading.out_discards,
            )
        )
    link_telemetry(
        [
            (
                batch,
                telemetry_content(
                    lease=batch.lease.reference,
                    at=iso_utc(batch.at) or "",
                    samples=samples[batch.pk],
                    switch=switch[batch.pk],
                ),
            )
            for batch in batches.values()
        ]
    )
    return list(batches.values())


def _recount_availability(due: Sequence[Held], rows: Sequence[PortSample]) -> None:
    """Recompute the link rollups of the hours a new unavailable interval touches: their
    availability minutes hear telemetry (``billing.ingest.recompute_hour``)."""
    lease_of = {h.node.pk: h.lease for h in due}
    touched: dict[tuple[int, datetime], Lease] = {}
    for row in rows:
        if row.up is False or row.down_cycles > 0:
            hour = hour_of(row.at - timedelta(seconds=row.seconds))
            while hour < row.at:
                touched[(lease_of[row.node_id].pk, hour)] = lease_of[row.node_id]
                hour += timedelta(hours=1)
    for (_lease_id, hour), lease in sorted(touched.items(), key=lambda item: item[0]):
        recompute_hour(lease=lease, kind=ProbeKind.LINK, hour=hour)


def _to_store(
    reading: NodeReading, samples: Sequence[Sample], limits: health.HealthThresholds
) -> list[Sample]:
    """What of this interval becomes rows now. A quiet interval joins the port's pending
    one; the pending one is stored once it spans TELEMETRY_QUIET_ROW_S, or as soon as the
    port's next interval is not quiet (then both are stored, each as it is)."""
    pending = dict(reading.pending or {})
    rows: list[Sample] = []
    for sample in samples:
        waiting = Sample.from_json(pending.pop(sample.port)) if sample.port in pending else None
        if waiting is not None and waiting.at != sample.start:
            rows.append(waiting)  # not back to back (a failed poll between): stored alone
            waiting = None
        if not health.quiet(sample, limits):
            rows += [*([waiting] if waiting else []), sample]
            continue
        merged = health.merge(waiting, sample) if waiting else sample
        if merged.seconds >= settings.TELEMETRY_QUIET_ROW_S:
            rows.append(merged)
        else:
            pending[sample.port] = merged.to_json()
    reading.pending = pending
    return rows


def _failure(answer: object) -> tuple[str | None, str]:
    if isinstance(answer, TransportError):
        return f"unreachable: {answer.reason}", ""
    stdout = getattr(answer, "stdout", "")
    if getattr(answer, "exit_code", None) is None:
        return "the command ended without an exit status", stdout
    return None, stdout


def _row(node: Node, sample: Sample) -> PortSample:
    return PortSample(
        node=node,
        port=sample.port,
        at=sample.at,
        seconds=sample.seconds,
        up=sample.up,
        down_cycles=sample.down_cycles,
        reset=sample.reset,
        deltas=dict(sample.deltas),
    )


# --- the switch-side witness of host counters ------------------------------------------


def _witness(
    due: Sequence[Held],
    at: datetime,
    fresh: dict[int, list[Sample]],
    stored: Sequence[PortSample],
    readings: dict[int, NodeReading],
    read_switch: SwitchReader,
) -> tuple[list[SwitchReading], list[str]]:
    """Read the switch ports of the polled nodes and compare each node's bytes sent in
    this interval with what its switch port received since the last reading. A reading
    is stored as a row when its node's port stored one (so the rows of both sides cover
    the same intervals); the latest is kept on the node's reading either way."""
    ports = witness.witness_ports(h.node for h in due)
    if not ports:
        return [], []
    switch_now = read_switch(ports)
    stored_ports = {(row.node_id, row.port) for row in stored}
    rows, disputed = [], []
    for held in due:
        hostname, node_id = held.node.hostname, held.node.pk
        port, now_reading = ports.get(hostname), switch_now.get(hostname)
        if port is None or now_reading is None or node_id not in fresh:
            continue
        reading = readings[node_id]
        before = reading.switch or {}
        reading.switch = {
            "switch_id": port.switch_id,
            "if_name": port.if_name,
            "at": at.isoformat(),
            "in_octets": now_reading.in_octets,
        }
        if (node_id, port.host_port) in stored_ports:
            row = SwitchReading(
                switch_id=port.switch_id,
                if_name=now_reading.if_name,
                at=at,
                in_octets=Decimal(now_reading.in_octets),
                out_octets=Decimal(now_reading.out_octets),
                oper_up=now_reading.oper_up,
                in_errors=now_reading.in_errors,
                out_discards=now_reading.out_discards,
            )
            row._hostname, row._switch_name = hostname, port.switch  # type: ignore[attr-defined]
            rows.append(row)
        host = next((s for s in fresh[node_id] if s.port == port.host_port), None)
        if (
            host is None
            or host.reset
            or host.seconds <= 0
            or before.get("if_name") != port.if_name
            or before.get("switch_id") != port.switch_id
        ):
            continue
        host_bytes = int(host.deltas.get("tx_bytes", 0))
        switch_bytes = int(now_reading.in_octets) - int(before["in_octets"])
        if switch_bytes < 0 or max(switch_bytes, host_bytes) < WITNESS_MIN_BYTES:
            continue
        check = health.witness_check(
            host_value=host_bytes,
            switch_value=switch_bytes,
            tolerance_percent=held.terms.witness_tolerance_percent,
        )
        if not check.agrees:
            disputed.append(hostname)
            witness.open_dispute(
                lease_id=held.lease.pk,
                node=hostname,
                terms_id=held.terms.pk,
                at=at,
                rule="witness_bytes v1",
                detail=f"host counters against {port.switch} {port.if_name}: {check.detail}",
            )
    return rows, disputed


# --- health rules and their incidents ------------------------------------------------------


def thresholds_of(terms: LeaseTerms) -> health.HealthThresholds:
    return health.HealthThresholds.from_terms(terms.health_thresholds or {})


def findings_of(
    ports: Iterable[tuple[int, str]],
    *,
    since: datetime,
    until: datetime,
    terms_of: Callable[[int], health.HealthThresholds],
) -> dict[tuple[int, str], list[health.Finding]]:
    """(node id, port) -> the health findings of its samples in [since, until]."""
    wanted = set(ports)
    if not wanted:
        return {}
    grouped: dict[tuple[int, str], list[Sample]] = defaultdict(list)
    rows = PortSample.objects.filter(
        node__in={node for node, _ in wanted},
        port__in={port for _, port in wanted},
        at__gte=since,
        at__lte=until,
    ).order_by("node_id", "port", "at")
    for row in rows:
        if (row.node_id, row.port) in wanted:
            grouped[(row.node_id, row.port)].append(as_sample(row))
    return {
        key: health.evaluate(samples, terms_of(key[0]), now=until)
        for key, samples in grouped.items()
    }


def _judge(
    due: Sequence[Held], now: datetime, new_samples: Sequence[PortSample]
) -> tuple[list[int], list[int]]:
    """Evaluate the rules on the ports that moved this cycle and on those with a finding
    open, then open an incident per new finding and close those whose finding ended
    (flap and drop after their hold-down: the hysteresis lives in the rules)."""
    by_node = {h.node.pk: h for h in due}
    by_host = {h.node.hostname: h for h in due}
    limits = {pk: thresholds_of(h.terms) for pk, h in by_node.items()}
    existing = {
        (incident.lease_id, incident.target, incident.pattern): incident
        for incident in locking(Incident.objects).filter(
            lease_id__in={h.lease.pk for h in due},
            kind=FabricIncidentKind.TELEMETRY,
            state=IncidentState.OPEN,
        )
    }
    judged = {
        (row.node_id, row.port)
        for row in new_samples
        if not health.quiet(as_sample(row), limits[row.node_id])
    }
    for lease_id, target, _rule in existing:
        hostname, _, port = target.partition(":")
        held = by_host.get(hostname)
        if held is not None and held.lease.pk == lease_id:
            judged.add((held.node.pk, port))
    lookback = max((health.history_needed(limit) for limit in limits.values()), default=HOUR)
    findings = findings_of(judged, since=now - lookback, until=now, terms_of=limits.__getitem__)
    current: dict[tuple[int, str, str], health.Finding] = {}
    ended: dict[tuple[int, str, str], health.Finding] = {}
    for (node_id, port), found in findings.items():
        held = by_node[node_id]
        for finding in found:  # in start order: the latest ended one wins
            key = (held.lease.pk, f"{held.node.hostname}:{port}", finding.rule)
            (current if finding.end is None else ended)[key] = finding
    opened = []
    for (lease_id, target, rule), finding in current.items():
        if (lease_id, target, rule) in existing:
            continue
        held = by_host[target.partition(":")[0]]
        incident = Incident.objects.create(
            lease=held.lease,
            kind=FabricIncidentKind.TELEMETRY,
            pattern=rule,
            target=target,
            opened_at=finding.start,
            violations=1,
            rule=f"{rule} v{finding.version}",
            detail=finding.detail,
            terms=held.terms,
        )
        opened.append(incident.pk)
    closed = []
    judged_targets = {f"{by_node[node].node.hostname}:{port}" for node, port in judged}
    for key, incident in existing.items():
        if key in current or key[1] not in judged_targets:
            continue
        ended_finding = ended.get(key)
        incident.state = IncidentState.CLOSED
        incident.closed_at = (
            ended_finding.end if ended_finding is not None and ended_finding.end else now
        )
        incident.save(update_fields=["state", "closed_at"])
        closed.append(incident.pk)
    return opened, closed
