"""The production image really starts, proved without docker: exactly what the Dockerfile
copies (its final stage's COPY instructions, filtered by .dockerignore, and the assets
stage's output) is laid out in a temporary folder and installed into a fresh virtualenv as
its RUN step does; then, with production settings and the keys provided as the compose
file's volume provides them, `check --deploy`, `migrate` on a fresh PostgreSQL database,
and the Dockerfile's own CMD (gunicorn) answering /healthz, /readyz, the login page and a
static file."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest

from tests.conftest import require
from tests.deploy.image_context import build

ROOT = Path(__file__).resolve().parents[2]
HOST = "gpulease.example.cn"
pytestmark = pytest.mark.services


def _run(args: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 600):
    result = subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


def _server_url() -> str:
    """The PostgreSQL server of the test run (its maintenance database)."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        url = os.environ.get("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    return url.rsplit("/", 1)[0] + "/postgres"


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    """The image's /app, installed into its own virtualenv as the Dockerfile's RUN does."""
    vendor = ROOT / "portal/static/portal/vendor"
    require((vendor / "pico.min.css").exists(), "the portal's vendor files (make assets)")
    base = tmp_path_factory.mktemp("image")
    app = base / "app"
    final = build(ROOT, app)
    venv = base / "venv"
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {
        "PATH": f"{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": os.environ.get("HOME", str(base)),  # pip's configuration and cache
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        **{k: v for k, v in os.environ.items() if k.startswith("PIP_") or k.startswith("SSL_")},
        **final.env,
    }
    dockerfile = " ".join((ROOT / "Dockerfile").read_text().split())
    assert "pip install --no-cache-dir --require-hashes -r requirements.lock" in dockerfile
    assert "pip install --no-cache-dir --no-deps --no-build-isolation -e ./verifier -e ." in (
        dockerfile
    )
    pip = [str(venv / "bin/python"), "-m", "pip", "install", "--quiet"]
    _run([*pip, "--require-hashes", "-r", "requirements.lock"], cwd=app, env=env)
    _run(
        [*pip, "--no-deps", "--no-build-isolation", "-e", "./verifier", "-e", "."], cwd=app, env=env
    )
    _run(
        [str(venv / "bin/pybabel"), "-q", "compile", "--domain=django", "--directory=locale"],
        cwd=app,
        env=env,
    )
    # Production's keys: one folder, as the compose file's `keys` volume is mounted.
    keys = base / "keys"
    production = {
        **env,
        "DJANGO_DEBUG": "false",
        "SECRET_KEY": "image-context-" + uuid.uuid4().hex * 2,
        "ALLOWED_HOSTS": HOST,
        "GPULEASE_VAR_DIR": str(base / "var"),
        "STATIC_ROOT": str(base / "static"),
        "AUDIT_SIGNING_KEY": str(keys / "audit/ed25519.pem"),
        "PROBE_SSH_KEY": str(keys / "ssh/probe_ed25519"),
        "LOG_FORMAT": "json",
    }
    created = _run(
        [str(venv / "bin/python"), "-m", "config.keys", "create"],
        cwd=app,
        env=env | {k: production[k] for k in ("AUDIT_SIGNING_KEY", "PROBE_SSH_KEY")},
    )
    assert "created" in created.stdout
    _run(
        [str(venv / "bin/python"), "manage.py", "collectstatic", "--no-input", "-v0"],
        cwd=app,
        env=production,
    )
    return {
        "app": app,
        "venv": venv,
        "env": production,
        "cmd": final.cmd,
        "install_s": time.monotonic() - started,
    }


def test_the_context_is_the_whole_project_without_local_state(image):
    app = image["app"]
    for needed in ("manage.py", "config", "common", "leases", "benchmarks", "billing"):
        assert (app / needed).exists(), needed
    for needed in ("api", "portal", "verifier", "locale", "scripts"):
        assert (app / needed).is_dir(), needed
    assert (app / "portal/static/portal/vendor/pico.min.css").exists()
    for absent in (".git", ".venv", "var", "node_modules", "tests", ".env"):
        assert not (app / absent).exists(), absent
    assert not list(app.rglob("__pycache__"))
    # Installed for real into the venv: editable, as the Dockerfile installs it, so the
    # image's /app, not this checkout (whatever PYTHONPATH the test run has).
    probe = subprocess.run(
        [
            str(image["venv"] / "bin/python"),
            "-c",
            "import billing, gpulease_verify; print(billing.__file__, gpulease_verify.__file__)",
        ],
        cwd="/",
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.split() == [
        str(app / "billing/__init__.py"),
        str(app / "verifier/gpulease_verify/__init__.py"),
    ]


def test_check_deploy_reports_no_issues(image):
    result = _run(
        [
            str(image["venv"] / "bin/python"),
            "manage.py",
            "check",
            "--deploy",
            "--fail-level",
            "WARNING",
        ],
        cwd=image["app"],
        env=image["env"],
    )
    assert "no issues" in result.stdout


@pytest.fixture(scope="module")
def database(image):
    import psycopg

    server = _server_url()
    try:
        admin = psycopg.connect(server, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError:
        admin = None
    require(admin is not None, f"PostgreSQL at {server} is not reachable")
    assert admin is not None
    name = f"gl_image_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        return None  # a 301 is an answer to assert, not to follow


_opener = urllib.request.build_opener(_NoRedirect)


def _get(url: str, headers: dict[str, str] | None = None):
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with _opener.open(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def _gunicorn(cmd: list[str], port: int) -> list[str]:
    """The Dockerfile's CMD, bound to a free local port and with one worker (CI's cores)."""
    args = list(cmd)
    args[args.index("--bind") + 1] = f"127.0.0.1:{port}"
    args[args.index("--workers") + 1] = "1"
    return args


def test_migrate_and_gunicorn_serve_the_probes_and_the_portal(image, database, redis_url):
    metrics_token = uuid.uuid4().hex
    env = {
        **image["env"],
        "DATABASE_URL": database,
        "CELERY_BROKER_URL": redis_url,
        "CACHE_URL": redis_url,
        # The image's multiprocess folder, moved under this test's own folder.
        "PROMETHEUS_MULTIPROC_DIR": str(image["app"].parent / "metrics"),
        "METRICS_TOKEN": metrics_token,
    }
    assert image["env"]["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/gpulease-metrics"
    python = str(image["venv"] / "bin/python")
    _run([python, "manage.py", "migrate", "--no-input", "-v0"], cwd=image["app"], env=env)
    assert image["cmd"][0] == "gunicorn"
    port = _free_port()
    log = image["app"].parent / f"gunicorn-{port}.log"
    with open(log, "w") as sink:
        server = subprocess.Popen(
            _gunicorn(image["cmd"], port), cwd=image["app"], env=env, stdout=sink, stderr=sink
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, _, body = _get(base + "/healthz")
                break
            except OSError:
                assert server.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.3)
        # Plain HTTP and a Host outside ALLOWED_HOSTS, as a healthcheck inside the container.
        assert (status, json.loads(body)) == (200, {"status": "ok"})

        # A fresh stack: database, cache and broker answer, so web is ready although beat
        # has not beaten yet (beat's liveness is its own healthcheck's business).
        status, _, body = _get(base + "/readyz")
        ready = json.loads(body)
        assert status == 200, ready
        assert ready == {
            "status": "ok",
            "checks": {"database": {"ok": True}, "cache": {"ok": True}, "broker": {"ok": True}},
        }
        # Through the TLS proxy: the login page, and the hashed static file it links.
        proxy = {"Host": HOST, "X-Forwarded-Proto": "https"}
        status, headers, _ = _get(base + "/no-such-page/", proxy)
        assert status == 404
        request_id = headers["X-Request-ID"]
        status, _, page = _get(base + "/accounts/login/", proxy)
        assert status == 200, page[:500]
        stylesheet = re.search(rb'href="(/static/[^"]+\.css)"', page)
        assert stylesheet is not None
        status, _, _ = _get(base + stylesheet.group(1).decode(), proxy)
        assert status == 200
        status, _, _ = _get(base + "/accounts/login/", {"Host": HOST})
        assert status == 301  # plain HTTP is redirected to HTTPS

        # /metrics in multiprocess mode (the CMD's -c python:monitoring.gunicorn), with the
        # scrape token, over plain HTTP as Prometheus scrapes it inside the stack.
        status, _, _ = _get(base + "/metrics")
        assert status == 403
        status, _, text = _get(base + "/metrics", {"Authorization": f"Bearer {metrics_token}"})
        assert status == 200, text[:500]
        assert b"# TYPE gpulease_lease_open_incidents gauge" in text
        assert b"gpulease_web_process_resident_memory_bytes" in text
        # Each gunicorn worker writes its request counts to the folder; the scrape adds them.
        assert any((image["app"].parent / "metrics").iterdir())
        assert b'gpulease_http_requests_total{method="GET",status="200",view="health"}' in text
    finally:
        server.terminate()
        server.wait(timeout=30)

    # LOG_FORMAT=json: every line is one JSON object (gunicorn's own too), and the 404's
    # access line carries the request's id.
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert any(
        line["logger"] == "gunicorn.access"
        and (line["request_id"], line["status"]) == (request_id, 404)
        for line in lines
    ), log.read_text()[-3000:]
    print(f"image context installed in {image['install_s']:.0f} s")
