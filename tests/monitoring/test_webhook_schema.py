# ruff: noqa: F811 (pytest fixtures imported from tests/billing/test_notifications.py)
"""The published JSON Schema of gpulease's outgoing incident webhooks
(monitoring/schemas/incident-webhook.schema.json) holds for the bodies actually sent: an
incident the ingest opened and closed from probe runs, and one an Alertmanager alert
opened and resolved, each received by a real HTTP server on 127.0.0.1."""

import json
from datetime import timedelta
from pathlib import Path

import jsonschema
import pytest
from rest_framework.test import APIClient

from billing.ingest import ingest_all
from incidents import notifications
from incidents.models import Incident
from tests.billing.test_notifications import (  # noqa: F401 (fixtures)
    SECRET,
    _receiver_on_loopback_allowed,
    endpoint,
)
from tests.factories import NodeFactory, TenantFactory, at, make_lease, make_run
from tests.portal.support import active

pytestmark = pytest.mark.django_db

SCHEMA_PATH = (
    Path(__file__).resolve().parents[2] / "monitoring" / "schemas" / "incident-webhook.schema.json"
)
GIGA = 10**9


@pytest.fixture
def validator():
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def webhook_tenant(url):
    return TenantFactory(slug="zhiyuan", webhook_url=url, webhook_secret=SECRET)


def sent(incident, event, endpoint):
    notifications.send_webhook(incident=incident, event=event)
    return json.loads(endpoint.requests[-1].body)


def test_an_ingested_incident_s_webhooks_match_the_schema(endpoint, validator):
    nodes = [NodeFactory(hostname="h1"), NodeFactory(hostname="h2")]
    lease = active(make_lease(tenant=webhook_tenant(endpoint.url), reference="ZY-1", nodes=nodes))
    start = at("2026-11-03 00:00")
    for hour, fail in enumerate([False, True, True, True, False]):
        make_run(
            lease,
            slot=start + timedelta(hours=hour),
            verdict="fail" if fail else "pass",
            measured_bps=(40 if fail else 98) * GIGA,
            target="h1>h2",
            nodes=nodes,
        )
    ingest_all(notify=False)
    (incident,) = Incident.objects.filter(lease=lease)
    assert incident.state == "closed" and incident.runs.count() == 3
    for event in ("opened", "closed"):
        body = sent(incident, event, endpoint)
        if event == "opened":  # as it was sent when it opened: state open, no end yet
            body["incident"].update(state="open", closed_at=None)
        validator.validate(body)
        assert body["event"] == f"incident.{event}"


def test_an_alertmanager_incident_s_webhooks_match_the_schema(endpoint, validator, settings):
    settings.ALERTMANAGER_TOKEN = "am"
    node = NodeFactory(hostname="gz-h800-01")
    lease = active(make_lease(tenant=webhook_tenant(endpoint.url), reference="ZY-2", nodes=[node]))
    alert = {
        "status": "firing",
        "labels": {"alertname": "NodeInfinibandLinkDown", "node": "gz-h800-01"},
        "annotations": {},
        "startsAt": "2026-11-10T08:00:00.123Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "",
        "fingerprint": "ab12",
    }
    client = APIClient(HTTP_AUTHORIZATION="Bearer am")
    url = "/api/v1/alertmanager/alerts/"
    body = {"version": "4", "status": "firing", "alerts": [alert]}
    assert client.post(url, body, format="json").status_code == 200
    incident = Incident.objects.get(lease=lease)
    opened = sent(incident, "opened", endpoint)
    validator.validate(opened)
    assert opened["incident"]["pattern"] == "alertmanager"
    assert opened["incident"]["evidence_run_ids"] == []
    resolved = {**alert, "status": "resolved", "endsAt": "2026-11-10T09:00:00Z"}
    body = {"version": "4", "status": "resolved", "alerts": [resolved]}
    assert client.post(url, body, format="json").status_code == 200
    incident.refresh_from_db()
    validator.validate(sent(incident, "closed", endpoint))


def test_the_schema_refuses_what_a_receiver_could_not_rely_on(validator):
    good = {
        "event": "incident.opened",
        "sent_at": "2026-11-10T08:00:05Z",
        "incident": {
            "id": 1,
            "lease": "ZY-1",
            "tenant": "zhiyuan",
            "kind": "throughput",
            "target": "h1>h2",
            "pattern": "ring",
            "state": "open",
            "opened_at": "2026-11-10T08:00:00Z",
            "closed_at": None,
            "violations": 3,
            "worst_bps": 40 * GIGA,
            "worst_latency_us": None,
            "rule": "throughput >= 95% of 100 Gbps contracted (terms v1)",
            "terms_version": 1,
            "evidence_run_ids": [1, 2, 3],
        },
    }
    validator.validate(good)
    for broken in (
        {**good, "event": "incident.reopened"},
        {**good, "incident": {**good["incident"], "kind": "vibes"}},
        {**good, "incident": {**good["incident"], "closed_at": "2026-11-10T09:00:00Z"}},
        {**good, "incident": {**good["incident"], "opened_at": "2026-11-10 08:00"}},
        {**good, "incident": {**good["incident"], "worst_bps": "40000000000"}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate(broken)
