"""Production refuses to start without its audit signing key and probe SSH key; local use
keeps making them under var/; `python -m config.keys` provisions them without settings."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(env_overrides, *args):  # type: ignore[no-untyped-def]
    env = {**os.environ, **env_overrides}
    for variable in ("AUDIT_SIGNING_KEY", "PROBE_SSH_KEY"):
        if variable not in env_overrides:
            env.pop(variable, None)
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _production(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "DJANGO_DEBUG": "false",
        "SECRET_KEY": "k" * 64,
        "ALLOWED_HOSTS": "gpulease.example.cn",
        "GPULEASE_VAR_DIR": str(tmp_path / "var"),
        **extra,
    }


def test_production_refuses_to_start_without_the_keys(tmp_path):
    keys = {
        "AUDIT_SIGNING_KEY": str(tmp_path / "keys/audit.pem"),
        "PROBE_SSH_KEY": str(tmp_path / "keys/probe"),
    }
    result = _run(_production(tmp_path, **keys), "manage.py", "check", "--deploy")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"AUDIT_SIGNING_KEY ({keys['AUDIT_SIGNING_KEY']})" in result.stderr
    assert f"PROBE_SSH_KEY ({keys['PROBE_SSH_KEY']})" in result.stderr
    assert not (tmp_path / "keys").exists()  # and made none of its own

    # Unset, the defaults under the (unpersisted) var dir are just as missing.
    result = _run(_production(tmp_path), "manage.py", "check")
    assert result.returncode != 0
    assert "AUDIT_SIGNING_KEY" in result.stderr and "PROBE_SSH_KEY" in result.stderr

    # One of the two is not enough.
    created = _run(keys, "-m", "config.keys", "create")
    assert created.returncode == 0, created.stderr
    os.unlink(keys["PROBE_SSH_KEY"])
    result = _run(_production(tmp_path, **keys), "manage.py", "check")
    assert "PROBE_SSH_KEY" in result.stderr and "AUDIT_SIGNING_KEY (" not in result.stderr


def test_provisioned_keys_start_production_and_are_never_replaced(tmp_path):
    keys = {
        "AUDIT_SIGNING_KEY": str(tmp_path / "keys/audit/ed25519.pem"),
        "PROBE_SSH_KEY": str(tmp_path / "keys/ssh/probe_ed25519"),
    }
    first = _run(keys, "-m", "config.keys", "create")
    assert first.returncode == 0, first.stderr
    assert first.stdout.count("created") == 2
    assert "ssh-ed25519 " in first.stdout
    audit = Path(keys["AUDIT_SIGNING_KEY"]).read_bytes()
    assert oct(Path(keys["AUDIT_SIGNING_KEY"]).stat().st_mode)[-3:] == "600"
    assert oct(Path(keys["PROBE_SSH_KEY"]).stat().st_mode)[-3:] == "600"

    again = _run(keys, "-m", "config.keys", "create")
    assert again.stdout.count("kept") == 2
    assert Path(keys["AUDIT_SIGNING_KEY"]).read_bytes() == audit
    assert _run(keys, "-m", "config.keys", "check").returncode == 0

    result = _run(_production(tmp_path, **keys), "manage.py", "check", "--deploy")
    assert result.returncode == 0, result.stderr
    # Every process that is handed the same paths signs with the same key.
    show = _run(_production(tmp_path, **keys), "manage.py", "audit_key", "--json")
    assert show.returncode == 0, show.stderr
    assert keys["AUDIT_SIGNING_KEY"] in show.stdout


def test_check_names_a_missing_key(tmp_path):
    keys = {"AUDIT_SIGNING_KEY": str(tmp_path / "a.pem"), "PROBE_SSH_KEY": str(tmp_path / "p")}
    result = _run(keys, "-m", "config.keys", "check")
    assert result.returncode == 1
    assert "missing: AUDIT_SIGNING_KEY" in result.stderr


def test_local_use_still_makes_the_keys_on_first_use(tmp_path):
    env = {"DJANGO_DEBUG": "true", "GPULEASE_VAR_DIR": str(tmp_path)}
    result = _run(env, "manage.py", "probe_key")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "ssh/probe_ed25519").exists()
    result = _run(env, "manage.py", "audit_key")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "audit/ed25519.pem").exists()
