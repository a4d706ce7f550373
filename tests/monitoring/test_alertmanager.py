"""Alertmanager's webhook (payload version 4): alerts on a node or switch attach to the
leases holding those nodes as incidents (or evidence only), once per fingerprint, and
close on ``status: resolved``."""

import json
import threading
import urllib.error
import urllib.request
from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from incidents.choices import IncidentState
from incidents.models import Incident
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
NAIVE = (
    "Give the instant with its UTC offset (2026-11-10T08:00:00+08:00, or Z for UTC): "
    "without one it is ambiguous."
)
TOKEN = "am-token"


@pytest.fixture(autouse=True)
def _token(settings):
    settings.ALERTMANAGER_TOKEN = TOKEN


@pytest.fixture
def notified(monkeypatch):
    sent = []
    monkeypatch.setattr(
        "incidents.tasks.notify_incident.delay", lambda pk, event: sent.append((pk, event))
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
    # Alertmanager sends no Accept-Language: its errors come in the default language.
    client = APIClient(REMOTE_ADDR="10.0.0.9", HTTP_ACCEPT_LANGUAGE="en")
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
    assert (incident.source, incident.opened_by) == ("alertmanager", "alertmanager")
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
    assert (incident.closed_source, incident.closed_by) == ("alertmanager", "alertmanager")
    assert post(payload(alert(node="n2", status="resolved"))).json()["unchanged"] == 1
    assert notified == [(incident.pk, "opened"), (incident.pk, "closed")]  # each once
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


# --- occurrences: (fingerprint, startsAt) -------------------------------------------------


def occurrence(starts_at, ends_at=None, status="firing", fingerprint="a1b2c3d4e5f60718"):
    """The NodeInfinibandLinkDown alert on n2 as Alertmanager sends it: the fingerprint is
    a hash of the labels, so every outage of the node's port carries the same one."""
    return {
        **alert(fingerprint, status=status, node="n2"),
        "startsAt": starts_at,
        "endsAt": ends_at or "0001-01-01T00:00:00Z",
    }


def test_a_recurrence_after_resolution_opens_a_new_incident(
    fabric, notified, django_capture_on_commit_callbacks
):
    deliveries = [
        (occurrence("2026-11-10T08:00:00Z"), "firing"),
        (occurrence("2026-11-10T08:00:00Z", "2026-11-10T09:00:00Z", "resolved"), "resolved"),
        # The port goes down again: Alertmanager keeps the fingerprint, with a new startsAt.
        (occurrence("2026-11-10T10:00:00Z"), "firing"),
        (occurrence("2026-11-10T10:00:00Z"), "firing"),  # repeat_interval: a repeat
        (occurrence("2026-11-10T10:00:00Z", "2026-11-10T10:30:00Z", "resolved"), "resolved"),
    ]
    answers = []
    for body, status in deliveries:
        with django_capture_on_commit_callbacks(execute=True):
            response = post(payload(body, status=status))
        assert response.status_code == 200, response.content
        answers.append(response.json())
    assert [(a["created"], a["resolved"], a["unchanged"]) for a in answers] == [
        (1, 0, 0),
        (0, 1, 0),
        (1, 0, 0),
        (0, 0, 1),
        (0, 1, 0),
    ]
    first, second = Incident.objects.order_by("opened_at")
    assert (first.opened_at, first.closed_at) == (
        datetime(2026, 11, 10, 8, tzinfo=UTC),
        datetime(2026, 11, 10, 9, tzinfo=UTC),
    )
    assert (second.opened_at, second.closed_at) == (
        datetime(2026, 11, 10, 10, tzinfo=UTC),
        datetime(2026, 11, 10, 10, 30, tzinfo=UTC),
    )
    assert answers[2]["incidents_opened"] == [second.pk]
    assert ExternalAlert.objects.filter(fingerprint="a1b2c3d4e5f60718").count() == 2
    assert notified == [
        (first.pk, "opened"),
        (first.pk, "closed"),
        (second.pk, "opened"),
        (second.pk, "closed"),
    ]


def test_a_recurrence_whose_resolution_never_came_ends_the_earlier_occurrence(fabric):
    """Alertmanager holds one alert per fingerprint: a new startsAt means the earlier one
    ended by then, even when its resolved notification was lost (send_resolved off, or a
    delivery that gave up)."""
    post(payload(occurrence("2026-11-10T08:00:00Z")))
    answer = post(payload(occurrence("2026-11-10T10:00:00Z"))).json()
    assert answer["created"] == 1
    first, second = Incident.objects.order_by("opened_at")
    assert first.state == IncidentState.CLOSED
    assert first.closed_at == datetime(2026, 11, 10, 10, tzinfo=UTC)
    assert second.state == IncidentState.OPEN
    assert answer["incidents_opened"] == [second.pk]
    assert answer["incidents_closed"] == [first.pk]
    earlier = ExternalAlert.objects.get(starts_at=datetime(2026, 11, 10, 8, tzinfo=UTC))
    assert earlier.status == ExternalAlert.Status.RESOLVED
    assert earlier.ends_at == datetime(2026, 11, 10, 10, tzinfo=UTC)
    # A late retry of the first occurrence's firing notification changes nothing.
    assert post(payload(occurrence("2026-11-10T08:00:00Z"))).json()["unchanged"] == 1
    assert Incident.objects.filter(state=IncidentState.OPEN).get() == second


def test_a_late_first_delivery_of_an_older_occurrence_is_recorded_as_ended(fabric):
    """An older occurrence first seen after a newer one (a delivery retried late) happened
    and ended by the newer one's start: recorded, and its incident closed at once."""
    post(payload(occurrence("2026-11-10T10:00:00Z")))
    answer = post(payload(occurrence("2026-11-10T08:00:00Z"))).json()
    assert answer["created"] == 1
    older = ExternalAlert.objects.get(starts_at=datetime(2026, 11, 10, 8, tzinfo=UTC))
    assert older.status == ExternalAlert.Status.RESOLVED
    assert older.ends_at == datetime(2026, 11, 10, 10, tzinfo=UTC)
    # The open incident (10:00, the newer occurrence) already covers the target.
    (incident,) = Incident.objects.all()
    assert incident.state == IncidentState.OPEN
    assert incident.opened_at == datetime(2026, 11, 10, 10, tzinfo=UTC)


@pytest.mark.parametrize(
    ("field", "change"),
    [
        ("startsAt", {"startsAt": "2026-11-10T08:00:00"}),
        ("endsAt", {"status": "resolved", "endsAt": "2026-11-10T09:00:00"}),
    ],
)
def test_a_naive_instant_is_refused_naming_the_field(fabric, field, change):
    """Without an offset, 08:00 would be read in the server's zone (Asia/Shanghai): an
    incident back-dated by eight hours."""
    response = post(payload({**alert(node="n1"), **change}))
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["fields"] == {"alerts": {"0": {field: [NAIVE]}}}
    assert error["message"] == f"alerts: {NAIVE}"
    assert ExternalAlert.objects.count() == Incident.objects.count() == 0


# --- concurrent deliveries ----------------------------------------------------------------


def deliver_at_once(url: str, bodies: list[dict]) -> list[int]:
    """POST every body at the same instant from its own thread (Alertmanager's HA peers
    each deliver, and a retry can overlap the first try); the status codes."""
    gate = threading.Barrier(len(bodies))
    statuses: list[int] = [0] * len(bodies)

    def send(index: int) -> None:
        request = urllib.request.Request(
            f"{url}{URL}",
            data=json.dumps(bodies[index]).encode(),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
        )
        gate.wait()
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                statuses[index] = response.status
        except urllib.error.HTTPError as error:
            statuses[index] = error.code

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


@pytest.mark.django_db(transaction=True)
def test_simultaneous_deliveries_are_idempotent(fabric, notified, live_server, settings):
    """Eight deliveries of one new alert at once against a live server (each request its
    own thread and PostgreSQL connection): every one answered 200, one alert, one
    incident, one notification; then eight of its resolution at once close it once."""
    settings.DEBUG = False
    rounds = [f"{n:016x}" for n in range(1, 4)]  # three alerts, raced one after another
    for fingerprint in rounds:
        body = payload(alert(fingerprint, node="n1", device=fingerprint))
        assert deliver_at_once(live_server.url, [body] * 8) == [200] * 8
    assert ExternalAlert.objects.count() == 3
    (incident,) = Incident.objects.all()  # one target (the alert's name on n1): shared
    assert incident.external_alerts.count() == 3
    assert notified == [(incident.pk, "opened")]
    for fingerprint in rounds:
        body = payload(alert(fingerprint, node="n1", device=fingerprint, status="resolved"))
        assert deliver_at_once(live_server.url, [body] * 8) == [200] * 8
    incident.refresh_from_db()
    assert incident.state == IncidentState.CLOSED
    assert notified == [(incident.pk, "opened"), (incident.pk, "closed")]
