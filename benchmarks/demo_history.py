"""Measurement history for the demo's leases, so that `make run` shows charts, incidents,
credits and a fleet view with something in them.

The demo's nodes are not real hosts, so nothing can be measured on them. Instead each
active demo lease gets DAYS of runs as the scheduler would have stored them: every
CADENCE a link check per node and a throughput run per ring pair, and NCCL bus bandwidth
where the contract has a floor. Every raw output says it is synthetic. Verdicts come from
the probes' own rules (``gpulease_verify.verdicts``) against the terms in force, the
runs join their lease's hash chain, and ``billing.ingest`` turns them into rollups and
incidents like any other run.

Two episodes make the pages worth reading:
- ZY-2026-001: one node pair dropped to about 38 % of the contract for eight hours ten
  days ago (a closed incident and a credit);
- LX-2026-001: a pair has been below its threshold for the last eight hours (an open
  incident: breached, first in the provider's fleet view).

Only leases without any run get history, so running the demo again changes nothing."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from benchmarks import chain
from benchmarks.choices import Pattern, RunState, Tool, Trigger
from benchmarks.models import ProbeRun
from benchmarks.services import terms_view
from gpulease_verify import verdicts
from leases.choices import LeaseStatus, LinkLayer, ProbeKind, Technology
from leases.models import Lease, LeaseTerms, NicPort, Node

DAYS = 21
CADENCE = timedelta(hours=2)
GIGA = 10**9
# (lease reference, first hour before now, hours, pair index, share of the contract)
EPISODES = (
    ("ZY-2026-001", 10 * 24, 8, 0, 0.38),
    ("LX-2026-001", 8, 8, 0, 0.42),
)


@dataclass
class DemoHistory:
    leases: int = 0
    runs: int = 0


def _raw(tool: str, text: str) -> str:
    return f"gpulease demo: synthetic {tool} result, not a measurement\n{text}\n"


def _run(
    *,
    lease: Lease,
    terms: LeaseTerms,
    kind: str,
    tool: str,
    target: str,
    pattern: str,
    slot: datetime,
    site_id: int,
    raw: str,
    judgement: verdicts.Judgement,
    **figures: Any,
) -> ProbeRun:
    return ProbeRun(
        lease=lease,
        kind=kind,
        tool=tool,
        target=target,
        pattern=pattern,
        trigger=Trigger.SCHEDULE,
        slot_at=slot,
        deadline_at=slot + CADENCE,
        site_id=site_id,
        state=RunState.OK,
        attempts=1,
        started_at=slot + timedelta(seconds=3),
        finished_at=slot + timedelta(seconds=15),
        raw_output=raw,
        raw_sha256=hashlib.sha256(raw.encode()).hexdigest(),
        exit_code=0,
        terms=terms,
        verdict=judgement.verdict,
        rule=judgement.rule,
        verdict_reason=judgement.reason,
        **figures,
    )


def _link_check(ports: list[NicPort]) -> tuple[str, list[verdicts.PortState], dict]:
    """A node's link check with every port up at its rate: (tool, port states, parsed)."""
    states = [
        verdicts.PortState(
            label=f"{p.device}:{p.port_number}"
            if p.link_layer == LinkLayer.INFINIBAND
            else p.netdev,
            up=True,
            speed_bps=float(p.rate_gbps * GIGA),
            expected_bps=float(p.rate_gbps * GIGA),
            link_down_count=0,
            previous_link_down_count=0,
        )
        for p in ports
    ]
    infiniband = any(p.link_layer == LinkLayer.INFINIBAND for p in ports)
    parsed = {
        "ports": [
            {"label": s.label, "up": s.up, "speed_bps": s.speed_bps, "link_down_count": 0}
            for s in states
        ]
    }
    return (Tool.IBSTATUS if infiniband else Tool.ETHTOOL), states, parsed


def _history(lease: Lease, now: datetime, days: int) -> list[tuple[ProbeRun, list[Node]]]:
    rng = random.Random(lease.reference)
    nodes = list(
        Node.objects.filter(assignments__lease=lease, assignments__void=False)
        .select_related("leaf_switch__fabric")
        .order_by("hostname")
        .distinct()
    )
    if len(nodes) < 2:
        return []
    ports: dict[int, list[NicPort]] = {}
    for port in NicPort.objects.filter(node__in=nodes).order_by("device", "port_number"):
        ports.setdefault(port.node_id, []).append(port)
    versions = list(LeaseTerms.objects.filter(lease=lease).order_by("effective_from"))
    pairs = [(nodes[k], nodes[(k + 1) % len(nodes)]) for k in range(min(4, len(nodes)))]
    site_id = nodes[0].leaf_switch.fabric.site_id
    slow = {
        (index, now - timedelta(hours=first) + timedelta(hours=hour))
        for reference, first, hours, index, _share in EPISODES
        if reference == lease.reference
        for hour in range(hours)
    }
    share = {ref: s for ref, _first, _hours, _index, s in EPISODES}.get(lease.reference, 1.0)
    start = max(lease.starts_at, now - timedelta(days=days))
    slot = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    checks = {node.pk: _link_check(ports.get(node.pk, [])) for node in nodes}
    made: list[tuple[ProbeRun, list[Node]]] = []
    while slot < now:
        terms = next((v for v in reversed(versions) if v.effective_from <= slot), None)
        if terms is None:
            slot += CADENCE
            continue
        view = terms_view(terms)
        contracted = float(terms.contracted_bandwidth_gbps) * GIGA
        common: dict[str, Any] = {"lease": lease, "terms": terms, "slot": slot, "site_id": site_id}
        for node in nodes:
            tool, states, parsed = checks[node.pk]
            made.append(
                (
                    _run(
                        kind=ProbeKind.LINK,
                        tool=tool,
                        target=node.hostname,
                        pattern=Pattern.NODE,
                        raw=_raw(tool, f"{len(states)} port(s) up"),
                        judgement=verdicts.link(ports=states, terms=view),
                        parsed=parsed,
                        **common,
                    ),
                    [node],
                )
            )
        for index, (client, server) in enumerate(pairs):
            degraded = any(index == i and slot <= at < slot + CADENCE for i, at in slow)
            factor = share * rng.uniform(0.97, 1.03) if degraded else rng.uniform(0.955, 0.99)
            bps = int(contracted * factor)
            tool = Tool.IB_WRITE_BW if terms.technology == Technology.INFINIBAND else Tool.IPERF3
            judgement = verdicts.throughput(measured_bps=bps, terms=view)
            raw = _raw(tool, f"{bps / GIGA:.2f} Gbit/s from {client.hostname} to {server.hostname}")
            run = _run(
                kind=ProbeKind.THROUGHPUT,
                tool=tool,
                target=f"{client.hostname}>{server.hostname}",
                pattern=Pattern.RING,
                raw=raw,
                judgement=judgement,
                measured_bps=bps,
                parsed={"demo": True, "bits_per_second": bps},
                **common,
            )
            made.append((run, [client, server]))
        if terms.collective_busbw_floor_gbps is not None and slot.hour // 2 % 3 == 0:
            # Near the per-node contract, as a healthy ring all-reduce runs (and the
            # training-impact estimate expects), never below the contracted floor.
            floor = float(terms.collective_busbw_floor_gbps) * GIGA
            busbw = int(max(contracted * rng.uniform(0.90, 0.96), floor * rng.uniform(1.02, 1.08)))
            judgement = verdicts.collective(busbw_bps=busbw, terms=view)
            raw = _raw(Tool.ALL_REDUCE_PERF, f"# Avg bus bandwidth : {busbw / 8 / GIGA:.2f}")
            run = _run(
                kind=ProbeKind.COLLECTIVE,
                tool=Tool.ALL_REDUCE_PERF,
                target="all",
                pattern=Pattern.ALL_NODES,
                raw=raw,
                judgement=judgement,
                measured_bps=busbw,
                parsed={"demo": True, "busbw_bps": busbw},
                **common,
            )
            made.append((run, nodes))
        slot += CADENCE
    return made


def load_history(*, now: datetime | None = None, days: int = DAYS) -> DemoHistory:
    """History for every active demo lease that has none (probes_enabled off: the demo's
    own; the network lab's lease is measured for real)."""
    from billing.ingest import ingest_all

    now = now or timezone.now()
    result = DemoHistory()
    leases = Lease.objects.filter(status=LeaseStatus.ACTIVE, probes_enabled=False).exclude(
        probe_runs__isnull=False
    )
    for lease in leases:
        made = _history(lease, now, days)
        if not made:
            continue
        with transaction.atomic():
            runs = ProbeRun.objects.bulk_create([run for run, _ in made], batch_size=500)
            links = [
                ProbeRun.nodes.through(proberun_id=run.pk, node_id=node.pk)
                for run, (_, nodes) in zip(runs, made, strict=True)
                for node in nodes
            ]
            ProbeRun.nodes.through.objects.bulk_create(links, batch_size=1000)
        chain.link_pending(lease_id=lease.pk, now=now)
        result.leases += 1
        result.runs += len(runs)
    if result.runs:
        ingest_all(notify=False)
    return result
