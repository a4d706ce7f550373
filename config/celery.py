import logging
import logging.config
import os
from functools import partial
from typing import Any

from celery import Celery, signals
from django.conf import settings

from common.logs import environment_config, log_format

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("gpulease")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def route_task(
    name: str, args: object, kwargs: object, options: object, task: object = None, **kw: object
) -> dict[str, str] | None:
    """Celery's router (settings.CELERY_TASK_ROUTES): every ``billing.*`` task (ingest,
    drafting, checkpoints, incident and checkpoint notifications) goes to BILLING_QUEUE,
    read when the task is sent. Anything else keeps its default: probe batches name their
    site's queue themselves, dispatch, self-check and the heartbeat go to ``celery``."""
    if name.startswith("billing."):
        return {"queue": settings.BILLING_QUEUE}
    return None


if log_format() == "json":
    # Worker and beat write settings.LOGGING's JSON lines, nothing else: with a receiver of
    # setup_logging connected Celery configures no logger of its own (its task and
    # multiprocessing loggers would write plain text), and Python's warnings are log lines
    # too (the worker's "running as root", for one). The banners stay off with --quiet
    # (`celery -A config --quiet worker`, as docker-compose.yml and deploy/systemd do).

    @signals.setup_logging.connect
    def _json_logging(**kwargs: Any) -> None:
        logging.config.dictConfig(environment_config())
        logging.captureWarnings(True)

    @signals.celeryd_init.connect
    def _json_worker(**kwargs: Any) -> None:
        """The worker, before its root-privileges warning and before it installs its signal
        handlers. On SIGTERM (and SIGQUIT) Celery writes "worker: Warm shutdown
        (MainProcess)" straight to stdout: the handlers it is about to install are told not
        to, and _log_shutdown writes that as a log line instead."""
        from celery.apps import worker as program

        _json_logging()
        for name in ("install_worker_term_handler", "install_worker_term_hard_handler"):
            setattr(program, name, partial(getattr(program, name), verbose=False))

    @signals.worker_shutting_down.connect
    def _log_shutdown(sig: str, how: str, exitcode: int, **kwargs: Any) -> None:
        logging.getLogger("celery.apps.worker").info("%s shutdown on %s", how, sig)
