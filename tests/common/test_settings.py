import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(env_overrides, *args):
    env = {**os.environ, **env_overrides}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    # Production's keys, provisioned as docs/operators/keys.md says.
    keys = {
        "AUDIT_SIGNING_KEY": str(tmp_path / "keys/audit/ed25519.pem"),
        "PROBE_SSH_KEY": str(tmp_path / "keys/ssh/probe_ed25519"),
    }
    created = subprocess.run(
        [sys.executable, "-m", "config.keys", "create"],
        cwd=ROOT,
        env={**os.environ, **keys},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert created.returncode == 0, created.stderr
    result = _run(
        {
            "DJANGO_DEBUG": "false",
            "SECRET_KEY": "x" * 64 + "production-like-key-with-entropy",
            "ALLOWED_HOSTS": "gpulease.example.cn",
            "GPULEASE_VAR_DIR": str(tmp_path),
            **keys,
        },
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_secret_key_is_required_when_debug_is_off(tmp_path):
    env = {"DJANGO_DEBUG": "false", "SECRET_KEY": "", "GPULEASE_VAR_DIR": str(tmp_path)}
    result = _run(env, "check")
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DJANGO_DEBUG is false." in result.stderr


def test_local_secret_key_is_generated_once_and_kept(tmp_path):
    env = {"SECRET_KEY": "", "GPULEASE_VAR_DIR": str(tmp_path)}
    code = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = _run(env, "shell", "--no-imports", "-c", code).stdout.strip()
    second = _run(env, "shell", "--no-imports", "-c", code).stdout.strip()
    assert len(first) >= 50
    assert first == second == (tmp_path / "secret_key").read_text()
