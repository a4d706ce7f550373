"""The recipe without Docker (docs/operators/deploy.md, systemd), run without systemd (there is
none here): each unit in deploy/systemd is read as systemd reads it (EnvironmentFile=,
Environment=, WorkingDirectory=, RuntimeDirectory=, every ExecStart=) and its commands run
as real processes, with the env template filled as the deploy page's recipe fills it and
pointed at the test PostgreSQL and Redis. gpulease-migrate's commands succeed; gunicorn
tells systemd it is ready (Type=notify) and answers /healthz on the unit's loopback
address; the worker answers a Celery ping; beat writes its schedule; every line each one
writes is JSON; each stops on SIGTERM with status 0."""

from __future__ import annotations

import os
import re
import shlex
import socket
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest
from celery import Celery
from django_celery_beat.models import PeriodicTask

from tests.deploy.conftest import STATE_DIR
from tests.deploy.image_context import stages
from tests.deploy.processes import (
    ROOT,
    VENV_BIN,
    base_env,
    database_url,
    free_port,
    log_lines,
    start,
    wait_for,
)
from tests.deploy.recipe import COMPOSE, read_env_file, readme_block

pytestmark = pytest.mark.services
UNITS = ROOT / "deploy" / "systemd"
APP_DIR = "/opt/gpulease"
ENV_FILE = "/etc/gpulease/gpulease.env"
SETTINGS_RECIPE = "# 1. Packages, the user, the code and its virtualenv"


class Unit:
    """A unit file's settings, in order; a key may repeat (ExecStart= of a oneshot)."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self.entries: list[tuple[str, str, str]] = []
        section = ""
        for raw in path.read_text().replace("\\\n", " ").splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            key, _, value = line.partition("=")
            self.entries.append((section, key.strip(), value.strip()))

    def all(self, key: str, section: str = "Service") -> list[str]:
        return [v for s, k, v in self.entries if (s, k) == (section, key)]

    def one(self, key: str, section: str = "Service") -> str:
        (value,) = self.all(key, section)
        return value


def unit(name: str) -> Unit:
    return Unit(UNITS / name)


def _placeholders(text: str) -> set[str]:
    return set(re.findall(r"@([A-Z_]+)@", text))


@pytest.fixture
def host(tmp_path, production_files, redis_url):
    """/etc/gpulease/gpulease.env as the recipe writes it from the template, on this
    host: the test database and Redis, the keys and static files already made, free ports."""
    template = (UNITS / "gpulease.env").read_text()
    recipe = readme_block(SETTINGS_RECIPE)
    filled_by_recipe = set(re.findall(r"s\|@([A-Z_]+)@\|", recipe))
    assert _placeholders(template) == filled_by_recipe
    values = {
        "GPULEASE_HOST": "localhost",
        "SECRET_KEY": uuid.uuid4().hex * 2,
        "POSTGRES_PASSWORD": "unused-here",
        "METRICS_TOKEN": uuid.uuid4().hex,
        "ALERTMANAGER_TOKEN": uuid.uuid4().hex,
    }
    for name, value in values.items():
        template = template.replace(f"@{name}@", value)
    (tmp_path / "gpulease.env").write_text(template)
    settings = read_env_file(tmp_path / "gpulease.env")
    assert settings["DJANGO_DEBUG"] == "false" and settings["LOG_FORMAT"] == "json"
    state = str(production_files["state"])
    settings = {key: value.replace(STATE_DIR, state) for key, value in settings.items()}
    settings |= {
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": redis_url,
        "CELERY_RESULT_BACKEND": redis_url,
        "CACHE_URL": redis_url,
        "STATIC_ROOT": str(production_files["static"]),  # collected once for the session
        "CELERY_METRICS_PORT": str(free_port()),
    }
    return {"settings": settings, "root": tmp_path}


def run_unit(u: Unit, host: dict, *, extra_env: dict[str, str] | None = None) -> list[list[str]]:
    """The unit's environment and commands as systemd would build them."""
    assert u.one("User") == u.one("Group") == "gpulease"  # these run as root here
    assert u.one("WorkingDirectory") == APP_DIR
    assert u.one("EnvironmentFile") == ENV_FILE
    runtime = {}
    for name in u.all("RuntimeDirectory"):
        folder = host["root"] / "run" / name
        folder.mkdir(parents=True, exist_ok=True)
        runtime[f"/run/{name}"] = str(folder)

    def here(text: str) -> str:
        for path, folder in runtime.items():
            text = text.replace(path, folder)
        return text

    env = base_env(host["root"] / u.name)
    for assignment in u.all("Environment"):
        for word in shlex.split(assignment):
            key, _, value = word.partition("=")
            env[key] = here(value)
    env |= host["settings"]  # EnvironmentFile= overrides Environment= (systemd.exec)
    env |= extra_env or {}
    commands = []
    for line in u.all("ExecStart"):
        program, *args = shlex.split(here(line))
        assert program.startswith(f"{APP_DIR}/.venv/bin/"), program
        commands.append([str(VENV_BIN / Path(program).name), *args])
    host.setdefault("env", {})[u.name] = env
    return commands


def test_the_units_run_the_images_and_the_compose_files_commands():
    web = shlex.split(unit("gpulease-web.service").one("ExecStart"))
    image = stages(ROOT / "Dockerfile")[-1].cmd
    bind = web.index("--bind") + 1
    assert web[bind] == "127.0.0.1:8000"  # loopback: Caddy is the way in
    assert [Path(web[0]).name, *web[1:bind], *web[bind + 1 :]] == [
        *image[: image.index("--bind") + 1],
        *image[image.index("--bind") + 2 :],
    ]
    for name in ("worker", "beat"):
        command = shlex.split(unit(f"gpulease-{name}.service").one("ExecStart"))
        assert [Path(command[0]).name, *command[1:]] == COMPOSE["services"][name]["command"].split()
    for name in ("web", "worker", "beat"):
        u = unit(f"gpulease-{name}.service")
        assert u.one("Requires", "Unit") == "gpulease-migrate.service"
        assert "gpulease-migrate.service" in u.one("After", "Unit").split()
    assert unit("gpulease-web.service").one("Type") == "notify"
    assert unit("gpulease-migrate.service").one("Type") == "oneshot"


def test_the_units_commands_start_serve_and_stop(host, transactional_db):
    # gpulease-migrate: a oneshot, each ExecStart in turn.
    for command in run_unit(unit("gpulease-migrate.service"), host):
        result = subprocess.run(
            command,
            cwd=ROOT,
            env=host["env"]["gpulease-migrate.service"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr

    # The default queue is the worker's: nothing another test left there.
    celery = Celery(broker=host["settings"]["CELERY_BROKER_URL"], set_as_current=False)
    with celery.connection_for_write() as connection:
        connection.default_channel.queue_purge("celery")

    # gpulease-web: Type=notify, so gunicorn is told where systemd listens.
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(host["root"] / "notify"))
    notify.settimeout(1)
    (web_command,) = run_unit(
        unit("gpulease-web.service"),
        host,
        extra_env={"NOTIFY_SOCKET": str(host["root"] / "notify")},
    )
    port = free_port()
    bind = web_command.index("--bind") + 1
    web_command[bind] = web_command[bind].replace(":8000", f":{port}")
    logs = host["root"] / "logs"
    processes = [
        start("web", web_command, env=host["env"]["gpulease-web.service"], cwd=ROOT, logs=logs)
    ]
    for name in ("worker", "beat"):
        u = unit(f"gpulease-{name}.service")
        (command,) = run_unit(u, host)
        processes.append(start(name, command, env=host["env"][u.name], cwd=ROOT, logs=logs))
    web, worker, beat = processes
    try:

        def ready() -> str:
            web.alive()
            try:
                return notify.recv(4096).decode()
            except TimeoutError:
                return ""

        assert "READY=1" in wait_for(ready, seconds=120, what="gunicorn's READY=1").split("\n")

        # READY=1 comes when the master listens; its workers may still be loading Django.
        def healthz() -> tuple[int, bytes] | None:
            web.alive()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=30) as r:
                    return r.status, r.read()
            except OSError:
                return None

        assert wait_for(healthz, seconds=120, what="/healthz") == (200, b'{"status": "ok"}')

        def pong() -> list:
            worker.alive()
            return celery.control.ping(timeout=1)

        (reply,) = wait_for(pong, seconds=120, what="the worker to answer a ping")
        assert list(reply.values()) == [{"ok": "pong"}]

        def schedule() -> bool:
            beat.alive()
            return PeriodicTask.objects.filter(task="common.beat_heartbeat").exists()

        wait_for(schedule, seconds=120, what="beat to write its schedule")
    finally:
        exits = {process.name: process.stop(timeout=120) for process in processes}
        notify.close()
        with celery.connection_for_write() as connection:
            connection.default_channel.queue_purge("celery")
    assert exits == {"web": 0, "worker": 0, "beat": 0}
    lines = log_lines(*processes)
    assert {line["_process"] for line in lines} == {"web", "worker", "beat"}
    errors = [line for line in lines if line["level"] in ("ERROR", "CRITICAL")]
    assert errors == []
    assert os.path.isdir(host["root"] / "run" / "gpulease-web" / "metrics")
