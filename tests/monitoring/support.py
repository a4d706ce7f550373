"""A real Prometheus for the monitoring tests: a temporary prometheus.yml that scrapes a
live gpulease every second with the repository's rules (their ``for:`` set to 0s, since
gpulease's statuses already include their own waiting), started on a free port."""

import contextlib
import json
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "prometheus" / "rules.yml"
DASHBOARD_DIR = ROOT / "monitoring" / "grafana" / "dashboards"
TOKEN = "test-metrics-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def immediate_rules(path: Path) -> Path:
    """The repository's rules with every ``for:`` at 0s."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if "for" in rule:
                rule["for"] = "0s"
    path.write_text(yaml.safe_dump(rules, allow_unicode=True))
    return path


def scrape(url: str, token: str = TOKEN) -> bytes:
    request = urllib.request.Request(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read()


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.base}{path}{query}", timeout=10) as response:
            return json.load(response)

    def query(self, expr: str) -> dict[str, Any]:
        return self.get("/api/v1/query", query=expr)

    def firing(self) -> list[dict[str, Any]]:
        alerts = self.get("/api/v1/alerts")["data"]["alerts"]
        return [alert for alert in alerts if alert["state"] == "firing"]

    def wait_for(self, check, timeout: float = 90, what: str = "") -> Any:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            last = check()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@contextlib.contextmanager
def prometheus_scraping(target_url: str, tmp_path: Path) -> Iterator[Prometheus]:
    binary = require_tool("prometheus")
    target = urllib.parse.urlsplit(target_url).netloc
    rules = immediate_rules(tmp_path / "rules.yml")
    (tmp_path / "token").write_text(TOKEN)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": "gpulease",
                "metrics_path": "/metrics",
                "authorization": {"type": "Bearer", "credentials_file": str(tmp_path / "token")},
                "static_configs": [{"targets": [target]}],
            }
        ],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    prometheus = Prometheus(f"http://127.0.0.1:{port}")
    try:

        def ready() -> bool:
            if process.poll() is not None:
                raise AssertionError((tmp_path / "prometheus.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(f"{prometheus.base}/-/ready", timeout=2):
                    return True
            except OSError:
                return False

        prometheus.wait_for(ready, timeout=60, what="prometheus to start")
        yield prometheus
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
