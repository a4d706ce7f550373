"""The hooks a lower app offers and an upper app fills in from ``AppConfig.ready()``
(docs/architecture-layers.md, "How a lower app is extended from above"): billing's receivers
are registered in every kind of process, and a lower app refuses to go on without them
rather than silently doing less."""

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import hooks as benchmarks_hooks
from billing.ingest import recompute_hours
from billing.metering import recent_samples
from leases.choices import ProbeKind
from leases.models import Lease
from telemetry import hooks as telemetry_hooks

ROOT = Path(__file__).resolve().parent.parent

# What a process lists: the receiver of each hook, by module and name.
LIST = (
    "from benchmarks import hooks as b; from telemetry import hooks as t; "
    "print([f'{f.__module__}.{f.__name__}' for f in t.unavailable_hours_listeners()]); "
    "s = b.recent_traffic_source(); print(s and f'{s.__module__}.{s.__name__}')"
)
EXPECTED = "['billing.ingest.recompute_hours']\nbilling.metering.recent_samples\n"


def test_billing_fills_in_the_hooks_of_telemetry_and_benchmarks():
    assert telemetry_hooks.unavailable_hours_listeners() == [recompute_hours]
    assert benchmarks_hooks.recent_traffic_source() is recent_samples


@pytest.mark.parametrize(
    "argv",
    [
        # a management command (and the demo, the migrations, the shell)
        ["manage.py", "shell", "--no-imports", "-c", LIST],
        # gunicorn's worker loads the WSGI application
        ["-c", f"import config.wsgi; {LIST}"],
        # a Celery worker or beat: the Django fixup sets Django up as it imports the tasks
        ["-c", f"from config.celery import app; app.loader.import_default_modules(); {LIST}"],
    ],
    ids=["management-command", "web", "celery"],
)
def test_every_kind_of_process_registers_them(argv):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    done = subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith(EXPECTED), done.stdout


def test_without_a_listener_telemetry_refuses_to_store_unavailable_hours(monkeypatch):
    """Else billing's availability minutes would silently stop hearing telemetry."""
    monkeypatch.setattr(telemetry_hooks, "_hours_listeners", [])
    with pytest.raises(RuntimeError, match=r"unavailable hours \(billing.apps\)"):
        telemetry_hooks.unavailable_hours(
            lease=Lease(), kind=ProbeKind.LINK, hours=[datetime(2026, 11, 10, 9, tzinfo=UTC)]
        )


def test_without_the_traffic_the_dispatcher_refuses_to_judge_a_lease_idle(monkeypatch):
    """Else every busy lease would be probed as if idle."""
    monkeypatch.setattr(benchmarks_hooks, "_recent_traffic", [])
    with pytest.raises(RuntimeError, match=r"recent traffic \(billing.apps\)"):
        benchmarks_hooks.recent_traffic(datetime(2026, 11, 10, 9, tzinfo=UTC))


def test_a_listener_registered_twice_hears_each_poll_once():
    """``ready()`` may run more than once in a process (tests, ``django.setup()`` again)."""
    before = telemetry_hooks.unavailable_hours_listeners()
    telemetry_hooks.on_unavailable_hours(recompute_hours)
    assert telemetry_hooks.unavailable_hours_listeners() == before == [recompute_hours]
