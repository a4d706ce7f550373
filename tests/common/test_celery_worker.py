"""A real Celery worker consumes from the real Redis broker and stores results there."""

import os
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_worker_on_redis_runs_a_task(redis_url, tmp_path):
    env = {
        **os.environ,
        "CELERY_BROKER_URL": redis_url,
        "CELERY_RESULT_BACKEND": redis_url,
        "GPULEASE_VAR_DIR": str(tmp_path),
    }
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
            "--pool=solo",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    token = uuid.uuid4().hex
    try:
        client = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "--no-imports",
                "-c",
                "from common.tasks import ping; "
                f"print(ping.apply_async(args=['{token}'], queue='{queue}').get(timeout=60))",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert client.returncode == 0, client.stderr
    assert client.stdout.strip() == f"pong:{token}"
