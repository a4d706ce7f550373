"""A real Prometheus (Debian's /usr/bin/prometheus) scrapes a live gpulease holding the demo
data, evaluates the repository's rules and fires the breach alert for the breached demo
lease; promtool checks the rules and a live scrape."""

import json
import subprocess
import time

import pytest
import yaml
from django.core.management import call_command

from tests.conftest import require_tool
from tests.monitoring.support import (
    DASHBOARD_DIR,
    RULES,
    TOKEN,
    prometheus_scraping,
    scrape,
)
from tests.monitoring.test_metrics import families

BREACHED = "LX-2026-001"  # the demo lease below its threshold now (docs/demo.md)


def test_promtool_accepts_the_rules():
    promtool = require_tool("promtool")
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 13 rules found" in result.stdout


def test_the_rules_pass_their_promtool_unit_tests():
    """monitoring/prometheus/rules.test.yml: the breach, no-data, missed-runs-across-an-
    archive and ingest-lag cases, with the labels and annotations each alert carries."""
    promtool = require_tool("promtool")
    tests = RULES.with_name("rules.test.yml")
    names = {case["name"] for case in yaml.safe_load(tests.read_text())["tests"]}
    assert {"breach", "no data", "missed runs across an archive", "ingest lag"} <= names
    result = subprocess.run(
        [promtool, "test", "rules", str(tests)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.fixture
def demo_server(live_server, settings):
    settings.METRICS_TOKEN = TOKEN
    settings.ALLOWED_HOSTS = ["localhost", "127.0.0.1"]
    call_command("demo", history_days=1, stdout=open("/dev/null", "w"))  # noqa: SIM115
    return live_server


def test_prometheus_fires_the_breach_alert_for_the_breached_demo_lease(demo_server, tmp_path):
    promtool = require_tool("promtool")
    body = scrape(demo_server.url)
    lint = subprocess.run(
        [promtool, "check", "metrics"], input=body, capture_output=True, check=False
    )
    assert lint.returncode == 0, (lint.stdout + lint.stderr).decode()
    assert b"gpulease_lease_status{" in body and b"node_infiniband_" in body

    with prometheus_scraping(demo_server.url, tmp_path) as prometheus:

        def breach_alerts():
            return [
                alert
                for alert in prometheus.firing()
                if alert["labels"]["alertname"] == "GpuleaseLeaseBreached"
            ]

        firing = prometheus.wait_for(breach_alerts, what="GpuleaseLeaseBreached to fire")
        # Exactly the leases the scrape calls breached (portal.lease_status: the month so
        # far, so early in a month ZY-2026-001's first days' down minutes can owe a credit
        # too), the demo's breached lease among them.
        breached = {
            sample.labels["lease"]
            for sample in families(body)["gpulease_lease_status"]
            if sample.labels["gpulease_lease_status"] == "breached" and sample.value == 1
        }
        assert BREACHED in breached
        assert {alert["labels"]["lease"] for alert in firing} == breached
        for alert in firing:
            labels = alert["labels"]
            assert labels["severity"] == "critical"
            assert labels["tenant"] and labels["site"] and labels["fabric"]
        up = prometheus.query('up{job="gpulease"}')["data"]["result"]
        assert [sample["value"][1] for sample in up] == ["1"]


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, expression) of every panel query and annotation of every dashboard."""
    queries = []
    for path in sorted(DASHBOARD_DIR.glob("*.json")):
        dashboard = json.loads(path.read_text())
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):
                queries.append((f"{path.name}: {panel['title']}", target["expr"]))
        for annotation in dashboard.get("annotations", {}).get("list", []):
            if "expr" in annotation:
                queries.append(
                    (f"{path.name}: annotation {annotation['name']}", annotation["expr"])
                )
    return queries


def test_the_dashboard_is_provisioned_and_names_real_series():
    assert len(dashboard_queries()) >= 15
    for title, expr in dashboard_queries():
        assert any(name in expr for name in ("gpulease_", "node_infiniband_", "up{", "ALERTS{")), (
            title
        )


def test_every_dashboard_panel_answers_from_the_live_prometheus(demo_server, tmp_path):
    queries = [
        (title, expr.replace("$lease", BREACHED).replace("$__rate_interval", "1m"))
        for title, expr in dashboard_queries()
        if "ALERTS" not in expr  # the breach annotation: proven by the alert test above
    ]
    with prometheus_scraping(demo_server.url, tmp_path) as prometheus:

        def empty_panels():
            """Every query must be valid PromQL; every panel must show a series (a target
            may be empty: the breached demo lease is billed per GB and keeps the default
            credit base, the network fee, so it earns no credit and has none at risk)."""
            answered: dict[str, bool] = {}
            for title, expr in queries:
                answer = prometheus.query(expr)
                assert answer["status"] == "success", (title, expr, answer)
                answered[title] = answered.get(title, False) or bool(answer["data"]["result"])
            return sorted(title for title, some in answered.items() if not some)

        # Rates need two scrapes.
        deadline = time.monotonic() + 60
        while (empty := empty_panels()) and time.monotonic() < deadline:
            time.sleep(1)
        assert empty == []
