"""A real Celery worker consumes from the real Redis broker."""

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from common.tasks import ping

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def redis_worker(redis_url):
    env = {**os.environ, "CELERY_BROKER_URL": redis_url, "CELERY_RESULT_BACKEND": redis_url}
    queue = f"test-{uuid.uuid4().hex[:8]}"
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "-Q",
            queue,
            "--concurrency=1",
            "--pool=solo",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    yield redis_url, queue
    worker.terminate()
    worker.wait(timeout=30)


def test_worker_on_redis_runs_a_task(redis_worker):
    from config.celery import app

    redis_url, queue = redis_worker
    previous = app.conf.broker_url, app.conf.result_backend
    app.conf.broker_url = app.conf.result_backend = redis_url
    try:
        token = uuid.uuid4().hex
        started = time.monotonic()
        result = ping.apply_async(args=[token], queue=queue)
        assert result.get(timeout=60) == f"pong:{token}"
        assert time.monotonic() - started < 60
    finally:
        app.conf.broker_url, app.conf.result_backend = previous
