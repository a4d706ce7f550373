"""An audit bundle's telemetry, read the way the server reads its database: the port
intervals of its telemetry batches by node and port, the operators' clearances, the
fabric health findings they give (``gpulease_verify.health``), the link-state witness
(``gpulease_verify.witness.link_state_dispute``), and whether a link-check slot heard an
outage from them. The server builds the bundle's ``fabric_health`` section with
``findings``; the verifier recomputes it with the same function."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from gpulease_verify import health, witness
from gpulease_verify.canonical import iso_utc
from gpulease_verify.canonical import parse_instant as _at
from gpulease_verify.telemetry import PortSample, sample_from_entry

Ports = dict[tuple[str, str], list[PortSample]]
Cleared = dict[tuple[str, str], list[datetime]]


def ports_of(batches: Iterable[Mapping[str, Any]]) -> Ports:
    """(node, port) -> its intervals in the batches (bundle entries), in time order."""
    found: Ports = {}
    for batch in batches:
        for entry in batch["content"]["samples"]:
            node, sample = sample_from_entry(entry)
            found.setdefault((node, sample.port), []).append(sample)
    for samples in found.values():
        samples.sort(key=lambda sample: sample.at)
    return found


def clearances_of(batches: Iterable[Mapping[str, Any]]) -> Cleared:
    """(node, port) -> the instants an operator cleared it, from the batches' ``cleared``."""
    found: Cleared = {}
    for batch in batches:
        for entry in batch["content"].get("cleared", []):
            found.setdefault((str(entry["node"]), str(entry["port"])), []).append(
                _at(str(entry["at"]))
            )
    return {key: sorted(instants) for key, instants in found.items()}


def findings(
    ports: Ports,
    thresholds: health.HealthThresholds,
    now: datetime,
    *,
    rules: int = 1,
    cleared: Cleared | None = None,
) -> list[dict[str, Any]]:
    """Every port's findings as of ``now`` by rule set ``rules``, as the bundle's
    ``fabric_health`` lists them."""
    found = []
    for (node, port), samples in sorted(ports.items()):
        for finding in health.evaluate(
            samples,
            thresholds,
            now=now,
            rules=rules,
            cleared=(cleared or {}).get((node, port), ()),
        ):
            found.append(
                {
                    "node": node,
                    "port": port,
                    "rule": finding.rule,
                    "version": finding.version,
                    "severity": finding.severity,
                    "start": iso_utc(finding.start),
                    "end": iso_utc(finding.end),
                    "detail": finding.detail,
                }
            )
    return found


def thresholds_doc(thresholds: health.HealthThresholds, rules: int = 1) -> dict[str, str]:
    """The thresholds rule set ``rules`` reads, as the bundle states them: text, as a
    bundle holds no JSON float."""
    return {name: str(value) for name, value in health.fields_of(thresholds, rules).items()}


def down_only(ports: Ports) -> Ports:
    """The intervals that can make a slot unavailable, per port (``health.unavailable_only``)."""
    return {key: health.unavailable_only(samples) for key, samples in ports.items()}


def link_state_mismatches(batches: Iterable[Mapping[str, Any]]) -> tuple[list[str], int]:
    """Each batch's disputed intervals recomputed from its switch readings: a reading
    that holds a link-state witness (``link``) disputes the interval of its node and port
    ending at the batch's poll when ``witness.link_state_dispute`` says so. Returns what
    differs from the intervals' ``disputed`` marks (a disputed interval the switch does
    not contradict would hide an outage from availability) and how many intervals the
    witness disputes."""
    problems: list[str] = []
    disputed = 0
    for batch in batches:
        content = batch["content"]
        samples = {}
        for entry in content["samples"]:
            node, sample = sample_from_entry(entry)
            samples[(node, sample.port, sample.at)] = sample
        at = _at(str(content["at"]))
        witnessed = set()
        for reading in content.get("switch", []):
            link = reading.get("link")
            if not isinstance(link, Mapping):
                continue
            key = (str(link["node"]), str(link["host_port"]), at)
            host = samples.get(key)
            if host is None:
                continue
            witnessed.add(key)
            sentence = witness.link_state_dispute(
                host, switch=str(reading["switch"]), port=str(reading["port"]), link=link
            )
            disputed += sentence is not None
            if (sentence is not None) != host.disputed:
                problems.append(
                    f"telemetry batch {batch.get('id')}: {key[0]} {key[1]} is "
                    f"{'marked' if host.disputed else 'not marked'} disputed, but its switch "
                    f"reading {'does not contradict' if host.disputed else 'contradicts'} it"
                )
        for (node, port, end), sample in samples.items():
            if sample.disputed and (node, port, end) not in witnessed:
                problems.append(
                    f"telemetry batch {batch.get('id')}: {node} {port} is marked disputed "
                    "without a switch reading that witnesses it"
                )
    return problems, disputed
