"""Alertmanager's webhook (payload version 4): alerts on a node or switch attach to the
leases holding those nodes as incidents (or evidence only), once per fingerprint, and
close on ``status: resolved``."""

from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from billing.choices import IncidentState
from billing.models import Incident
from leases.choices import SwitchRole
from monitoring.models import ExternalAlert
from tests.factories import (
    FabricFactory,
    NodeFactory,
    SwitchFactory,
    make_lease,
)
from tests.portal.support import active

pytestmark = pytest.mark.django_db

URL = "/api/v1/alertmanager/alerts/"
TOKEN = "am-token"


@pytest.fixture(autouse=True)
def _token(settings):
    settings.ALERTMANAGER_TOKEN = TOKEN


@pytest.fixture
def notified(monkeypatch):
    sent = []
    monkeypatch.setattr(
        "billing.tasks.notify_incident.delay", lambda pk, event: sent.append((pk, event))
    )
    return sent


@pytest.fixture
def fabric():
    """Fabric f: spine s1, leaf-a with n1, n2 (lease A), leaf-b with n3 (lease B), n4 free."""
    fab = FabricFactory(name="f")
    SwitchFactory(fabric=fab, name="s1", role=SwitchRole.SPINE)
    leaf_a = SwitchFactory(fabric=fab, name="leaf-a")
    leaf_b = SwitchFactory(fabric=fab, name="leaf-b")
    n1 = NodeFactory(hostname="n1", leaf_switch=leaf_a, management_address="10.9.0.1")
    n2 = NodeFactory(hostname="n2", leaf_switch=leaf_a)
    n3 = NodeFactory(hostname="n3", leaf_switch=leaf_b)
    NodeFactory(hostname="n4", leaf_switch=leaf_b)
    a = active(make_lease(reference="A", nodes=[n1, n2]))
    b = active(make_lease(reference="B", nodes=[n3]))
    return {"A": a, "B": b}


def alert(fingerprint="a1b2c3d4e5f60718", status="firing", **labels):
    return {
        "status": status,
        "labels": {"alertname": "NodeInfinibandLinkDown", "severity": "critical", **labels},
        "annotations": {"summary": "mlx5_0 port 1 went down"},
        "startsAt": "2026-11-10T08:00:00Z",
        "endsAt": "2026-11-10T09:00:00Z" if status == "resolved" else "0001-01-01T00:00:00Z",
        "generatorURL": "http://prometheus:9090/graph?g0.expr=x",
        "fingerprint": fingerprint,
    }


def payload(*alerts, status="firing"):
    return {
        "version": "4",
        "groupKey": '{}:{alertname="NodeInfinibandLinkDown"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "gpulease",
        "groupLabels": {"alertname": "NodeInfinibandLinkDown"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager:9093",
        "alerts": list(alerts),
    }


def post(body, token=TOKEN):
    client = APIClient(REMOTE_ADDR="10.0.0.9")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.post(URL, body, format="json", **headers)


def test_a_node_alert_opens_an_incident_on_the_lease_holding_the_node(
    fabric, notified, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(payload(alert(instance="n1:9100")))
    assert response.status_code == 200, response.content
    assert response.json()["created"] == 1
    (incident,) = Incident.objects.all()
    assert incident.lease == fabric["A"]
    assert incident.state == IncidentState.OPEN
    assert incident.kind == "link" and incident.pattern == "alertmanager"
    assert incident.target == "NodeInfinibandLinkDown on n1"
    assert incident.opened_at == datetime(2026, 11, 10, 8, tzinfo=UTC)
    assert "mlx5_0 port 1 went down" in incident.rule
    record = ExternalAlert.objects.get()
    assert list(record.leases.all()) == [fabric["A"]]
    assert record.ends_at is None  # Go's zero time: no end yet
    assert notified == [(incident.pk, "opened")]


def test_repeats_are_idempotent_and_resolved_closes(
    fabric, notified, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        post(payload(alert(node="n2")))
    with django_capture_on_commit_callbacks(execute=True):
        again = post(payload(alert(node="n2")))
    assert again.json()["unchanged"] == 1
    assert Incident.objects.count() == 1 and ExternalAlert.objects.count() == 1
    with django_capture_on_commit_callbacks(execute=True):
        resolved = post(payload(alert(node="n2", status="resolved"), status="resolved"))
    assert resolved.json()["resolved"] == 1
    (incident,) = Incident.objects.all()
    assert incident.state == IncidentState.CLOSED
    assert incident.closed_at == datetime(2026, 11, 10, 9, tzinfo=UTC)
    assert post(payload(alert(node="n2", status="resolved"))).json()["unchanged"] == 1
    assert [event for _, event in notified] == ["opened", "closed"]


def test_a_leaf_switch_affects_its_nodes_leases_and_a_spine_the_whole_fabric(fabric):
    post(payload(alert("0001", switch="leaf-b", fabric="f", alertname="SwitchPortErrors")))
    assert set(Incident.objects.values_list("lease__reference", flat=True)) == {"B"}
    post(payload(alert("0002", switch="s1", alertname="SpineDown")))
    assert set(
        Incident.objects.filter(target="SpineDown on s1").values_list("lease__reference", flat=True)
    ) == {"A", "B"}


def test_two_alerts_share_an_incident_until_both_are_resolved(fabric):
    post(payload(alert("00aa", node="n1"), alert("00bb", node="n1", device="mlx5_1")))
    (incident,) = Incident.objects.all()
    post(payload(alert("00aa", node="n1", status="resolved")))
    incident.refresh_from_db()
    assert incident.state == IncidentState.OPEN
    post(payload(alert("00bb", node="n1", status="resolved")))
    incident.refresh_from_db()
    assert incident.state == IncidentState.CLOSED


def test_info_alerts_and_unknown_hosts_are_evidence_only(fabric):
    response = post(
        payload(alert("0c", node="n1", severity="info"), alert("0d", node="elsewhere-7"))
    )
    assert response.json()["created"] == 2 and response.json()["unmatched"] == 1
    assert Incident.objects.count() == 0
    assert list(ExternalAlert.objects.get(fingerprint="0c").leases.all()) == [fabric["A"]]
    assert ExternalAlert.objects.get(fingerprint="0d").leases.count() == 0


def test_a_free_node_touches_no_lease(fabric):
    post(payload(alert(node="n4")))
    assert Incident.objects.count() == 0


def test_the_node_can_be_named_by_its_management_address(fabric):
    post(payload(alert(instance="10.9.0.1:9100")))
    assert Incident.objects.get().lease == fabric["A"]


@pytest.mark.parametrize("token", ["", "wrong"])
def test_the_intake_needs_the_token(fabric, token):
    response = post(payload(alert(node="n1")), token=token)
    assert response.status_code == 401
    assert response.json()["error"]["code"] in ("not_authenticated", "authentication_failed")
    assert ExternalAlert.objects.count() == 0


def test_the_intake_is_closed_without_a_configured_token(fabric, settings):
    settings.ALERTMANAGER_TOKEN = ""
    assert post(payload(alert(node="n1")), token="anything").status_code == 401


def test_a_staff_api_token_is_not_alertmanager(fabric):
    from api.models import ApiToken  # noqa: F401 (the token kind that must not work)

    assert post(payload(alert(node="n1")), token="gpl_abc_def").status_code == 401


@pytest.mark.parametrize(
    "change",
    [
        {"version": "3"},
        {"alerts": [{**alert(), "fingerprint": "NOT-HEX"}]},
        {"alerts": [{**alert(), "startsAt": "1970-01-01T00:00:00Z"}]},
        {"alerts": [{**alert(), "labels": {"severity": "critical"}}]},  # no alertname
        {"alerts": [{**alert(), "status": "pending"}]},
        {"alerts": "nope"},
        {"alerts": [{**alert(), "endsAt": "0001-01-01T00:00:00+14:00"}]},  # only Go's zero
        {"alerts": [{**alert(), "endsAt": "9999-12-31T23:59:59Z"}]},
        {"alerts": [alert(f"{i:04x}") for i in range(1001)]},  # more than MAX_ALERTS
    ],
)
def test_malformed_payloads_are_refused_with_a_reason(fabric, change):
    response = post({**payload(alert(node="n1")), **change})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
    assert ExternalAlert.objects.count() == 0


def test_only_post_and_no_unknown_query_parameters(fabric):
    client = APIClient(HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert client.get(URL).status_code == 405
    response = client.post(f"{URL}?colour=1", payload(alert(node="n1")), format="json")
    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["colour"]
    assert ExternalAlert.objects.count() == 0
