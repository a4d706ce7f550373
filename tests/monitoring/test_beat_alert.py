"""GpuleaseBeatHeartbeatMissing, evaluated by promtool's rule unit tests on the series a
worker exports (gpulease_celery_tasks_total, monitoring/celery_metrics.py): silent while
beat's heartbeat task runs every minute, firing 2 minutes after five minutes without one,
and firing as well when no worker has ever run one (the series does not exist)."""

import subprocess
from pathlib import Path

import yaml

from tests.conftest import require_tool

RULES = Path(__file__).resolve().parents[2] / "monitoring" / "prometheus" / "rules.yml"
SERIES = (
    'gpulease_celery_tasks_total{task="common.beat_heartbeat",outcome="success",'
    'job="gpulease-celery",instance="worker:9808"}'
)


def _rule() -> dict:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    [rule] = [
        rule
        for group in groups
        for rule in group["rules"]
        if rule.get("alert") == "GpuleaseBeatHeartbeatMissing"
    ]
    return rule


def test_the_alert_fires_when_the_heartbeat_stops_and_when_it_never_ran(tmp_path):
    promtool = require_tool("promtool")
    rule = _rule()
    firing = [{"exp_labels": rule["labels"], "exp_annotations": rule["annotations"]}]
    tests = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "30s",
        "tests": [
            {
                # One heartbeat a minute for 10 minutes, then none (beat stopped at 10m).
                "interval": "1m",
                "input_series": [{"series": SERIES, "values": "0+1x10 10x20"}],
                "alert_rule_test": [
                    {"eval_time": "9m", "alertname": rule["alert"], "exp_alerts": []},
                    # 10m..15m is flat from 15m on: pending, not yet firing.
                    {"eval_time": "16m", "alertname": rule["alert"], "exp_alerts": []},
                    {"eval_time": "17m", "alertname": rule["alert"], "exp_alerts": firing},
                ],
            },
            {
                # Beat back at 22m: heartbeats again, so the alert resolves.
                "interval": "1m",
                "input_series": [{"series": SERIES, "values": "0+1x10 10x10 11+1x10"}],
                "alert_rule_test": [
                    {"eval_time": "19m", "alertname": rule["alert"], "exp_alerts": firing},
                    {"eval_time": "23m", "alertname": rule["alert"], "exp_alerts": []},
                ],
            },
            {
                # A worker that never ran the task exports no such series at all.
                "interval": "1m",
                "input_series": [
                    {
                        "series": SERIES.replace("common.beat_heartbeat", "billing.ingest"),
                        "values": "0+1x10",
                    }
                ],
                "alert_rule_test": [
                    {"eval_time": "1m", "alertname": rule["alert"], "exp_alerts": []},
                    {"eval_time": "3m", "alertname": rule["alert"], "exp_alerts": firing},
                ],
            },
        ],
    }
    path = tmp_path / "beat_alert_test.yml"
    path.write_text(yaml.safe_dump(tests))
    result = subprocess.run(
        [promtool, "test", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
