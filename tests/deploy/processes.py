"""Real processes for the deploy tests: started from this checkout's virtualenv with an
environment of their own, their stdout and stderr kept in files, stopped as Docker and
systemd stop them (SIGTERM), and every line they wrote read back as a JSON log line."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
# common.logs.JsonFormatter's time: UTC, milliseconds, the offset written out.
UTC_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Callable[[], Any], *, seconds: float, what: str) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {seconds} s waiting for {what}")
        time.sleep(0.2)


def base_env(home: Path) -> dict[str, str]:
    """What any process here needs besides its settings: this checkout first on the path
    (the shared virtualenv may hold another checkout), a home of its own (gunicorn's
    control socket lives under it)."""
    path = [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(":") if p]
    return {
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONPATH": ":".join(path),
    }


def program(words: list[str]) -> list[str]:
    """A command as a Dockerfile, compose file or unit writes it, run from this virtualenv."""
    first, *rest = words
    local = VENV_BIN / Path(first).name
    return [str(local) if local.exists() else first, *rest]


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    stdout: Path
    stderr: Path

    def output(self) -> str:
        return self.stdout.read_text() + self.stderr.read_text()

    def alive(self) -> bool:
        if self.popen.poll() is not None:
            raise AssertionError(f"{self.name} exited {self.popen.returncode}:\n{self.tail()}")
        return True

    def tail(self, chars: int = 4000) -> str:
        return self.output()[-chars:]

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, as `docker stop` and `systemctl stop` send; the exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
                raise AssertionError(f"{self.name} ignored SIGTERM:\n{self.tail()}") from None
        return int(self.popen.returncode)


def start(name: str, args: list[str], *, env: dict[str, str], cwd: Path, logs: Path) -> Process:
    logs.mkdir(parents=True, exist_ok=True)
    stdout, stderr = logs / f"{name}.stdout", logs / f"{name}.stderr"
    with open(stdout, "w") as out, open(stderr, "w") as err:
        popen = subprocess.Popen(args, cwd=cwd, env=env, stdout=out, stderr=err)
    return Process(name, popen, stdout, stderr)


def log_lines(*processes: Process) -> list[dict[str, Any]]:
    """Every line every process wrote, each a JSON object with a UTC time and offset, a
    level, a logger and a message; anything else fails the test, naming the line."""
    lines = []
    for process in processes:
        for path in (process.stdout, process.stderr):
            for number, text in enumerate(path.read_text().splitlines(), 1):
                try:
                    line = json.loads(text)
                except ValueError:
                    pytest.fail(f"{path.name} line {number} is not JSON: {text[:300]!r}")
                assert isinstance(line, dict), (path.name, number, text)
                missing = {"time", "level", "logger", "message"} - line.keys()
                assert not missing, (path.name, number, missing, text)
                assert UTC_TIME.fullmatch(line["time"]), (path.name, number, line["time"])
                lines.append({**line, "_process": process.name})
    return lines


def database_url() -> str:
    """The URL of pytest-django's test database (PostgreSQL), for processes of their own."""
    from django.db import connection

    settings = connection.settings_dict
    if connection.vendor != "postgresql":
        pytest.skip("the deploy processes run against PostgreSQL")
    user = settings["USER"] or "postgres"
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    host = settings["HOST"] or "127.0.0.1"
    port = settings["PORT"] or "5432"
    return f"postgres://{user}{password}@{host}:{port}/{settings['NAME']}"
