"""`make run` path: with no configuration, gpulease runs on a SQLite file and a broker
that needs no server; migrate and the demo work there, and SQLite also refuses a node in
two overlapping leases (triggers instead of PostgreSQL's exclusion constraint)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DOUBLE_LEASE = """
from django.db import IntegrityError, transaction
from leases.models import Lease, NodeAssignment
holder = NodeAssignment.objects.filter(void=False, assigned_until__isnull=True).first()
other = Lease.objects.exclude(pk=holder.lease_id).first()
try:
    with transaction.atomic():
        NodeAssignment.objects.create(lease=other, node=holder.node,
                                      assigned_from=holder.assigned_from)
    print("ACCEPTED")
except IntegrityError as error:
    print("REFUSED", error)
"""


def _manage(env, *args):
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_sqlite_and_filesystem_broker_defaults(tmp_path):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND"}
    }
    env["GPULEASE_VAR_DIR"] = str(tmp_path)
    for step in (("migrate", "--no-input"), ("demo",), ("demo",)):
        result = _manage(env, *step)
        assert result.returncode == 0, result.stderr
    assert (tmp_path / "gpulease.sqlite3").exists()
    assert "0 objects created this run" in result.stdout

    result = _manage(env, "shell", "--no-imports", "-c", DOUBLE_LEASE)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("REFUSED node_not_leased_twice"), result.stdout

    result = _manage(
        env,
        "shell",
        "--no-imports",
        "-c",
        "from django.conf import settings; print(settings.CELERY_BROKER_URL)",
    )
    assert result.stdout.strip() == "filesystem://"
    assert (tmp_path / "broker" / "queue").is_dir()


def test_worker_consumes_from_the_filesystem_broker(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(GPULEASE_VAR_DIR=str(tmp_path), CELERY_RESULT_BACKEND=f"file://{results}")
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        result = _manage(
            env,
            "shell",
            "--no-imports",
            "-c",
            "from common.tasks import ping; print(ping.delay('fs').get(timeout=90))",
        )
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pong:fs"
