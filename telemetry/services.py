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
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from benchmarks import selectors, witness
from benchmarks.probes import commands
from benchmarks.switch_snmp import SwitchPortReading
from benchmarks.transports import AsyncTransport, TransportError
from benchmarks.transports.kept_open import kept_open
from common.locks import locking
from gpulease_verify import health
from gpulease_verify import witness as witness_rules
from gpulease_verify.bundle import hour_start
from gpulease_verify.canonical import iso_utc
from gpulease_verify.chain import clearance_entry, telemetry_content
from gpulease_verify.telemetry import (
    PortSample as Sample,
)
from gpulease_verify.telemetry import (
    Snapshot,
    TelemetryParseError,
    changed_ports,
    parse_snapshot,
    port_samples,
    sample_entry,
    switch_entry,
)
from incidents import services as incident_services
from incidents.choices import FabricIncidentKind, IncidentState
from leases import selectors as lease_selectors
from leases.choices import ProbeKind
from leases.models import Lease, LeaseTerms, Node
from leases.selectors import TermsTimeline
from telemetry import hooks
from telemetry.links import as_sample, link_telemetry
from telemetry.models import (
    NodeReading,
    PortClearance,
    PortSample,
    SwitchReading,
    TelemetryBatch,
)

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
    leases = {lease.pk: lease for lease in lease_selectors.telemetry_leases(now=now)}
    timelines: dict[int, list[LeaseTerms]] = defaultdict(list)
    for terms in lease_selectors.terms_of_leases(lease_ids=list(leases)):
        timelines[terms.lease_id].append(terms)
    found = []
    for lease_id, nodes in lease_selectors.lease_nodes_at(lease_ids=list(leases), at=now).items():
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
    from benchmarks.execution import transport_for

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
    plan = selectors.plan_nodes(nodes, lease_selectors.ports_of(nodes=nodes))
    texts = {node.pk: commands.telemetry(plan[node.hostname]) for node in nodes}
    answers = kept_open(connect or transport_for).read(
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
    plan = selectors.plan_nodes(nodes, lease_selectors.ports_of(nodes=nodes))
    expected = {node.pk: commands.telemetry_rates(plan[node.hostname]) for node in nodes}
    readings = {
        reading.node_id: reading
        for reading in NodeReading.objects.filter(node__in=[node.pk for node in nodes])
    }
    fresh: dict[int, list[Sample]] = {}  # node id -> this interval's samples, every port
    moved: set[tuple[int, str]] = set()  # (node id, port) not quiet or changed: judged
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
                for sample in port_samples(
                    base, snapshot, at=now, seconds=seconds, expected=expected[node.pk]
                )
            ]
            fresh[node.pk] = samples
            terms = terms_of[node.pk]
            if terms.pk not in limits_of:
                limits_of[terms.pk] = thresholds_of(terms)
            changed = changed_ports(base, snapshot, expected[node.pk])
            moved |= {
                (node.pk, sample.port)
                for sample in samples
                if sample.port in changed or not health.quiet(sample, limits_of[terms.pk])
            }
            kept = _to_store(reading, samples, limits_of[terms.pk], changed)
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
        result.opened, result.closed = _judge(due, now, moved)
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
                link=reading.link,
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
    """Tell the apps above the hours a new unavailable interval touches
    (``telemetry.hooks.unavailable_hours``): billing recomputes their link rollups, whose
    availability minutes hear telemetry (``billing.ingest.recompute_hours``)."""
    lease_of = {h.node.pk: h.lease for h in due}
    touched: dict[tuple[int, datetime], Lease] = {}
    for row in rows:
        if row.up is False or row.down_cycles > 0:
            hour = hour_start(row.at - timedelta(seconds=row.seconds))
            while hour < row.at:
                touched[(lease_of[row.node_id].pk, hour)] = lease_of[row.node_id]
                hour += timedelta(hours=1)
    leases = {lease.pk: lease for lease in touched.values()}
    for lease_id, lease in sorted(leases.items()):
        hours = [hour for (its_id, hour) in touched if its_id == lease_id]
        hooks.unavailable_hours(lease=lease, kind=ProbeKind.LINK, hours=hours)


def _to_store(
    reading: NodeReading,
    samples: Sequence[Sample],
    limits: health.HealthThresholds,
    changed: set[str],
) -> list[Sample]:
    """What of this interval becomes rows now. A calm interval joins the port's pending
    one when both are in the same condition (at the expected rate, or steadily below it;
    the same counters saturated: ``health.mergeable``); the pending one is stored once it
    spans TELEMETRY_QUIET_ROW_S, or as soon as the port's next interval cannot join it.
    An interval that is not calm, or whose port ``changed`` state or condition since the
    previous poll (``changed_ports``: the poll that found it up again), is stored at once,
    as it is."""
    pending = dict(reading.pending or {})
    rows: list[Sample] = []
    for sample in samples:
        waiting = Sample.from_json(pending.pop(sample.port)) if sample.port in pending else None
        if waiting is not None and (
            waiting.at != sample.start or not health.mergeable(waiting, sample, limits)
        ):
            rows.append(waiting)  # a failed poll between, or something changed: alone
            waiting = None
        if sample.port in changed or not health.calm(sample, limits):
            rows.append(sample)
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
        rate_gbps=sample.rate_gbps,
        expected_gbps=sample.expected_gbps,
        saturated=list(sample.saturated),
        disputed=sample.disputed,
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
    """Read the switch ports of the polled nodes and hold each node's port against its
    own: the bytes it sent in this interval against what its switch port received, and
    the down it reports against the switch port's ifOperStatus and ifLastChange
    (``gpulease_verify.witness.link_state_dispute``; a down the switch did not confirm at
    once is read again after WITNESS_SETTLE_S before it is disputed). A reading is stored
    as a row when its node's port stored one (so the rows of both sides cover the same
    intervals); the latest is kept on the node's reading either way, as the base of the
    next interval's checks."""
    ports = witness.witness_ports(h.node for h in due)
    if not ports:
        return [], []
    switch_now = read_switch(ports)
    checks = [
        check
        for held in due
        if (check := _LinkCheck.of(held, ports, switch_now, fresh, readings)) is not None
    ]
    unconfirmed = {c.held.node.hostname: ports[c.held.node.hostname] for c in checks if c.dispute}
    if unconfirmed:
        time.sleep(settings.WITNESS_SETTLE_S)  # the switch's counters catch up
        settled = read_switch(unconfirmed)
        for check in checks:
            if check.held.node.hostname in settled:
                check.judge(settled[check.held.node.hostname])
    links = {check.held.node.pk: check for check in checks}
    stored_ports = {(row.node_id, row.port) for row in stored}
    stored_rows = {(row.node_id, row.port, row.at): row for row in stored}
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
            "oper_up": now_reading.oper_up,
            "last_change": now_reading.last_change,
            "uptime": now_reading.uptime,
        }
        check = links.get(node_id)
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
                link=check.link if check is not None else None,
            )
            row._hostname, row._switch_name = hostname, port.switch  # type: ignore[attr-defined]
            rows.append(row)
        host_row = stored_rows.get((node_id, port.host_port, at))
        if check is not None and check.dispute and host_row is not None:
            host_row.disputed = True  # a down is never calm: its interval is a row now
            disputed.append(hostname)
            witness.open_dispute(
                lease_id=held.lease.pk,
                node=hostname,
                terms_id=held.terms.pk,
                at=at,
                rule=f"{witness_rules.LINK_RULE} v{witness_rules.LINK_VERSION}",
                detail=check.dispute,
            )
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
        check_bytes = health.witness_check(
            host_value=host_bytes,
            switch_value=switch_bytes,
            tolerance_percent=held.terms.witness_tolerance_percent,
        )
        if not check_bytes.agrees:
            disputed.append(hostname)
            witness.open_dispute(
                lease_id=held.lease.pk,
                node=hostname,
                terms_id=held.terms.pk,
                at=at,
                rule="witness_bytes v1",
                detail=f"host counters against {port.switch} {port.if_name}: {check_bytes.detail}",
            )
    return rows, disputed


@dataclass
class _LinkCheck:
    """A node's port this interval against its switch port (``witness_rules.link_block``)."""

    held: Held
    port: witness.WitnessPort
    host: Sample
    since: dict[str, Any]
    link: dict[str, Any] = field(default_factory=dict)
    dispute: str | None = None

    @classmethod
    def of(
        cls,
        held: Held,
        ports: dict[str, witness.WitnessPort],
        switch_now: dict[str, Any],
        fresh: dict[int, list[Sample]],
        readings: dict[int, NodeReading],
    ) -> _LinkCheck | None:
        """The check of ``held``'s port, when both sides can tell: the interval is a real
        one (not a first poll, not a reset), and this reading and the previous one (the
        same switch port) both carry ifLastChange and sysUpTime."""
        hostname, node_id = held.node.hostname, held.node.pk
        port, now_reading = ports.get(hostname), switch_now.get(hostname)
        if port is None or now_reading is None or node_id not in fresh:
            return None
        before = readings[node_id].switch or {}
        host = next((s for s in fresh[node_id] if s.port == port.host_port), None)
        if (
            host is None
            or host.seconds <= 0
            or host.reset
            or (before.get("switch_id"), before.get("if_name")) != (port.switch_id, port.if_name)
            or before.get("last_change") is None
            or before.get("uptime") is None
        ):
            return None
        check = cls(held, port, host, before)
        check.judge(now_reading)
        return check if check.link else None

    def judge(self, reading: Any) -> None:
        if reading.last_change is None or reading.uptime is None:
            return
        self.link = witness_rules.link_block(
            node=self.held.node.hostname,
            host_port=self.port.host_port,
            oper_up=reading.oper_up,
            last_change=reading.last_change,
            uptime=reading.uptime,
            since_oper_up=bool(self.since.get("oper_up")),
            since_last_change=int(self.since["last_change"]),
            since_uptime=int(self.since["uptime"]),
        )
        self.dispute = witness_rules.link_state_dispute(
            self.host, switch=self.port.switch, port=self.port.if_name, link=self.link
        )


# --- health rules and their incidents ------------------------------------------------------


def thresholds_of(terms: LeaseTerms) -> health.HealthThresholds:
    return health.HealthThresholds.from_terms(terms.health_thresholds or {})


@dataclass(frozen=True)
class Judged:
    """How a terms version judges fabric health: its rule set and thresholds."""

    rules: int
    limits: health.HealthThresholds

    @classmethod
    def by(cls, terms: LeaseTerms | None) -> Judged:
        if terms is None:
            return cls(health.LATEST_RULES, health.HealthThresholds())
        return cls(terms.health_rules, thresholds_of(terms))


def clearances_of(
    ports: Iterable[tuple[int, str]], *, since: datetime, until: datetime
) -> dict[tuple[int, str], list[datetime]]:
    """(node id, port) -> the instants an operator cleared it in [since, until]."""
    wanted = set(ports)
    found: dict[tuple[int, str], list[datetime]] = defaultdict(list)
    if not wanted:
        return found
    for node_id, port, cleared_at in (
        PortClearance.objects.filter(
            node__in={node for node, _ in wanted},
            port__in={port for _, port in wanted},
            at__gte=since,
            at__lte=until,
        )
        .order_by("at")
        .values_list("node_id", "port", "at")
    ):
        if (node_id, port) in wanted:
            found[(node_id, port)].append(cleared_at)
    return found


def findings_of(
    ports: Iterable[tuple[int, str]],
    *,
    since: datetime,
    until: datetime,
    judged_by: Callable[[int], Judged],
) -> dict[tuple[int, str], list[health.Finding]]:
    """(node id, port) -> the health findings of its samples in [since, until], by the
    rule set and thresholds ``judged_by`` gives for the node, with the operators'
    clearances of the port."""
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
    cleared = clearances_of(grouped, since=since, until=until)
    return {
        key: health.evaluate(
            samples,
            judged_by(key[0]).limits,
            now=until,
            rules=judged_by(key[0]).rules,
            cleared=cleared.get(key, ()),
        )
        for key, samples in grouped.items()
    }


def _judge(
    due: Sequence[Held], now: datetime, moved: set[tuple[int, str]]
) -> tuple[list[int], list[int]]:
    """Evaluate the rules on the ports that moved this cycle (an interval not quiet, or a
    change of state or condition) and on those with a finding open that time alone can
    end, then open an incident per new finding and close those whose finding ended
    (after their hold-down: the hysteresis lives in the rules). A sticky flap (set 2)
    ends only by an operator's clearance (``clear_port``), and a finding on what a poll
    found (a lower rate, saturated counters) only at a change: their incidents alone do
    not make their port judged every cycle."""
    by_node = {h.node.pk: h for h in due}
    by_host = {h.node.hostname: h for h in due}
    judging = {pk: Judged.by(h.terms) for pk, h in by_node.items()}
    existing = {
        (incident.lease_id, incident.target, incident.pattern): incident
        for incident in incident_services.lock_open_of_leases(
            lease_ids={h.lease.pk for h in due}, kind=FabricIncidentKind.TELEMETRY
        )
    }
    judged = set(moved)
    for lease_id, target, rule in existing:
        hostname, _, port = target.partition(":")
        held = by_host.get(hostname)
        if held is None or held.lease.pk != lease_id:
            continue
        judge = judging[held.node.pk]
        if health.ends_in_time(rule, judge.rules, judge.limits):
            judged.add((held.node.pk, port))
    lookback = max(
        (health.history_needed(j.limits, j.rules) for j in judging.values()), default=HOUR
    )
    findings = findings_of(judged, since=now - lookback, until=now, judged_by=judging.__getitem__)
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
        assert held.terms is not None
        incident = incident_services.open_incident(
            actor=incident_services.TELEMETRY,
            lease_id=held.lease.pk,
            kind=FabricIncidentKind.TELEMETRY,
            pattern=rule,
            target=target,
            opened_at=finding.start,
            violations=1,
            rule=f"{rule} v{finding.version}",
            detail=finding.detail,
            terms_id=held.terms.pk,
        )
        opened.append(incident.pk)
    closed = []
    judged_targets = {f"{by_node[node].node.hostname}:{port}" for node, port in judged}
    for key, incident in existing.items():
        if key in current or key[1] not in judged_targets:
            continue
        held = by_host[key[1].partition(":")[0]]
        ended_finding = ended.get(key)
        judge = judging[held.node.pk]
        if health.sticky(key[2], judge.rules, judge.limits) and ended_finding is None:
            continue  # out of the lookback, not cleared: it stays until an operator clears it
        end = ended_finding.end if ended_finding is not None and ended_finding.end else now
        if incident_services.close(incident, at=end, actor=incident_services.TELEMETRY):
            closed.append(incident.pk)
    return opened, closed


# --- an operator clears a port (gpud's set-healthy) -------------------------------------


def clear_port(
    *, node: Node, port: str, by: str, reason: str, at: datetime | None = None
) -> PortClearance:
    """Clear ``node``'s ``port`` after inspecting it: its sticky flap finding (and a drop)
    end at ``at``, and the rules count afresh from there, as after gpud's set-healthy.
    Recorded with who and why in a telemetry batch linked into the chain of the lease
    that holds the node, so an auditor recomputes the same findings; the port's open
    flap and drop incidents close with that sentence. ValueError when no active lease
    holds the node or the reason is empty."""
    at = (at or timezone.now()).astimezone(UTC)
    if not reason.strip():
        raise ValueError("say why the port is cleared (what was inspected or replaced)")
    assignment = lease_selectors.active_assignment_of(node=node, at=at)
    if assignment is None:
        raise ValueError(f"no active lease holds {node.hostname} at {at:%Y-%m-%d %H:%M} UTC")
    lease = assignment.lease
    with transaction.atomic():
        batch = TelemetryBatch.objects.create(lease=lease, at=at)
        clearance = PortClearance.objects.create(
            batch=batch, node=node, port=port, at=at, by=by, reason=reason.strip()
        )
        link_telemetry(
            [
                (
                    batch,
                    telemetry_content(
                        lease=lease.reference,
                        at=iso_utc(at) or "",
                        samples=[],
                        switch=[],
                        cleared=[
                            clearance_entry(
                                node=node.hostname,
                                port=port,
                                at=iso_utc(at) or "",
                                by=by,
                                reason=clearance.reason,
                            )
                        ],
                    ),
                )
            ]
        )
        note = f"Cleared by {by} at {at:%Y-%m-%d %H:%M} UTC: {clearance.reason}"
        for incident in incident_services.lock_open_at(
            lease=lease,
            kind=FabricIncidentKind.TELEMETRY,
            target=f"{node.hostname}:{port}",
            patterns=["link_flap", "link_drop"],
        ):
            incident_services.close(
                incident, at=at, actor=incident_services.Actor.person(by), note=note
            )
    return clearance


def clear_incidents(incidents, *, by: str, reason: str) -> int:  # type: ignore[no-untyped-def]
    """``clear_port`` for the port of each open flap or drop incident among ``incidents``
    (the admin action): each port once. Returns how many ports were cleared."""
    targets = set(
        incidents.filter(
            kind=FabricIncidentKind.TELEMETRY,
            state=IncidentState.OPEN,
            pattern__in=["link_flap", "link_drop"],
        ).values_list("target", flat=True)
    )
    nodes = {
        node.hostname: node
        for node in lease_selectors.nodes_named(hostnames={t.partition(":")[0] for t in targets})
    }
    cleared = 0
    for target in sorted(targets):
        hostname, _, port = target.partition(":")
        if hostname in nodes:
            clear_port(node=nodes[hostname], port=port, by=by, reason=reason)
            cleared += 1
    return cleared
