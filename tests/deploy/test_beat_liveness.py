"""Beat's own healthcheck against a real `celery -A config beat` (compose's command): its
scheduler touches the liveness file at every tick, `manage.py readiness --check beat`
passes while it ticks and fails once it is stuck (SIGSTOP), with no worker running at all."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]


def _healthcheck(env: dict[str, str]) -> tuple[int, dict]:
    result = subprocess.run(
        [sys.executable, "manage.py", "readiness", "--check", "beat"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, json.loads(result.stdout)["checks"]["beat"]


@pytest.mark.django_db(transaction=True)
def test_beat_s_healthcheck_follows_beat_s_own_ticks(tmp_path):
    require(connection.vendor == "postgresql", "beat's scheduler shares the test database")
    database = connection.settings_dict
    login = database["USER"] + (f":{database['PASSWORD']}" if database["PASSWORD"] else "")
    alive = tmp_path / "beat-alive"
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{login}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
        ),
        "GPULEASE_VAR_DIR": str(tmp_path),
        "CELERY_BROKER_URL": "filesystem://",
        "BEAT_LIVENESS_FILE": str(alive),
        "BEAT_LIVENESS_MAX_AGE_S": "3",
    }
    log = tmp_path / "beat.log"
    celery = str(Path(sys.executable).parent / "celery")
    with open(log, "w") as sink:
        beat = subprocess.Popen(
            # compose's command, ticking at least every second (its default is every
            # 5 s, longer than the 3 s this test allows, so a check could land late).
            [celery, "-A", "config", "beat", "-l", "INFO", "--max-interval", "1"],
            cwd=ROOT,
            env=env,
            stdout=sink,
            stderr=sink,
        )
    try:
        deadline = time.monotonic() + 60
        while not alive.exists():
            assert beat.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        # Passes while beat ticks (a second try allowed, as after SIGCONT below).
        deadline = time.monotonic() + 15
        while (first := _healthcheck(env))[0] != 0:
            assert time.monotonic() < deadline, (first, log.read_text())
            time.sleep(0.5)

        beat.send_signal(signal.SIGSTOP)  # stuck: alive as a process, no longer ticking
        time.sleep(4.5)
        code, check = _healthcheck(env)
        assert code == 1
        assert check["ok"] is False and check["age_s"] >= 4 and check["max_age_s"] == 3

        beat.send_signal(signal.SIGCONT)
        deadline = time.monotonic() + 15
        while _healthcheck(env)[0] != 0:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)

        # Beat sends its tasks to the broker although no worker runs them: the first due is
        # the 15 s telemetry poll (a fresh entry is first due one interval after beat starts).
        queue = tmp_path / "broker" / "queue"
        deadline = time.monotonic() + 40
        while not (queue.is_dir() and any(queue.iterdir())):
            assert beat.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
    finally:
        beat.send_signal(signal.SIGCONT)
        beat.terminate()
        beat.wait(timeout=30)
