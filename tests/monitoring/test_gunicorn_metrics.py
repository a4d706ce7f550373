"""/metrics under the image's own gunicorn command (the Dockerfile's CMD, here with three
workers) in prometheus_client's multiprocess mode: the process figures do not depend on
which worker answers. The CPU counter never goes backwards from one scrape to the next,
whoever answers them, nor when a worker exits; each live worker has its own memory series,
and an exited worker's series leave with it."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import require
from tests.deploy.image_context import stages
from tests.monitoring.support import ROOT, TOKEN, free_port, scrape

pytestmark = pytest.mark.django_db
WORKERS = 3


def database_url() -> str:
    """The test database, for the gunicorn workers to read (their scrapes read tables)."""
    settings = connection.settings_dict
    host = settings["HOST"] or "127.0.0.1"
    password = f":{settings['PASSWORD']}" if settings["PASSWORD"] else ""
    return (
        f"postgres://{settings['USER']}{password}@{host}:{settings['PORT'] or 5432}"
        f"/{settings['NAME']}"
    )


def children(pid: int) -> set[int]:
    return {int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


class Gunicorn:
    def __init__(self, tmp_path: Path) -> None:
        cmd = stages(ROOT / "Dockerfile")[-1].cmd
        assert cmd[0] == "gunicorn" and "python:monitoring.gunicorn" in cmd
        cmd[0] = str(Path(sys.executable).parent / "gunicorn")  # the venv's, PATH or not
        port = free_port()
        cmd[cmd.index("--bind") + 1] = f"127.0.0.1:{port}"
        cmd[cmd.index("--workers") + 1] = str(WORKERS)
        self.url = f"http://127.0.0.1:{port}"
        self.log = tmp_path / "gunicorn.log"
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
            "GPULEASE_VAR_DIR": str(tmp_path / "var"),
            "METRICS_TOKEN": TOKEN,
        }
        with open(self.log, "w") as sink:
            self.process = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT
            )

    def wait_for_workers(self, exclude: frozenset[int] = frozenset()) -> set[int]:
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            workers = children(self.process.pid) - exclude
            if len(workers) == WORKERS:
                try:
                    urllib.request.urlopen(f"{self.url}/healthz", timeout=5).close()
                    return workers
                except OSError:
                    pass
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.2)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def cpu_and_memory(text: bytes) -> tuple[dict[str, float], dict[int, float]]:
    """The scrape's CPU counters (every series named *process_cpu_seconds_total) and its
    resident memory by worker pid."""
    cpu, memory = {}, {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name.endswith("process_cpu_seconds_total"):
                cpu[sample.name] = sample.value
            if sample.name.endswith("process_resident_memory_bytes"):
                memory[int(sample.labels.get("pid", 0))] = sample.value
    return cpu, memory


def burst(url: str) -> None:
    """One scrape per worker at once, so that every worker answers and spends CPU."""
    threads = [threading.Thread(target=scrape, args=(url,)) for _ in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@pytest.fixture
def gunicorn(tmp_path):
    require(connection.vendor == "postgresql", "the workers share the PostgreSQL test database")
    server = Gunicorn(tmp_path)
    try:
        yield server
    finally:
        server.stop()


def test_process_figures_do_not_depend_on_the_worker_that_answers(gunicorn):
    workers = gunicorn.wait_for_workers()
    readings = []
    for _ in range(25):
        burst(gunicorn.url)
        readings.append(cpu_and_memory(scrape(gunicorn.url)))
    (name,) = {name for cpu, _ in readings for name in cpu}  # one CPU series, whoever answers
    series = [cpu[name] for cpu, _ in readings]
    assert series == sorted(series), f"{name} went backwards: {series}"
    assert series[-1] > series[0]
    assert set(readings[-1][1]) == workers  # a memory series per live worker

    # A worker exits (gunicorn's max_requests does this too) and the master forks another.
    gone = min(workers)
    os.kill(gone, signal.SIGTERM)
    workers = gunicorn.wait_for_workers(exclude=frozenset({gone}))
    assert gone not in workers
    for _ in range(60):  # until the new worker has answered too
        burst(gunicorn.url)
        cpu, memory = cpu_and_memory(scrape(gunicorn.url))
        assert gone not in memory  # its series left with it
        assert cpu[name] >= series[-1]  # what it spent is still counted
        if set(memory) == workers:
            break
    assert set(memory) == workers
    assert all(value > 10 * 2**20 for value in memory.values())  # a Django worker, in bytes
    assert re.search(rb"gpulease_web_process_open_fds\{pid=", scrape(gunicorn.url))
