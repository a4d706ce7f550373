"""/healthz and /readyz: open, cheap, JSON with a result per check, 200 or 503; and the
request id that LOG_FORMAT=json puts on every log line."""

import json
import logging
from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.module_loading import import_string

from billing.ingest import ingest_all
from common.models import Heartbeat
from common.request_id import RequestIdFilter
from common.tasks import beat_heartbeat
from config import health
from tests.factories import at, make_lease, make_run

pytestmark = pytest.mark.django_db

NOW = at("2026-11-20 12:00")


@pytest.fixture
def now():
    with time_machine.travel(NOW, tick=False):
        yield NOW


def _ready(client):  # type: ignore[no-untyped-def]
    response = client.get("/readyz")
    return response.status_code, response.json()


def test_healthz_answers_without_touching_the_database(client):
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert response["Cache-Control"] == "no-store"
    assert len(queries) == 0


def test_a_fresh_stack_is_not_ready_until_beat_has_beaten(client, now):
    status, body = _ready(client)
    assert status == 503
    assert body == {
        "status": "unavailable",
        "checks": {
            "database": {"ok": True},
            "broker": {"ok": True},
            "beat": {"ok": False, "age_s": None, "max_age_s": 180},
            "ingest": {"ok": True, "lag_s": 0, "max_lag_s": 600},
        },
    }
    beat_heartbeat()
    status, body = _ready(client)
    assert (status, body["status"]) == (200, "ok")
    assert body["checks"]["beat"] == {"ok": True, "age_s": 0, "max_age_s": 180}


def test_a_stale_heartbeat_is_not_ready(client, now):
    Heartbeat.objects.create(name=Heartbeat.BEAT, at=now - timedelta(seconds=181))
    status, body = _ready(client)
    assert status == 503
    assert body["checks"]["beat"] == {"ok": False, "age_s": 181, "max_age_s": 180}


def test_ingest_lag_is_the_age_of_the_oldest_run_not_yet_ingested(client, now):
    beat_heartbeat()
    lease = make_lease()
    make_run(lease, slot=now - timedelta(minutes=30), finished=now - timedelta(minutes=11))
    make_run(lease, slot=now - timedelta(minutes=30), target="n2>n1", finished=now)
    status, body = _ready(client)
    assert status == 503
    assert body["checks"]["ingest"] == {"ok": False, "lag_s": 660, "max_lag_s": 600}
    ingest_all(notify=False)
    assert _ready(client)[1]["checks"]["ingest"] == {"ok": True, "lag_s": 0, "max_lag_s": 600}
    make_run(lease, slot=now - timedelta(minutes=5), target="n3>n1", finished=now)
    status, body = _ready(client)
    assert (status, body["checks"]["ingest"]["lag_s"]) == (200, 0)  # just finished


def test_readyz_runs_a_fixed_number_of_queries(client, now):
    beat_heartbeat()
    with CaptureQueriesContext(connection) as few:
        client.get("/readyz")
    lease = make_lease()
    for minute in range(20):
        make_run(lease, slot=now - timedelta(hours=2), target=f"n{minute}>n0", finished=now)
    ingest_all(notify=False)
    for minute in range(20):
        make_run(lease, slot=now - timedelta(hours=1), target=f"n{minute}>n0", finished=now)
    with CaptureQueriesContext(connection) as many:
        client.get("/readyz")
    assert len(few) == len(many) == 3  # SELECT 1, heartbeat, oldest pending run


def test_a_failing_check_says_only_that_it_failed(client, monkeypatch, now, caplog):
    def broken() -> dict:
        raise ConnectionError("redis://:hunter2@redis:6379/0 refused")

    monkeypatch.setitem(health.CHECKS, "broker", broken)
    beat_heartbeat()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"] == {"ok": False}
    assert b"hunter2" not in response.content
    assert "readiness check broker failed" in caplog.text  # the operator still learns why


def test_a_broker_that_does_not_answer_fails_quickly(settings, now):
    from config.celery import app

    settings.READYZ_BROKER_TIMEOUT_S = 1.0
    original = app.conf.broker_url
    app.conf.broker_url = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    try:
        ready, checks = health.readiness(["broker"])
    finally:
        app.conf.broker_url = original
    assert (ready, checks) == (False, {"broker": {"ok": False}})


def test_the_probes_answer_any_host_over_plain_http(client, settings, now):
    """A healthcheck inside the container asks 127.0.0.1:8000 over HTTP, whatever
    ALLOWED_HOSTS and the HTTPS redirect say; every other page still obeys both."""
    settings.ALLOWED_HOSTS = ["gpulease.example.cn"]
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code == 200
    assert client.get("/readyz", HTTP_HOST="127.0.0.1:8000").status_code == 503
    assert client.get("/accounts/login/", HTTP_HOST="127.0.0.1:8000").status_code == 400
    page = client.get("/accounts/login/", HTTP_HOST="gpulease.example.cn")
    assert page.status_code == 301


def test_the_probes_answer_only_reads(client):
    assert client.post("/healthz").status_code == 405
    assert client.post("/readyz").status_code == 405
    assert client.head("/healthz").status_code == 200


def test_readiness_command_prints_the_checks_and_fails_when_not_ready(now, capsys):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError):
        call_command("readiness", "--check", "beat")
    assert json.loads(capsys.readouterr().out)["checks"]["beat"]["ok"] is False
    beat_heartbeat()
    call_command("readiness", "--check", "beat", "--check", "database")
    assert json.loads(capsys.readouterr().out)["status"] == "ok"


# --- request id and JSON logs -------------------------------------------------------------


def test_every_response_carries_a_fresh_request_id(client):
    first = client.get("/accounts/login/")["X-Request-ID"]
    second = client.get("/healthz")["X-Request-ID"]
    assert len(first) == len(second) == 32 and first != second
    # A client's own id is not believed unless REQUEST_ID_HEADER names a trusted proxy's.
    assert client.get("/healthz", HTTP_X_REQUEST_ID="mine")["X-Request-ID"] != "mine"


def test_a_trusted_proxy_id_is_taken_when_it_is_a_short_token(client, settings):
    settings.REQUEST_ID_HEADER = "X-Request-ID"
    assert client.get("/healthz", HTTP_X_REQUEST_ID="lb-42.a")["X-Request-ID"] == "lb-42.a"
    hostile = client.get("/healthz", HTTP_X_REQUEST_ID='x" level=ERROR\n')["X-Request-ID"]
    assert len(hostile) == 32 and "\n" not in hostile


def _json_line(record: logging.LogRecord) -> dict:
    spec = dict(settings.LOGGING["formatters"]["json"])
    formatter = import_string(spec.pop("()"))(**spec)
    RequestIdFilter().filter(record)
    return json.loads(formatter.format(record))


def test_json_log_lines_carry_the_request_id(client, caplog):
    caplog.set_level(logging.WARNING, logger="django.request")
    response = client.get("/accounts/no-such-page/")
    assert response.status_code == 404
    record = next(r for r in caplog.records if r.name == "django.request")
    line = _json_line(record)
    assert line["request_id"] == response["X-Request-ID"]
    assert line["level"] == "WARNING" and line["logger"] == "django.request"
    assert "/accounts/no-such-page/" in line["message"]
    assert "time" in line


def test_json_log_lines_outside_a_request_say_so():
    record = logging.LogRecord("billing.ingest", logging.INFO, __file__, 1, "ingested", (), None)
    assert _json_line(record)["request_id"] == "-"


def test_heartbeat_is_one_row_rewritten(now):
    beat_heartbeat()
    with time_machine.travel(now + timedelta(minutes=1), tick=False):
        beat_heartbeat()
    assert list(Heartbeat.objects.values_list("name", "at")) == [
        ("beat", now + timedelta(minutes=1))
    ]
    assert timezone.is_aware(Heartbeat.objects.get().at)
