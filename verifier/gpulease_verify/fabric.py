"""An audit bundle's telemetry, read the way the server reads its database: the port
intervals of its telemetry batches by node and port, the fabric health findings they give
(``gpulease_verify.health``), and whether a link-check slot heard an outage from them.
The server builds the bundle's ``fabric_health`` section with ``findings``; the verifier
recomputes it with the same function."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict
from datetime import datetime
from typing import Any

from gpulease_verify import health
from gpulease_verify.canonical import iso_utc
from gpulease_verify.telemetry import PortSample, sample_from_entry

Ports = dict[tuple[str, str], list[PortSample]]


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


def findings(
    ports: Ports, thresholds: health.HealthThresholds, now: datetime
) -> list[dict[str, Any]]:
    """Every port's findings as of ``now``, as the bundle's ``fabric_health`` lists them."""
    found = []
    for (node, port), samples in sorted(ports.items()):
        for finding in health.evaluate(samples, thresholds, now=now):
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


def thresholds_doc(thresholds: health.HealthThresholds) -> dict[str, str]:
    """The thresholds as the bundle states them: text, as a bundle holds no JSON float."""
    return {name: str(value) for name, value in asdict(thresholds).items()}


def down_only(ports: Ports) -> Ports:
    """The intervals that can make a slot unavailable, per port (``health.unavailable_only``)."""
    return {key: health.unavailable_only(samples) for key, samples in ports.items()}
