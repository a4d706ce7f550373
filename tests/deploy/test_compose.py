"""docker-compose.yml refers only to things that exist: each app service's command is a
module, management command or WSGI application of this project, each healthcheck's URL
resolves in the URLconf and each named volume is declared. Images of other projects
(postgres, redis, ...) are taken as they are."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from django.core.management import get_commands
from django.urls import Resolver404, resolve

from config.celery import app as celery_app
from tests.deploy.recipe import (
    MissingVariable,
    interpolate,
    read_env_file,
    readme_block,
    run_block,
    variables,
)
from tests.deploy.test_production_stack import DOTENV_RECIPE

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES = COMPOSE["services"]
APP_SERVICES = {name: s for name, s in SERVICES.items() if "build" in s}
DOCKERFILE_CMD = ["gunicorn", "config.wsgi:application"]  # CMD, when a service sets none


def _words(command) -> list[str]:  # type: ignore[no-untyped-def]
    if command is None:
        return []
    return list(command) if isinstance(command, list) else shlex.split(command)


def _healthcheck_words(test: list[str] | str) -> list[str]:
    if isinstance(test, str):
        return shlex.split(test)
    kind, *rest = test
    if kind == "CMD-SHELL":
        return shlex.split(" ".join(rest))
    assert kind == "CMD", test
    return rest


def check_command(words: list[str]) -> None:
    """The command runs something of this project that exists."""
    if not words:
        words = DOCKERFILE_CMD
    program, *args = words
    if program == "python" and args[:1] == ["manage.py"]:
        assert args[1] in get_commands(), f"manage.py {args[1]}"
    elif program == "python" and args[:1] == ["-m"]:
        importlib.import_module(args[1])
    elif program == "python" and args[:1] == ["-c"]:
        compile(args[1], "<healthcheck>", "exec")
    elif program == "celery":
        assert args[:2] == ["-A", "config"], words
        assert importlib.import_module("config").celery_app is celery_app
        command = [word for word in args[2:] if word not in ("--quiet", "-q")]
        assert command[0] in ("worker", "beat", "inspect"), words
    elif program == "gunicorn":
        module, _, attribute = args[0].partition(":")
        assert callable(getattr(importlib.import_module(module), attribute))
    else:
        pytest.fail(f"unknown program in {words}")


@pytest.mark.parametrize("name", sorted(APP_SERVICES))
def test_app_service_commands_exist(name):
    check_command(_words(APP_SERVICES[name].get("command")))


@pytest.mark.parametrize(
    "name", sorted(name for name, s in APP_SERVICES.items() if "healthcheck" in s)
)
def test_app_healthchecks_run_existing_commands_and_urls(name):
    words = _healthcheck_words(APP_SERVICES[name]["healthcheck"]["test"])
    check_command(words)
    for url in re.findall(r"https?://[^\s'\"]+", " ".join(words)):
        parts = urlsplit(url)
        assert parts.port == 8000  # where the Dockerfile's gunicorn listens
        try:
            resolve(parts.path)
        except Resolver404:
            pytest.fail(f"{name}'s healthcheck asks for {url}, which no route answers")


def test_long_running_app_services_have_healthchecks():
    for name in ("web", "worker", "beat"):
        assert "healthcheck" in SERVICES[name], name


def test_named_volumes_are_declared_and_the_keys_are_shared():
    declared = set(COMPOSE.get("volumes") or {})
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume["source"]
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which is missing"
            else:
                assert source in declared, f"{name}'s volume {source} is not declared"
    # Every app container sees the same key files, on the shared volume.
    for name, service in APP_SERVICES.items():
        env = service["environment"]
        mounts = [v.split(":")[1] for v in service["volumes"] if v.startswith("keys:")]
        assert mounts, name
        for variable in ("AUDIT_SIGNING_KEY", "PROBE_SSH_KEY"):
            assert env[variable].startswith(mounts[0] + "/"), (name, variable)


def test_every_depends_on_names_a_service():
    for name, service in SERVICES.items():
        for other in service.get("depends_on", {}):
            assert other in SERVICES, f"{name} depends on unknown {other}"


def test_the_readme_env_recipe_sets_every_variable_the_file_requires(tmp_path):
    """The README's .env recipe, run as written, leaves nothing for Compose to refuse or
    to fill with an empty value."""
    run_block(readme_block(DOTENV_RECIPE), tmp_path)
    dotenv = read_env_file(tmp_path / ".env")
    assert oct((tmp_path / ".env").stat().st_mode & 0o777) == "0o600"
    used = variables(COMPOSE)
    required = {name for name, operator in used if operator in (None, ":?", "?")}
    assert required <= {name for name, value in dotenv.items() if value}, required - set(dotenv)
    assert {"SECRET_KEY", "POSTGRES_PASSWORD", "ALERTMANAGER_TOKEN"} <= required
    for name, service in SERVICES.items():
        for key, value in (service.get("environment") or {}).items():
            try:
                interpolate(str(value), dotenv)
            except MissingVariable as missing:
                pytest.fail(f"{name}.{key}: {missing}")
    # Nothing in .env that the compose file does not read.
    assert set(dotenv) <= {name for name, _ in used}


def test_only_the_tls_front_publishes_web_ports():
    published = {name: s.get("ports", []) for name, s in SERVICES.items() if s.get("ports")}
    assert published.pop("caddy") == ["80:80", "443:443"]
    assert "web" not in published
    # Everything else only on the host's loopback (Prometheus, Alertmanager, Grafana).
    assert all(port.startswith("127.0.0.1:") for ports in published.values() for port in ports)
