"""The compose stack's Prometheus and Grafana: they mount the repository's rules, scrape
configuration, provisioning and dashboard, and the scrape configuration passes
``promtool check config`` (with the container paths pointed at the repository's files)."""

import json
import subprocess
from pathlib import Path

import yaml

from tests.conftest import require_tool

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
PROMETHEUS_YML = ROOT / "monitoring" / "prometheus" / "prometheus.yml"


def mounts(service: str) -> dict[str, str]:
    """container path -> repository path of the service's bind mounts."""
    found = {}
    for volume in COMPOSE["services"][service]["volumes"]:
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            assert (ROOT / source).exists(), source
            found[target] = source
    return found


def test_prometheus_mounts_the_rules_and_its_configuration():
    bound = mounts("prometheus")
    assert bound["/etc/prometheus/prometheus.yml"] == "./monitoring/prometheus/prometheus.yml"
    assert bound["/etc/prometheus/rules/gpulease.yml"] == "./monitoring/prometheus/rules.yml"
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    assert config["rule_files"] == ["/etc/prometheus/rules/gpulease.yml"]
    (secret,) = COMPOSE["services"]["prometheus"]["secrets"]
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == "gpulease"]
    assert job["authorization"]["credentials_file"] == secret["target"]
    assert COMPOSE["secrets"][secret["source"]] == {"environment": "METRICS_TOKEN"}
    assert job["static_configs"][0]["targets"] == ["web:8000"]


def test_grafana_provisions_the_datasource_and_the_dashboard():
    bound = mounts("grafana")
    provisioning = ROOT / bound["/etc/grafana/provisioning"]
    datasource = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((provisioning / "dashboards" / "gpulease.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    dashboards = ROOT / bound[path]
    (dashboard,) = [json.loads(p.read_text()) for p in dashboards.glob("*.json")]
    assert dashboard["uid"] == "gpulease-fleet"
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_promtool_accepts_the_compose_scrape_configuration(tmp_path):
    promtool = require_tool("promtool")
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    config["rule_files"] = [str(ROOT / "monitoring" / "prometheus" / "rules.yml")]
    (tmp_path / "token").write_text("t")
    for job in config["scrape_configs"]:
        if "authorization" in job:
            job["authorization"]["credentials_file"] = str(tmp_path / "token")
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [promtool, "check", "config", str(tmp_path / "prometheus.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
