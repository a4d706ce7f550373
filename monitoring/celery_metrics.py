"""What Celery's workers tell Prometheus: task outcomes and run time, and (with
CELERY_METRICS_PORT set) the worker's own process metrics on a port of its own, which the
compose stack's Prometheus scrapes as the job ``gpulease-celery``.

Under gunicorn with PROMETHEUS_MULTIPROC_DIR set, a worker on the same host that shares the
directory has its task counters merged into the web's /metrics as well."""

import logging
import os
import time
from typing import Any

from prometheus_client import Counter, Histogram

log = logging.getLogger(__name__)

TASKS = Counter(
    "gpulease_celery_tasks",
    "Celery tasks that ended, by task name and outcome",
    ["task", "outcome"],
)
DURATION = Histogram(
    "gpulease_celery_task_duration_seconds",
    "Run time of Celery tasks that ended",
    ["task"],
    buckets=(0.1, 0.5, 1, 5, 15, 60, 300, 900, float("inf")),
)
_started: dict[str, float] = {}


def _name(sender: Any, task: Any = None) -> str:
    task = task or sender
    return str(getattr(task, "name", None) or task or "unknown")


def _prerun(sender: Any = None, task_id: str | None = None, **_: Any) -> None:
    if task_id:
        _started[task_id] = time.monotonic()


def _postrun(
    sender: Any = None, task_id: str | None = None, task: Any = None, state: Any = None, **_: Any
) -> None:
    name = _name(sender, task)
    TASKS.labels(task=name, outcome=str(state or "unknown").lower()).inc()
    started = _started.pop(task_id or "", None)
    if started is not None:
        DURATION.labels(task=name).observe(time.monotonic() - started)


def _worker_ready(**_: Any) -> None:
    port = os.environ.get("CELERY_METRICS_PORT")
    if not port:
        return
    from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

    registry = REGISTRY
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Prefork: tasks run in child processes, which write their counters to the
        # directory; the main process serves them merged.
        from prometheus_client import ProcessCollector, multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        ProcessCollector(registry=registry)
    address = os.environ.get("CELERY_METRICS_ADDRESS", "0.0.0.0")  # a container's port
    start_http_server(int(port), addr=address, registry=registry)
    log.info("celery metrics on %s:%s", address, port)


def connect() -> None:
    from celery.signals import task_postrun, task_prerun, worker_ready

    task_prerun.connect(_prerun, weak=False, dispatch_uid="monitoring-prerun")
    task_postrun.connect(_postrun, weak=False, dispatch_uid="monitoring-postrun")
    worker_ready.connect(_worker_ready, weak=False, dispatch_uid="monitoring-worker-ready")
