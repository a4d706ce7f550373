"""gunicorn's configuration module (``gunicorn -c python:monitoring.gunicorn``, as the
Dockerfile's CMD and deploy/systemd/gpulease-web.service start it).

- **Logs.** gunicorn's own lines go through common.logs (LOG_FORMAT, LOG_LEVEL), like
  every other line of web, worker and beat, and each request writes one access line
  (AccessLogger) with what Django's middleware left in the WSGI environ
  (monitoring.middleware): request id, method, path (secrets redacted), route name,
  status, latency in ms, bytes, user and tenant ids, client address.
- **Metrics.** prometheus_client's multiprocess mode: each worker process writes its
  counters to files in PROMETHEUS_MULTIPROC_DIR and /metrics merges them
  (monitoring.metrics.registry), so a scrape does not depend on which worker answers. The
  directory is emptied when the master starts (stale files would add old processes'
  figures); a worker writes its last process figures as it exits
  (monitoring.worker_metrics), and the master then drops its live gauges."""

import os
import shutil
from typing import Any

from gunicorn import glogging

from common.logs import ACCESS_ENVIRON_KEY, environment_config

logconfig_dict = environment_config()


class AccessLogger(glogging.Logger):
    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any) -> None:
        if not self.access_log_enabled:
            return
        app = environ.get(ACCESS_ENVIRON_KEY) or {}
        headers = {name.lower(): value for name, value in resp.headers}
        status = int(str(resp.status).split(None, 1)[0])
        method = environ.get("REQUEST_METHOD", "-")
        path = environ.get("RAW_URI") or environ.get("PATH_INFO", "-")
        self.access_log.info(
            "%s %s %s",
            method,
            path,
            status,
            extra={
                "request_id": app.get("request_id") or headers.get("x-request-id", "-"),
                "method": method,
                "path": path,
                "route": app.get("route", "-"),
                "status": status,
                "latency_ms": round(request_time.total_seconds() * 1000, 1),
                "bytes": getattr(resp, "sent", None),
                "user_id": app.get("user_id"),
                "tenant_ids": app.get("tenant_ids", []),
                "client": app.get("client") or environ.get("REMOTE_ADDR", "-"),
                "user_agent": environ.get("HTTP_USER_AGENT", "-"),
            },
        )


logger_class = AccessLogger


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
