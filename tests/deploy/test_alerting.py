"""Firing alerts reach someone: the compose stack's Prometheus sends them to its Alertmanager
(monitoring/prometheus/prometheus.yml, `alerting:`), whose configuration
(monitoring/prometheus/alertmanager.yml) hands every alert to gpulease's intake with the
bearer token, and gpulease's own rules to the on-call receiver as well. Real Prometheus
and Alertmanager (Debian's prometheus and prometheus-alertmanager) with the committed
files, only their addresses, the token file and the waits changed: a node alert firing in
Prometheus opens an incident on the lease holding the node."""

from __future__ import annotations

import subprocess
import urllib.parse
from datetime import timedelta

import pytest
import yaml
from django.urls import reverse
from django.utils import timezone

from incidents.models import Incident
from monitoring.models import ExternalAlert
from tests.conftest import require_tool
from tests.deploy.processes import ROOT, base_env, free_port, start, wait_for
from tests.deploy.recipe import COMPOSE
from tests.factories import NodeFactory, make_lease
from tests.portal.support import active

PROMETHEUS_YML = ROOT / "monitoring" / "prometheus" / "prometheus.yml"
ALERTMANAGER_YML = ROOT / "monitoring" / "prometheus" / "alertmanager.yml"
TOKEN = "alertmanager-test-token"


def _alertmanager_service_paths() -> dict[str, str]:
    service = COMPOSE["services"]["alertmanager"]
    mounts = dict(volume.split(":")[:2] for volume in service["volumes"])
    (secret,) = service["secrets"]
    return {
        "config": mounts["./monitoring/prometheus/alertmanager.yml"],
        "token": secret["target"],
    }


def test_amtool_accepts_the_configuration_and_routes_each_alert_where_it_belongs():
    amtool = require_tool("amtool")
    result = subprocess.run(
        [amtool, "check-config", str(ALERTMANAGER_YML)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    routes = {
        # gpulease's own rules: the people on call, and gpulease's record of them.
        "alertname=GpuleaseLeaseBreached": "on-call,gpulease",
        # A node exporter's, a switch's: gpulease's intake, which opens the incidents.
        "alertname=NodeInfinibandLinkDown node=n1": "gpulease",
        "alertname=SwitchPortDown switch=leaf-a": "gpulease",
    }
    for labels, receivers in routes.items():
        check = subprocess.run(
            [
                amtool,
                "config",
                "routes",
                "test",
                f"--config.file={ALERTMANAGER_YML}",
                f"--verify.receivers={receivers}",
                *labels.split(),
            ],
            capture_output=True,
            text=True,
        )
        assert check.returncode == 0, (labels, check.stdout + check.stderr)


def test_the_compose_files_are_wired_to_each_other():
    prometheus = yaml.safe_load(PROMETHEUS_YML.read_text())
    (manager,) = prometheus["alerting"]["alertmanagers"]
    assert manager["static_configs"] == [{"targets": ["alertmanager:9093"]}]
    assert "alertmanager" in COMPOSE["services"]["prometheus"]["depends_on"]
    paths = _alertmanager_service_paths()
    assert paths["config"] == "/etc/alertmanager/alertmanager.yml"
    assert COMPOSE["secrets"]["alertmanager_token"] == {"environment": "ALERTMANAGER_TOKEN"}
    config = yaml.safe_load(ALERTMANAGER_YML.read_text())
    (receiver,) = [r for r in config["receivers"] if r["name"] == "gpulease"]
    (hook,) = receiver["webhook_configs"]
    url = urllib.parse.urlsplit(hook["url"])
    # Caddy's intake listener (deploy/caddy/Caddyfile, CADDY_INTAKE_PORT's default).
    assert (url.scheme, url.netloc) == ("http", "caddy:8081")
    assert "caddy" in COMPOSE["services"]
    assert url.path == "/api/v1/alertmanager/alerts/"
    assert hook["http_config"]["authorization"]["credentials_file"] == paths["token"]
    assert hook["send_resolved"] is True


@pytest.mark.services
def test_a_firing_node_alert_reaches_the_intake_and_opens_an_incident(
    live_server, settings, tmp_path, transactional_db
):
    prometheus_bin = require_tool("prometheus")
    alertmanager_bin = require_tool("prometheus-alertmanager")
    settings.ALERTMANAGER_TOKEN = TOKEN
    node = NodeFactory(hostname="gpu-node-7")
    lease = active(make_lease(nodes=[node], starts_at=timezone.now() - timedelta(days=1)))

    # A rule as a node exporter's would fire, on a node gpulease knows, at once.
    rules = {
        "groups": [
            {
                "name": "node",
                "rules": [
                    {
                        "alert": "NodeInfinibandLinkDown",
                        "expr": "vector(1)",
                        "labels": {"severity": "critical", "node": node.hostname},
                        "annotations": {"summary": "mlx5_0 port 1 went down"},
                    }
                ],
            }
        ]
    }
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    am_port, prom_port = free_port(), free_port()

    config = yaml.safe_load(ALERTMANAGER_YML.read_text())
    config["route"] |= {"group_wait": "0s", "group_interval": "1s"}
    (hook,) = next(r for r in config["receivers"] if r["name"] == "gpulease")["webhook_configs"]
    hook["url"] = live_server.url + reverse("api:alertmanager-alerts")
    hook["http_config"]["authorization"]["credentials_file"] = str(tmp_path / "token")
    (tmp_path / "token").write_text(TOKEN)
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(config))

    prometheus = yaml.safe_load(PROMETHEUS_YML.read_text())
    prometheus["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    prometheus["rule_files"] = [str(tmp_path / "rules.yml")]
    prometheus["scrape_configs"] = []  # web:8000 and worker:9808 are compose names
    prometheus["alerting"]["alertmanagers"][0]["static_configs"] = [
        {"targets": [f"127.0.0.1:{am_port}"]}
    ]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(prometheus))

    env = base_env(tmp_path)
    logs = tmp_path / "logs"
    processes = [
        start(
            "alertmanager",
            [
                alertmanager_bin,
                f"--config.file={tmp_path / 'alertmanager.yml'}",
                f"--storage.path={tmp_path / 'am'}",
                f"--web.listen-address=127.0.0.1:{am_port}",
                "--cluster.listen-address=",  # one instance: no gossip port
            ],
            env=env,
            cwd=tmp_path,
            logs=logs,
        ),
        start(
            "prometheus",
            [
                prometheus_bin,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                # An alert that fires before the Alertmanager is discovered is sent again
                # after this (1 min by default).
                "--rules.alert.resend-delay=1s",
            ],
            env=env,
            cwd=tmp_path,
            logs=logs,
        ),
    ]
    try:

        def opened() -> list[Incident]:
            for process in processes:
                process.alive()
            return list(Incident.objects.filter(lease=lease, pattern="alertmanager"))

        (incident,) = wait_for(opened, seconds=60, what="the alert to open an incident")
    finally:
        for process in processes:
            process.stop()
    assert incident.target == f"NodeInfinibandLinkDown on {node.hostname}"
    assert incident.kind == "link" and incident.state == "open"
    record = ExternalAlert.objects.get()
    assert record.labels["node"] == node.hostname and record.severity == "critical"
    assert list(record.leases.all()) == [lease]
