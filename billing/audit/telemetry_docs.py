"""The audit bundle's telemetry: the lease's telemetry batches (chain links holding what
each poll stored: port intervals and switch readings) and the fabric health findings the
server computes from them, which ``gpulease-verify`` recomputes."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import Q

from gpulease_verify import fabric, health
from gpulease_verify.canonical import iso_utc
from leases.models import Lease, LeaseTerms
from telemetry.links import telemetry_batches, telemetry_link_content

# A batch stored up to this long after the period's end can hold an interval of it.
AFTER_END = timedelta(hours=2)


def telemetry_doc(
    lease: Lease, start: datetime, end: datetime, first: int | None, last: int | None
) -> list[dict[str, Any]]:
    """The batches polled in [start, end + AFTER_END), and any linked between the bundle's
    first and last run (so its stretch of the chain has no gap), in chain order."""
    batches = telemetry_batches(lease.pk).filter(chain_index__isnull=False)
    near = Q(at__gte=start, at__lt=end + AFTER_END)
    if first is not None and last is not None:
        near |= Q(chain_index__gte=first, chain_index__lte=last)
    return [
        {
            "id": batch.pk,
            "at": iso_utc(batch.at),
            "chain_index": batch.chain_index,
            "prev_hash": batch.prev_hash,
            "telemetry_hash": batch.link_hash,
            "content": telemetry_link_content(batch),
        }
        for batch in batches.filter(near).order_by("chain_index")
    ]


def fabric_health_doc(
    batches: list[dict[str, Any]], terms: LeaseTerms | None, now: datetime
) -> dict[str, Any]:
    """The health findings of every port in the batches, as of ``now`` (the period's end,
    or the bundle's generation while the month runs), by the rule set and thresholds of
    the terms in force then, with the operators' clearances the batches record."""
    thresholds = health.HealthThresholds.from_terms(terms.health_thresholds if terms else {})
    rules = terms.health_rules if terms else 1
    return {
        "as_of": iso_utc(now),
        "terms_version": terms.version if terms else None,
        "thresholds": fabric.thresholds_doc(thresholds, rules),
        "rules": dict(health.rule_set(rules)),
        "findings": fabric.findings(
            fabric.ports_of(batches),
            thresholds,
            now,
            rules=rules,
            cleared=fabric.clearances_of(batches),
        ),
        "rule": (
            "gpulease_verify.health.evaluate over each node and port's intervals in the "
            "telemetry batches, by the rule set (health_rules) and thresholds of the terms "
            "version in force at as_of, with the clearances the batches record"
        ),
    }
