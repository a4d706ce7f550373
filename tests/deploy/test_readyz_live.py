"""/readyz through a real gunicorn (the Dockerfile's CMD, DEBUG off) whose neighbours have
gone bad the way real ones do: PostgreSQL accepts TCP and never answers, the cache's Redis
is stopped, the broker accepts and never answers. /readyz still answers within 2 s, names
each failed dependency, and keeps doing so probe after probe; /healthz stays 200."""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.deploy.image_context import stages
from tests.deploy.neighbours import free_port, silent_listener

ROOT = Path(__file__).resolve().parents[2]


def _get(url: str) -> tuple[int, dict, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=40) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    return status, json.loads(body), time.monotonic() - started


def _gunicorn_cmd(port: int) -> list[str]:
    """The Dockerfile's CMD, bound to a local port, with the issue's three workers."""
    cmd = list(stages(ROOT / "Dockerfile")[-1].cmd)
    assert cmd[0] == "gunicorn"
    cmd[0] = str(Path(sys.executable).parent / "gunicorn")
    cmd[cmd.index("--bind") + 1] = f"127.0.0.1:{port}"
    cmd[cmd.index("--workers") + 1] = "3"
    return cmd


def _production_env(tmp_path: Path) -> dict[str, str]:
    keys = {
        "AUDIT_SIGNING_KEY": str(tmp_path / "keys/audit/ed25519.pem"),
        "PROBE_SSH_KEY": str(tmp_path / "keys/ssh/probe_ed25519"),
    }
    subprocess.run(
        [sys.executable, "-m", "config.keys", "create"],
        cwd=ROOT,
        env={**os.environ, **keys},
        capture_output=True,
        check=True,
        timeout=120,
    )
    return {
        **os.environ,
        **keys,
        "DJANGO_DEBUG": "false",
        "SECRET_KEY": "y" * 64,
        "ALLOWED_HOSTS": "gpulease.example.cn",
        "GPULEASE_VAR_DIR": str(tmp_path / "var"),
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
        "LOG_FORMAT": "json",
    }


def test_readyz_answers_within_2_s_whatever_hangs(tmp_path):
    env = _production_env(tmp_path)
    port = free_port()
    with silent_listener() as database, silent_listener() as broker:
        env |= {
            "DATABASE_URL": f"postgres://gpulease:pw@127.0.0.1:{database}/gpulease",
            "CACHE_URL": f"redis://127.0.0.1:{free_port()}/2",  # a stopped Redis
            "CELERY_BROKER_URL": f"redis://127.0.0.1:{broker}/0",
        }
        log = tmp_path / "gunicorn.log"
        with open(log, "w") as sink:
            server = subprocess.Popen(
                _gunicorn_cmd(port), cwd=ROOT, env=env, stdout=sink, stderr=sink
            )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    status, body, _ = _get(base + "/healthz")
                    break
                except OSError:
                    assert server.poll() is None, log.read_text()
                    assert time.monotonic() < deadline, log.read_text()
                    time.sleep(0.3)
            assert (status, body) == (200, {"status": "ok"})

            answers = [_get(base + "/readyz") for _ in range(6)]
            healthz = _get(base + "/healthz")
        finally:
            server.terminate()
            server.wait(timeout=30)

    for status, body, elapsed in answers:
        assert elapsed < 2.0, (elapsed, log.read_text()[-3000:])
        assert status == 503
        assert body["status"] == "unavailable"
        assert body["failed"] == ["database", "cache", "broker"]
        assert body["checks"]["database"] == {"ok": False, "timed_out": True}
        assert body["checks"]["cache"] == {"ok": False}
        assert body["checks"]["broker"]["ok"] is False
    assert healthz[:2] == (200, {"status": "ok"})
    print("readyz answered in", ", ".join(f"{elapsed:.2f}" for _, _, elapsed in answers), "s")
    # The reasons are in the log, not in the open answer.
    text = log.read_text()
    assert "readiness check database did not answer within 1.5s" in text
    assert "readiness check cache failed" in text
    assert "WORKER TIMEOUT" not in text
