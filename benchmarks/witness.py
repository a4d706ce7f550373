"""Reading the switch-side witness: which switch port each node's data port plugs into,
and what those ports count, read over SNMP by gpulease (``benchmarks.switch_snmp``)."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.utils import timezone

from benchmarks.models import ProbeRun
from benchmarks.switch_snmp import SwitchPortReading, SwitchUnreachable, read_ports
from gpulease_verify import witness
from incidents import services as incident_services
from incidents.choices import FabricIncidentKind, IncidentState
from incidents.models import Incident
from leases.models import Node
from leases.selectors import witnessed_ports

log = logging.getLogger(__name__)

# One open integrity incident per node: every disputed run of it joins that incident.
INTEGRITY_PATTERN = "witness"


@dataclass(frozen=True)
class WitnessPort:
    switch_id: int
    switch: str
    address: str
    snmp_port: int
    community: str
    if_name: str
    host_port: str  # the node's port as telemetry names it: its netdev, else "device:port"


def witness_ports(nodes: Iterable[Node]) -> dict[str, WitnessPort]:
    """Hostname -> the switch port of its data port (the one with a data address, else its
    first mapped port), for nodes whose leaf switch is polled: one query."""
    found: dict[str, WitnessPort] = {}
    ports = witnessed_ports(nodes=nodes)
    for port in sorted(ports, key=lambda p: (p.node_id, p.address is None)):
        switch = port.node.leaf_switch
        found.setdefault(
            port.node.hostname,
            WitnessPort(
                switch_id=switch.pk,
                switch=switch.name,
                address=str(switch.management_address),
                snmp_port=switch.snmp_port,
                community=switch.snmp_community,
                if_name=port.switch_port,
                host_port=port.netdev or f"{port.device}:{port.port_number}",
            ),
        )
    return found


def read(ports: Mapping[str, WitnessPort]) -> dict[str, SwitchPortReading]:
    """Hostname -> its switch port's counters now: one SNMP request per switch. A switch
    that does not answer leaves its nodes out (no witness, never a guess)."""
    by_switch: dict[tuple[str, int, str], dict[str, str]] = defaultdict(dict)
    for hostname, port in ports.items():
        by_switch[(port.address, port.snmp_port, port.community)][hostname] = port.if_name
    readings: dict[str, SwitchPortReading] = {}
    for (address, snmp_port, community), names in by_switch.items():
        try:
            found = read_ports(
                address=address,
                port=snmp_port,
                community=community,
                if_names=set(names.values()),
                timeout_s=settings.WITNESS_SNMP_TIMEOUT_S,
            )
        except SwitchUnreachable as error:
            log.warning("switch %s:%s gave no witness reading: %s", address, snmp_port, error)
            continue
        for hostname, if_name in names.items():
            if if_name in found:
                readings[hostname] = found[if_name]
    return readings


def read_settled(ports: Mapping[str, WitnessPort]) -> dict[str, SwitchPortReading]:
    """The readings once the switch's counters have caught up with traffic that just
    ended: switches (and net-snmp) refresh their port counters every few seconds, so a
    reading right after a probe can miss its last seconds."""
    time.sleep(settings.WITNESS_SETTLE_S)
    return read(ports)


@dataclass(frozen=True)
class Witnessed:
    """The switch readings around one probe batch."""

    ports: Mapping[str, WitnessPort]
    before: Mapping[str, SwitchPortReading]
    after: Mapping[str, SwitchPortReading]

    def block(
        self,
        *,
        client: str,
        seconds: float,
        measured_bps: int,
        tolerance_percent: Decimal,
        host_bytes: int | None = None,
    ) -> dict[str, Any] | None:
        if client not in self.before or client not in self.after:
            return None
        port = self.ports[client]
        return witness.throughput_block(
            switch=port.switch,
            port=port.if_name,
            in_octets_before=self.before[client].in_octets,
            in_octets_after=self.after[client].in_octets,
            seconds=seconds,
            measured_bps=measured_bps,
            tolerance_percent=tolerance_percent,
            host_bytes=host_bytes,
        )


def counters_block(port: WitnessPort, reading: SwitchPortReading) -> dict[str, Any]:
    """What a counters run of a node keeps of its switch port, read right after the node's
    own counters: pay-per-use meters from it where the fabric has a witness
    (``billing.ingest``), as IDCs meter at their switches."""
    return {
        "switch": port.switch,
        "port": port.if_name,
        "in_octets": int(reading.in_octets),
        "out_octets": int(reading.out_octets),
    }


def open_dispute(
    *,
    lease_id: int,
    node: str,
    terms_id: int,
    at: datetime,
    rule: str,
    detail: str,
    run: ProbeRun | None = None,
) -> Incident:
    """Open (or extend) the measurement-integrity incident of the node whose report the
    switch contradicted, with the disputed run when there is one; it stays open until a
    person resolves it. The one incident per node holds every dispute, of runs and of
    counters alike."""
    incident, _opened = incident_services.open_or_extend(
        actor=incident_services.WITNESS,
        lease_id=lease_id,
        kind=FabricIncidentKind.INTEGRITY,
        pattern=INTEGRITY_PATTERN,
        target=node,
        opened_at=at,
        rule=rule,
        detail=detail,
        terms_id=terms_id,
        violations=1,
        runs=[run] if run is not None else [],
    )
    return incident


def resolve_integrity_incidents(incidents, *, by: str) -> int:  # type: ignore[no-untyped-def]
    """Close the open measurement-integrity incidents among ``incidents``, saying who
    resolved them and when. Returns how many."""
    now = timezone.now()
    resolved = 0
    for incident in incidents.filter(kind=FabricIncidentKind.INTEGRITY, state=IncidentState.OPEN):
        resolved += incident_services.close(
            incident,
            at=now,
            actor=incident_services.Actor.person(by),
            note=f"Resolved by {by} at {now:%Y-%m-%d %H:%M} UTC.",
        )
    return resolved
