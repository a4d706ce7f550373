"""``/metrics`` answered ahead of Django's own middleware, as ``/healthz`` is
(common.health.ProbeMiddleware): Prometheus scrapes ``http://web:8000/metrics`` inside the
provider's network, by a host name ALLOWED_HOSTS need not list and without TLS, so the host
check and the HTTPS redirect do not apply to it. The view itself decides who may scrape
(METRICS_TOKEN, METRICS_ALLOWED_NETWORKS) and builds no URL from the Host header."""

import logging
import time
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from prometheus_client import Counter, Histogram

from accounts.selectors import tenant_ids_of
from common.client_address import client_address
from common.logs import ACCESS_ENVIRON_KEY
from common.querysets import acting_tenant_id
from monitoring import worker_metrics
from monitoring.views import metrics_view

logger = logging.getLogger(__name__)

REQUESTS = Counter(
    "gpulease_http_requests",
    "HTTP requests answered, by URL name, method and status",
    ["view", "method", "status"],
)
LATENCY = Histogram(
    "gpulease_http_request_duration_seconds",
    "Time to answer an HTTP request, by URL name",
    ["view"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.15, 0.25, 0.5, 1, 2.5, 5, 10, float("inf")),
)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# The paths answered before URL resolution, under their URLconf names.
UNRESOLVED_NAMES = {"/metrics": "metrics", "/healthz": "health", "/readyz": "ready"}


def _who(request: HttpRequest) -> tuple[int | None, list[int]]:
    """(user id, ids of the user's tenants) of the request, as its view authenticated it
    (an API token's user too: DRF sets it on the request; a token acts for its one tenant).
    Provider staff, Alertmanager and anonymous requests belong to no tenant."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated or getattr(user, "pk", None) is None:
        return None, []
    if user.is_staff or not hasattr(user, "memberships"):  # a user of another model
        return user.pk, []
    acting = acting_tenant_id(user)
    if acting is not None:
        return user.pk, [acting]
    return user.pk, tenant_ids_of(user)


def _access_fields(request: HttpRequest, view: str) -> dict[str, Any]:
    """What gunicorn's access line (monitoring.gunicorn.AccessLogger) takes from the app."""
    fields: dict[str, Any] = {
        "route": view,
        "request_id": getattr(request, "request_id", None),
        "client": client_address(request),
    }
    try:
        fields["user_id"], fields["tenant_ids"] = _who(request)
    except Exception:  # a failed database must not turn an answer into a 500
        logger.warning("access line: the user of this request could not be read", exc_info=True)
    return fields


class RequestMetricsMiddleware:
    """Counts and times every request under its URL name (``api:lease-list``,
    ``portal:lease``), so the label set stays as small as the URLconf: a path outside it is
    ``unmatched`` and a method outside HTTP's usual ones ``other``. First in MIDDLEWARE, so
    it also times the probes, /metrics and every refusal. Under gunicorn with
    PROMETHEUS_MULTIPROC_DIR set, each worker writes its counts there, with its process
    figures (monitoring.worker_metrics), and /metrics adds them up. It also leaves the
    route name, user, tenants and client address in the WSGI environ for gunicorn's access
    line."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None:
            view = match.view_name
        else:  # answered ahead of URL resolution (common.health, MetricsMiddleware), or a 404
            view = UNRESOLVED_NAMES.get(request.path_info, "unmatched")
        method = request.method if request.method in METHODS else "other"
        REQUESTS.labels(view=view, method=method, status=str(response.status_code)).inc()
        LATENCY.labels(view=view).observe(time.perf_counter() - started)
        worker_metrics.write()
        request.META[ACCESS_ENVIRON_KEY] = _access_fields(request, view)
        return response


class MetricsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == "/metrics":
            return metrics_view(request)
        return self.get_response(request)
