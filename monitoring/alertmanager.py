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
- **Idempotent.** One ExternalAlert per fingerprint: a repeated notification (Alertmanager
  repeats firing groups every repeat_interval) changes nothing, and a resolved alert is
  closed once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from billing.choices import IncidentState
from billing.models import Incident
from common.locks import locking
from leases.choices import LeaseStatus, ProbeKind, SwitchRole
from leases.models import Lease, LeaseTerms, Node, NodeAssignment, Switch
from monitoring.models import ExternalAlert

PATTERN = "alertmanager"
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
        nodes = list(Node.objects.filter(Q(hostname=host) | Q(management_address=host)))
        if nodes:
            return nodes[0].hostname, nodes
    switch = labels.get("switch", "")
    if switch:
        switches = Switch.objects.filter(name=switch)
        if labels.get("fabric"):
            switches = switches.filter(fabric__name=labels["fabric"])
        found = list(switches)
        if found:
            nodes = list(
                Node.objects.filter(
                    Q(leaf_switch__in=[s for s in found if s.role == SwitchRole.LEAF])
                    | Q(
                        leaf_switch__fabric_id__in=[
                            s.fabric_id for s in found if s.role == SwitchRole.SPINE
                        ]
                    )
                ).distinct()
            )
            return switch, nodes
    return "", []


def leases_holding(nodes: Iterable[Node], at: datetime) -> list[Lease]:
    lease_ids = (
        NodeAssignment.objects.in_force_at(at)
        .filter(node__in=list(nodes), lease__status=LeaseStatus.ACTIVE)
        .values("lease_id")
    )
    return list(Lease.objects.filter(pk__in=lease_ids).select_related("tenant").order_by("pk"))


def _terms_at(lease: Lease, at: datetime) -> LeaseTerms | None:
    return (
        LeaseTerms.objects.filter(lease=lease, effective_from__lte=at)
        .order_by("-effective_from")
        .first()
        or LeaseTerms.objects.filter(lease=lease).order_by("effective_from").first()
    )


def _notify_after_commit(incident: Incident, event: str) -> None:
    from billing.tasks import notify_incident

    transaction.on_commit(lambda: notify_incident.delay(incident.pk, event))


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
        terms = _terms_at(lease, record.starts_at)
        if terms is None:
            continue
        incident = (
            locking(Incident.objects)
            .filter(
                lease=lease, kind=kind, pattern=PATTERN, target=target, state=IncidentState.OPEN
            )
            .first()
        )
        if incident is None:
            incident = Incident.objects.create(
                lease=lease,
                kind=kind,
                pattern=PATTERN,
                target=target,
                opened_at=record.starts_at,
                rule=_rule(alert),
                terms=terms,
            )
            opened.append(incident.pk)
            if notify:
                _notify_after_commit(incident, "opened")
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
        incident.state = IncidentState.CLOSED
        incident.closed_at = max(at, incident.opened_at)
        incident.save(update_fields=["state", "closed_at"])
        closed.append(incident.pk)
        if notify:
            _notify_after_commit(incident, "closed")
    return closed


def take_in(payload: dict[str, Any], *, notify: bool = True) -> IntakeResult:
    """Apply one validated webhook payload (monitoring.serializers) in one transaction."""
    result = IntakeResult()
    now = timezone.now()
    with transaction.atomic():
        for alert in payload["alerts"]:
            result.received += 1
            labels, resolved = alert["labels"], alert["status"] == "resolved"
            record = locking(ExternalAlert.objects).filter(fingerprint=alert["fingerprint"]).first()
            if record is None:
                subject, nodes = affected_nodes(labels)
                if not nodes:
                    result.unmatched += 1
                leases = leases_holding(nodes, alert["startsAt"]) if nodes else []
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
                if not resolved and record.severity.lower() not in EVIDENCE_ONLY_SEVERITIES:
                    result.opened += _open_incidents(record, alert, leases, notify)
                if resolved:
                    result.resolved += 1
                continue
            if record.status == ExternalAlert.Status.RESOLVED or not resolved:
                # Already resolved, or still firing (a repeat): nothing new.
                result.unchanged += 1
                continue
            record.status = ExternalAlert.Status.RESOLVED
            record.ends_at = alert["endsAt"] or now
            record.save(update_fields=["status", "ends_at", "updated_at"])
            result.resolved += 1
            result.closed += _close_incidents(record, record.ends_at, notify)
    return result
