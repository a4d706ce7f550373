"""Liveness and readiness, for docker-compose healthchecks and load balancers.

``/healthz`` answers as long as the process serves requests: no database, no broker, so a
database outage never gets a healthy web process restarted. ``/readyz`` says whether this
web process can do its work: the database answers on a new connection, the cache takes a
write and reads it back, and the broker accepts a connection. A load balancer asks
``/readyz``. Each check runs in a thread of its own, all side by side, and is given
READYZ_TIMEOUT_S: one that has not answered by then has failed (``timed_out``), so
``/readyz`` answers within that bound whatever hangs (a database that accepts TCP and never
answers, a cache port that drops packets). A check still hanging from an earlier probe is
not started again, so probes of a dead dependency never pile up threads.

Beat, workers and the ingest are not web's dependencies and are not here: a stopped beat
must not take every web instance out of the load balancer. Beat's own healthcheck is
``manage.py readiness --check beat`` (config.beat_scheduler), and alerts watch the rest.

Both are open to anyone (no authentication), so they say only ok or not and a few ages in
seconds: never an error text, which could hold a broker URL with its password; the error
goes to the log. ``ProbeMiddleware``, ahead of Django's own, answers them before the host
check and the HTTPS redirect, so a healthcheck inside the container (``127.0.0.1:8000``,
plain HTTP) works whatever ``ALLOWED_HOSTS`` says."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.db import connections
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_safe

log = logging.getLogger(__name__)

Result = dict[str, Any]


def check_database() -> Result:
    """A connection of its own (the request's may be held, or belong to another thread),
    with the app's connect and statement timeouts, closed at once."""
    wrapper = connections.create_connection("default")
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        wrapper.close()
    return {"ok": True}


def check_cache() -> Result:
    """The rate-limit counters live here: a write read back proves the cache works as the
    API uses it (a per-process cache always does)."""
    cache = caches["default"]
    token = secrets.token_hex(8)
    cache.set("gpulease:readyz", token, timeout=10)
    return {"ok": cache.get("gpulease:readyz") == token}


def check_broker() -> Result:
    from celery import current_app as app  # gpulease's (config.celery), made current there

    timeout = settings.READYZ_TIMEOUT_S
    # Redis reads its timeouts from the transport options; other transports ignore them.
    limits = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
    with app.connection_for_write(connect_timeout=timeout, transport_options=limits) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
    return {"ok": True}


def check_beat() -> Result:
    """Beat's own liveness, for beat's healthcheck: the age of the file its scheduler
    touches at every tick (config.beat_scheduler). Not part of /readyz."""
    bound = settings.BEAT_LIVENESS_MAX_AGE_S
    try:
        touched = settings.BEAT_LIVENESS_FILE.stat().st_mtime
    except FileNotFoundError:
        return {"ok": False, "age_s": None, "max_age_s": bound}
    age = max(0, round(time.time() - touched))
    return {"ok": age <= bound, "age_s": age, "max_age_s": bound}


# What a web process needs: /readyz runs these.
WEB_CHECKS: dict[str, Callable[[], Result]] = {
    "database": check_database,
    "cache": check_cache,
    "broker": check_broker,
}
# Every check, for `manage.py readiness --check NAME`.
CHECKS: dict[str, Callable[[], Result]] = {**WEB_CHECKS, "beat": check_beat}

_running: dict[str, threading.Thread] = {}
_running_lock = threading.Lock()


def _run(name: str, check: Callable[[], Result], into: dict[str, Result]) -> None:
    try:
        into[name] = check()
    except Exception:
        log.exception("readiness check %s failed", name)
        into[name] = {"ok": False}
    finally:
        connections.close_all()  # this thread's own, if a check opened any


def readiness(names: list[str] | None = None) -> tuple[bool, dict[str, Result]]:
    """Run the named checks (the web's by default) side by side, each bounded by
    READYZ_TIMEOUT_S; a check that raises or has not answered in time has failed."""
    names = names or list(WEB_CHECKS)
    finished: dict[str, Result] = {}
    started: dict[str, threading.Thread] = {}
    with _running_lock:
        for name in names:
            earlier = _running.get(name)
            if earlier is not None and earlier.is_alive():
                continue  # still hanging since an earlier probe: failed, not started again
            thread = threading.Thread(
                target=_run, args=(name, CHECKS[name], finished), name=f"readyz-{name}"
            )
            thread.daemon = True
            _running[name] = started[name] = thread
    for thread in started.values():
        thread.start()
    deadline = time.monotonic() + settings.READYZ_TIMEOUT_S
    for thread in started.values():
        thread.join(max(0.0, deadline - time.monotonic()))
    results: dict[str, Result] = {}
    for name in names:
        result = finished.get(name)
        if result is None:
            log.error(
                "readiness check %s did not answer within %ss", name, settings.READYZ_TIMEOUT_S
            )
            result = {"ok": False, "timed_out": True}
        results[name] = result
    return all(result["ok"] for result in results.values()), results


def _no_store(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    return response


@require_safe
def healthz(request: HttpRequest) -> HttpResponse:
    return _no_store(JsonResponse({"status": "ok"}))


@require_safe
def readyz(request: HttpRequest) -> HttpResponse:
    ready, checks = readiness()
    body: dict[str, Any] = {"status": "ok" if ready else "unavailable", "checks": checks}
    if not ready:
        body["failed"] = [name for name, result in checks.items() if not result["ok"]]
    return _no_store(JsonResponse(body, status=200 if ready else 503))


PROBES = {"/healthz": healthz, "/readyz": readyz}


class ProbeMiddleware:
    """Answers the probes first: no host check, no HTTPS redirect, no session."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        probe = PROBES.get(request.path_info)
        if probe is not None:
            return probe(request)
        return self.get_response(request)
