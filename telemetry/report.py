"""A lease's fabric health over a window, per node and port: what ``manage.py
fabric_health`` prints (billing's command, which adds the month's probe tax from
``billing.probe_tax``). Every figure comes from its one home: the verdicts from
``gpulease_verify.health`` over the stored samples, the disputes from the runs and
incidents."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from benchmarks import selectors, witness
from gpulease_verify import health
from gpulease_verify import witness as witness_rules
from gpulease_verify.canonical import iso_utc
from gpulease_verify.telemetry import PortSample as Sample
from incidents import selectors as incident_selectors
from leases import selectors as lease_selectors
from leases.models import Lease
from telemetry.links import as_sample
from telemetry.models import NodeReading, PortSample, SwitchReading
from telemetry.services import Judged, clearances_of


def fabric_health(lease: Lease, *, since: datetime, until: datetime) -> dict[str, Any]:
    terms = lease_selectors.terms_in_force(lease=lease, at=until)
    judged = Judged.by(terms)
    thresholds = judged.limits
    nodes = lease_selectors.lease_nodes_at(lease_ids=[lease.pk], at=until).get(lease.pk, [])
    samples: dict[int, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for row in PortSample.objects.filter(
        node__in=[node.pk for node in nodes], at__gt=since, at__lte=until
    ).order_by("node_id", "port", "at"):
        samples[row.node_id][row.port].append(as_sample(row))
    # The quiet intervals not stored yet (merged into one row every few minutes) count too.
    for reading in NodeReading.objects.filter(node__in=[node.pk for node in nodes]):
        for data in (reading.pending or {}).values():
            pending = Sample.from_json(data)
            if since < pending.at <= until:
                samples[reading.node_id][pending.port].append(pending)
    cleared = clearances_of(
        [(node_id, port) for node_id, by_port in samples.items() for port in by_port],
        since=since,
        until=until,
    )
    ports = witness.witness_ports(nodes)
    disputed = defaultdict(list)
    for run in selectors.integrity_disputes(
        lease=lease, since=since, until=until, rule_prefix=witness_rules.RULE
    ):
        disputed[run.target.split(">")[0]].append(
            {
                "run": run.pk,
                "target": run.target,
                "slot_at": iso_utc(run.slot_at),
                "reason": run.verdict_reason,
            }
        )
    report_nodes = []
    for node in nodes:
        port_reports = []
        for port, found in sorted(samples[node.pk].items()):
            findings = health.evaluate(
                found,
                thresholds,
                now=until,
                rules=judged.rules,
                cleared=cleared.get((node.pk, port), ()),
            )
            port_reports.append(
                {
                    "port": port,
                    "up": found[-1].up,
                    "samples": len(found),
                    "down_cycles": sum(s.down_cycles for s in found),
                    "disputed": sum(s.disputed for s in found),
                    "cleared": [iso_utc(when) for when in cleared.get((node.pk, port), ())],
                    "unavailable_seconds": round(
                        health.unavailable_seconds(found, start=since, end=until), 3
                    ),
                    "findings": [
                        {
                            "rule": f.rule,
                            "version": f.version,
                            "severity": f.severity,
                            "start": iso_utc(f.start),
                            "end": iso_utc(f.end) if f.end else None,
                            "detail": f.detail,
                        }
                        for f in findings
                    ],
                }
            )
        report_nodes.append(
            {
                "node": node.hostname,
                "ports": port_reports,
                "witness": _witness(
                    node.pk, ports.get(node.hostname), samples[node.pk], since, until, terms
                ),
                "disputed_runs": disputed.get(node.hostname, []),
            }
        )
    incidents = incident_selectors.fabric_within(lease=lease, since=since, until=until)
    return {
        "lease": lease.reference,
        "since": iso_utc(since),
        "until": iso_utc(until),
        "thresholds": asdict(thresholds),
        "rules": dict(health.rule_set(judged.rules)),
        "nodes": report_nodes,
        "incidents": [
            {
                "id": incident.pk,
                "kind": incident.kind,
                "target": incident.target,
                "rule": incident.rule,
                "state": incident.state,
                "opened_at": iso_utc(incident.opened_at),
                "closed_at": iso_utc(incident.closed_at) if incident.closed_at else None,
                "detail": incident.detail,
            }
            for incident in incidents.order_by("opened_at", "pk")
        ],
    }


def _witness(node_id, port, node_samples, since, until, terms) -> dict[str, Any] | None:  # type: ignore[no-untyped-def]
    """The host's bytes sent against its switch port's octets received over the window:
    from the first to the last switch reading inside it."""
    if port is None:
        return None
    readings = list(
        SwitchReading.objects.filter(
            switch_id=port.switch_id, if_name=port.if_name, at__gte=since, at__lte=until
        ).order_by("at")
    )
    block: dict[str, Any] = {
        "switch": port.switch,
        "port": port.if_name,
        "readings": len(readings),
        "oper_up": readings[-1].oper_up if readings else None,
    }
    if len(readings) < 2:
        return {**block, "host_tx_bytes": None, "switch_in_octets": None, "agrees": None}
    first, last = readings[0].at, readings[-1].at
    host = sum(
        int(sample.deltas.get("tx_bytes", 0))
        for sample in node_samples.get(port.host_port, [])
        if first < sample.at <= last and not sample.reset
    )
    switch = int(readings[-1].in_octets - readings[0].in_octets)
    check = health.witness_check(
        host_value=host,
        switch_value=switch,
        tolerance_percent=terms.witness_tolerance_percent if terms else Decimal("10"),
    )
    return {
        **block,
        "host_tx_bytes": host,
        "switch_in_octets": switch,
        "difference_percent": round(check.difference_percent, 3),
        "agrees": check.agrees,
    }
