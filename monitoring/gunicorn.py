"""gunicorn hooks for prometheus_client's multiprocess mode:
``PROMETHEUS_MULTIPROC_DIR=/tmp/gpulease-metrics gunicorn -c python:monitoring.gunicorn ...``.

Each worker process writes its counters to files in that directory and /metrics merges them
(monitoring.metrics.registry), so a scrape does not depend on which worker answers. The
directory is emptied when the master starts (stale files would add old processes' figures);
a worker writes its last process figures as it exits (monitoring.worker_metrics), and the
master then drops its live gauges."""

import os
import shutil
from typing import Any


def on_starting(server: Any) -> None:
    path = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if path:
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path, exist_ok=True)


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def worker_exit(server: Any, worker: Any) -> None:
    """In the worker, as it exits: the CPU it spent since it last wrote is counted too."""
    from monitoring import worker_metrics

    worker_metrics.write(force=True)
