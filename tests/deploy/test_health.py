"""/healthz and /readyz: open, cheap, JSON with a result per check, 200 or 503, bounded
whatever a dependency does (a live gunicorn against hung ones: test_readyz_live.py); beat's
own healthcheck; and the request id that LOG_FORMAT=json puts on every log line."""

import json
import logging
import os
import threading
import time
from datetime import timedelta

import pytest
import time_machine
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.module_loading import import_string

from common import health
from common.models import Heartbeat
from common.request_id import RequestIdFilter
from common.tasks import beat_heartbeat
from config.beat_scheduler import mark_alive
from tests.conftest import celery_broker
from tests.deploy.neighbours import free_port, silent_listener
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


def test_a_fresh_stack_is_ready_once_its_own_dependencies_answer(client, now):
    """Beat has never beaten and nothing is ingested: web still serves, so it is ready."""
    with CaptureQueriesContext(connection) as queries:
        status, body = _ready(client)
    assert (status, body) == (
        200,
        {
            "status": "ok",
            "checks": {"database": {"ok": True}, "cache": {"ok": True}, "broker": {"ok": True}},
        },
    )
    assert len(queries) == 0  # the database check uses a connection of its own


def test_a_stopped_beat_or_an_ingest_backlog_does_not_take_web_out(client, now):
    Heartbeat.objects.create(name=Heartbeat.BEAT, at=now - timedelta(hours=3))
    lease = make_lease()
    make_run(lease, slot=now - timedelta(hours=2), finished=now - timedelta(hours=1))
    assert _ready(client)[0] == 200


def test_a_failing_check_says_only_that_it_failed(client, monkeypatch, now, caplog):
    def broken() -> dict:
        raise ConnectionError("redis://:hunter2@redis:6379/0 refused")

    monkeypatch.setitem(health.CHECKS, "broker", broken)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"] == {"ok": False}
    assert response.json()["failed"] == ["broker"]
    assert b"hunter2" not in response.content
    assert "readiness check broker failed" in caplog.text  # the operator still learns why


def test_a_broker_that_does_not_answer_fails_quickly(settings, now):
    settings.READYZ_TIMEOUT_S = 1.0
    with celery_broker(f"redis://127.0.0.1:{free_port()}/0"):  # nothing listens there
        ready, checks = health.readiness(["broker"])
    assert (ready, checks) == (False, {"broker": {"ok": False}})


def _redis_cache(port: int) -> dict:
    return {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{port}/0",
            "OPTIONS": {"socket_connect_timeout": 1.0, "socket_timeout": 1.0},
        }
    }


def test_a_stopped_cache_is_not_ready(client, settings, now):
    """The API's rate limits live in the cache: with it down, /readyz must not say 200."""
    settings.CACHES = _redis_cache(free_port())
    started = time.monotonic()
    status, body = _ready(client)
    assert time.monotonic() - started < 2
    assert status == 503
    assert body["checks"] == {
        "database": {"ok": True},
        "cache": {"ok": False},
        "broker": {"ok": True},
    }
    assert body["failed"] == ["cache"]


def test_a_cache_that_accepts_and_never_answers_is_cut_off_by_the_deadline(client, settings, now):
    settings.READYZ_TIMEOUT_S = 0.5
    with silent_listener() as port:
        settings.CACHES = _redis_cache(port)
        settings.CACHES["default"]["OPTIONS"] = {}  # not even the cache's own timeouts
        started = time.monotonic()
        status, body = _ready(client)
        first = time.monotonic() - started
        # The first check still hangs: the next probe does not start another one.
        status_again, body_again = _ready(client)
        second = time.monotonic() - started - first
    assert first < 1.0 and second < 1.0
    assert status == status_again == 503
    assert (
        body["checks"]["cache"]
        == body_again["checks"]["cache"]
        == {
            "ok": False,
            "timed_out": True,
        }
    )
    assert [t.name for t in threading.enumerate()].count("readyz-cache") <= 1
    # The hanging check ends once the listener has closed its connections: the next test's
    # /readyz must not find it still running (it would fail its cache check at once).
    deadline = time.monotonic() + 15
    while "readyz-cache" in [t.name for t in threading.enumerate()]:
        assert time.monotonic() < deadline, "the hanging cache check never ended"
        time.sleep(0.05)


def test_the_probes_answer_any_host_over_plain_http(client, settings, now):
    """A healthcheck inside the container asks 127.0.0.1:8000 over HTTP, whatever
    ALLOWED_HOSTS and the HTTPS redirect say; every other page still obeys both."""
    settings.ALLOWED_HOSTS = ["gpulease.example.cn"]
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz", HTTP_HOST="127.0.0.1:8000").status_code == 200
    assert client.get("/readyz", HTTP_HOST="127.0.0.1:8000").status_code == 200
    assert client.get("/accounts/login/", HTTP_HOST="127.0.0.1:8000").status_code == 400
    page = client.get("/accounts/login/", HTTP_HOST="gpulease.example.cn")
    assert page.status_code == 301


def test_the_probes_answer_only_reads(client):
    assert client.post("/healthz").status_code == 405
    assert client.post("/readyz").status_code == 405
    assert client.head("/healthz").status_code == 200


def test_beat_s_healthcheck_reads_the_file_its_scheduler_touches(settings, tmp_path, capsys):
    """No database, no worker: only whether this beat ticks."""
    from django.core.management import CommandError, call_command

    settings.BEAT_LIVENESS_FILE = tmp_path / "beat-alive"
    with pytest.raises(CommandError):
        call_command("readiness", "--check", "beat")
    out = json.loads(capsys.readouterr().out)
    assert out["checks"]["beat"] == {"ok": False, "age_s": None, "max_age_s": 60}

    mark_alive()
    with CaptureQueriesContext(connection) as queries:
        call_command("readiness", "--check", "beat")
    assert json.loads(capsys.readouterr().out)["checks"]["beat"]["ok"] is True
    assert len(queries) == 0

    stale = time.time() - 61
    os.utime(settings.BEAT_LIVENESS_FILE, (stale, stale))
    with pytest.raises(CommandError):
        call_command("readiness", "--check", "beat")
    assert json.loads(capsys.readouterr().out)["checks"]["beat"] == {
        "ok": False,
        "age_s": 61,
        "max_age_s": 60,
    }


def test_the_readiness_command_runs_web_s_checks_by_default(capsys, now):
    from django.core.management import call_command

    call_command("readiness")
    assert set(json.loads(capsys.readouterr().out)["checks"]) == {"database", "cache", "broker"}


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
