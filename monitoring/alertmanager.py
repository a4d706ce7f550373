"""Alertmanager's alerts taken in (webhook payload version 4): an alert labelled with a node
or a switch becomes evidence on the leases that hold those nodes now, and an incident on
each of them; ``status: resolved`` closes what it opened.

- **Which nodes.** ``node`` (a hostname), ``instance`` (node_exporter's and
  dcgm-exporter's ``host:port``; the port is dropped, hostname or management address),
  ``hostname``, or ``switch`` (a switch's name, narrowed by ``fabric`` when given): a leaf
  switch affects the nodes under it, a spine every node of its fabric.
- **Which leases.** The active leases those nodes are assigned to at the alert's start.
- **Incident or evidence.** An alert whose ``severity`` is ``info`` or ``none`` is kept as
  evidence only. Any other opens an incident on each lease (kind from the label
  ``gpulease_kind`` when it names a probe kind, else ``link``; pattern ``alertmanager``;
  target "ALERTNAME on SUBJECT"), notified like every incident (email and signed webhook,
  after commit). Two alerts with the same name on the same subject share the incident,
  which closes when the last of them is resolved.
- **Occurrences.** An alert is an occurrence, (fingerprint, startsAt): the fingerprint
  hashes the labels, so every outage of one port carries the same one, and Alertmanager
  gives an alert that fires again after it resolved a new startsAt. So a recurrence is a
  new ExternalAlert and opens a new incident. Alertmanager holds one alert per
  fingerprint, so an occurrence still firing here when a later one arrives ended by the
  later one's start (its resolved notification was lost, or send_resolved is off): it is
  resolved then, and so is an older occurrence first delivered after a newer one.
- **Idempotent.** A repeated notification of an occurrence (Alertmanager repeats firing
  groups every repeat_interval, and its HA peers each deliver) changes nothing, and a
  resolved one is closed once. Deliveries are taken in one at a time (a transaction
  holding ``common.locks.intake_lock``), so simultaneous deliveries of one new alert
  create it once: no duplicate row, no 500.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from common.locks import intake_lock, locking
from incidents import services as incident_services
from incidents.choices import IncidentState
from leases import selectors as lease_selectors
from leases.choices import ProbeKind
from leases.models import Lease, Node
from monitoring.models import ExternalAlert

PATTERN = "alertmanager"
LOCK = "monitoring.alertmanager.intake"
EVIDENCE_ONLY_SEVERITIES = frozenset({"info", "none"})
NODE_LABELS = ("node", "hostname", "instance")


@dataclass
class IntakeResult:
    received: int = 0
    created: int = 0
    resolved: int = 0
    unchanged: int = 0
    unmatched: int = 0  # no node or switch of gpulease named in the labels
    opened: list[int] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "received": self.received,
            "created": self.created,
            "resolved": self.resolved,
            "unchanged": self.unchanged,
            "unmatched": self.unmatched,
            "incidents_opened": self.opened,
            "incidents_closed": self.closed,
        }


def _host(instance: str) -> str:
    """node_exporter's instance "host:port" (or "[v6]:port") without its port."""
    if instance.startswith("["):
        return instance[1:].split("]", 1)[0]
    return instance.rsplit(":", 1)[0] if instance.count(":") == 1 else instance


def affected_nodes(labels: dict[str, str]) -> tuple[str, list[Node]]:
    """(subject, nodes) the labels name; ("", []) when they name nothing gpulease knows."""
    for name in NODE_LABELS:
        value = labels.get(name, "")
        if not value:
            continue
        host = _host(value) if name == "instance" else value
        nodes = lease_selectors.nodes_at_host(host=host)
        if nodes:
            return nodes[0].hostname, nodes
    switch = labels.get("switch", "")
    if switch:
        found = lease_selectors.switches_named(name=switch, fabric=labels.get("fabric"))
        if found:
            return switch, lease_selectors.nodes_behind(switches=found)
    return "", []


def _rule(alert: dict[str, Any]) -> str:
    name = alert["labels"].get("alertname", "")
    summary = alert["annotations"].get("summary", "")
    text = f"Alertmanager alert {name}" + (f": {summary}" if summary else "")
    return text[:255]


def _open_incidents(
    record: ExternalAlert, alert: dict[str, Any], leases: list[Lease], notify: bool
) -> list[int]:
    opened = []
    kind = alert["labels"].get("gpulease_kind", "")
    kind = kind if kind in ProbeKind.values else ProbeKind.LINK
    target = f"{record.alertname} on {record.subject}"[:255]
    for lease in leases:
        # A fault older than the lease is the lease's from its first instant, under the
        # terms in force then (the one terms-in-force lookup, LeaseTerms.objects.in_force).
        opened_at = max(record.starts_at, lease.starts_at)
        terms = lease_selectors.terms_in_force(lease=lease, at=opened_at)
        if terms is None:
            continue
        # An alert already holding this lease's incident open shares it.
        incident, new = incident_services.open_or_extend(
            actor=incident_services.ALERTMANAGER,
            lease_id=lease.pk,
            kind=kind,
            pattern=PATTERN,
            target=target,
            opened_at=opened_at,
            rule=_rule(alert),
            terms_id=terms.pk,
            notify=notify,
        )
        if new:
            opened.append(incident.pk)
        record.incidents.add(incident)
    return opened


def _close_incidents(record: ExternalAlert, at: datetime, notify: bool) -> list[int]:
    """Close this alert's open incidents that no other firing alert holds open."""
    closed = []
    for incident in locking(record.incidents).filter(state=IncidentState.OPEN):
        others = incident.external_alerts.exclude(pk=record.pk).filter(
            status=ExternalAlert.Status.FIRING
        )
        if others.exists():
            continue
        if incident_services.close(
            incident,
            at=max(at, incident.opened_at),
            actor=incident_services.ALERTMANAGER,
            notify=notify,
        ):
            closed.append(incident.pk)
    return closed


def _new_occurrence(alert: dict[str, Any], result: IntakeResult, notify: bool) -> ExternalAlert:
    labels, resolved = alert["labels"], alert["status"] == "resolved"
    subject, nodes = affected_nodes(labels)
    if not nodes:
        result.unmatched += 1
    leases = lease_selectors.leases_holding(nodes=nodes, at=alert["startsAt"]) if nodes else []
    record = ExternalAlert.objects.create(
        fingerprint=alert["fingerprint"],
        alertname=labels.get("alertname", "")[:255],
        status=alert["status"],
        severity=labels.get("severity", "")[:32],
        labels=labels,
        annotations=alert["annotations"],
        starts_at=alert["startsAt"],
        ends_at=alert["endsAt"],
        generator_url=alert["generatorURL"][:2000],
        subject=subject[:255],
    )
    record.leases.set(leases)
    result.created += 1
    if resolved:
        result.resolved += 1
    elif record.severity.lower() not in EVIDENCE_ONLY_SEVERITIES:
        result.opened += _open_incidents(record, alert, leases, notify)
    return record


def _resolve(record: ExternalAlert, at: datetime, result: IntakeResult, notify: bool) -> None:
    record.status = ExternalAlert.Status.RESOLVED
    record.ends_at = at
    record.save(update_fields=["status", "ends_at", "updated_at"])
    result.closed += _close_incidents(record, at, notify)


def _successor(record: ExternalAlert) -> datetime | None:
    """When the next occurrence of the record's fingerprint started, if one did."""
    return (
        ExternalAlert.objects.filter(fingerprint=record.fingerprint, starts_at__gt=record.starts_at)
        .order_by("starts_at")
        .values_list("starts_at", flat=True)
        .first()
    )


def _take_new(alert: dict[str, Any], result: IntakeResult, notify: bool) -> None:
    """A first delivery of an occurrence. Only the newest occurrence of a fingerprint can
    be firing (module docstring, Occurrences): an earlier one still firing ended when this
    one started, and this one, if a later one is already here, ended when that started."""
    earlier = ExternalAlert.objects.filter(
        fingerprint=alert["fingerprint"],
        starts_at__lt=alert["startsAt"],
        status=ExternalAlert.Status.FIRING,
    )
    for record in earlier.order_by("starts_at"):
        _resolve(record, alert["startsAt"], result, notify)
    record = _new_occurrence(alert, result, notify)
    later = _successor(record)
    if later is not None and record.status == ExternalAlert.Status.FIRING:
        _resolve(record, later, result, notify)


def take_in(payload: dict[str, Any], *, notify: bool = True) -> IntakeResult:
    """Apply one validated webhook payload (monitoring.serializers) in one transaction."""
    result = IntakeResult()
    now = timezone.now()
    with transaction.atomic():
        intake_lock(LOCK)
        for alert in payload["alerts"]:
            result.received += 1
            record = ExternalAlert.objects.filter(
                fingerprint=alert["fingerprint"], starts_at=alert["startsAt"]
            ).first()
            if record is None:
                _take_new(alert, result, notify)
            elif record.status == ExternalAlert.Status.FIRING and alert["status"] == "resolved":
                result.resolved += 1
                _resolve(record, alert["endsAt"] or now, result, notify)
            else:  # a repeat of a firing occurrence, or of one already resolved
                result.unchanged += 1
    return result
