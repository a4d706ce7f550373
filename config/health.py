"""Liveness and readiness, for docker-compose healthchecks and load balancers.

``/healthz`` answers as long as the process serves requests: no database, no broker, so a
database outage never gets a healthy web process restarted. ``/readyz`` says whether the
stack can do its work: the database answers, the broker accepts a connection, beat's
heartbeat (``common.beat_heartbeat``, written by a worker every minute) is recent, and the
ingest of finished probe runs is not behind by more than a bound. Each answers JSON with a
result per check, 200 when all pass and 503 otherwise, in a fixed number of queries.

Both are open to anyone (no authentication), so they say only ok or not and a few ages in
seconds: never an error text, which could hold a broker URL with its password; the error
goes to the log. ``ProbeMiddleware``, ahead of Django's own, answers them before the host
check and the HTTPS redirect, so a healthcheck inside the container (``127.0.0.1:8000``,
plain HTTP) works whatever ``ALLOWED_HOSTS`` says."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_safe

log = logging.getLogger(__name__)


def check_database() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return {"ok": True}


def check_broker() -> dict[str, Any]:
    from config.celery import app

    timeout = settings.READYZ_BROKER_TIMEOUT_S
    # Redis reads its timeouts from the transport options; other transports ignore them.
    limits = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
    with app.connection_for_write(connect_timeout=timeout, transport_options=limits) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, interval_step=0, timeout=timeout)
    return {"ok": True}


def check_beat() -> dict[str, Any]:
    from common.models import Heartbeat

    bound = settings.READYZ_BEAT_MAX_AGE_S
    at = Heartbeat.objects.filter(name=Heartbeat.BEAT).values_list("at", flat=True).first()
    if at is None:
        return {"ok": False, "age_s": None, "max_age_s": bound}
    age = max(0, round((timezone.now() - at).total_seconds()))
    return {"ok": age <= bound, "age_s": age, "max_age_s": bound}


def check_ingest() -> dict[str, Any]:
    from billing.ingest import pending_since

    bound = settings.READYZ_INGEST_MAX_LAG_S
    oldest = pending_since()
    lag = 0 if oldest is None else max(0, round((timezone.now() - oldest).total_seconds()))
    return {"ok": lag <= bound, "lag_s": lag, "max_lag_s": bound}


CHECKS: dict[str, Callable[[], dict[str, Any]]] = {
    "database": check_database,
    "broker": check_broker,
    "beat": check_beat,
    "ingest": check_ingest,
}


def readiness(names: list[str] | None = None) -> tuple[bool, dict[str, dict[str, Any]]]:
    """Run the named checks (all by default); a check that raises is a failed check."""
    results: dict[str, dict[str, Any]] = {}
    for name in names or list(CHECKS):
        try:
            results[name] = CHECKS[name]()
        except Exception:
            log.exception("readiness check %s failed", name)
            results[name] = {"ok": False}
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
    body = {"status": "ok" if ready else "unavailable", "checks": checks}
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
