"""``/metrics`` answered ahead of Django's own middleware, as ``/healthz`` is
(config.health.ProbeMiddleware): Prometheus scrapes ``http://web:8000/metrics`` inside the
provider's network, by a host name ALLOWED_HOSTS need not list and without TLS, so the host
check and the HTTPS redirect do not apply to it. The view itself decides who may scrape
(METRICS_TOKEN, METRICS_ALLOWED_NETWORKS) and builds no URL from the Host header."""

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from prometheus_client import Counter, Histogram

from monitoring import worker_metrics
from monitoring.views import metrics_view

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


class RequestMetricsMiddleware:
    """Counts and times every request under its URL name (``api:lease-list``,
    ``portal:lease``), so the label set stays as small as the URLconf: a path outside it is
    ``unmatched`` and a method outside HTTP's usual ones ``other``. First in MIDDLEWARE, so
    it also times the probes, /metrics and every refusal. Under gunicorn with
    PROMETHEUS_MULTIPROC_DIR set, each worker writes its counts there, with its process
    figures (monitoring.worker_metrics), and /metrics adds them up."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None:
            view = match.view_name
        else:  # answered ahead of URL resolution (config.health, MetricsMiddleware), or a 404
            view = UNRESOLVED_NAMES.get(request.path_info, "unmatched")
        method = request.method if request.method in METHODS else "other"
        REQUESTS.labels(view=view, method=method, status=str(response.status_code)).inc()
        LATENCY.labels(view=view).observe(time.perf_counter() - started)
        worker_metrics.write()
        return response


class MetricsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == "/metrics":
            return metrics_view(request)
        return self.get_response(request)
