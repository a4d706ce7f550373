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
from django.conf import settings
from django.core.management import get_commands
from django.urls import Resolver404, resolve

from config.celery import app as celery_app
from tests.deploy.image_context import stages
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


def test_every_app_container_keeps_the_month_archives_on_one_volume():
    """Archiving drops a month's partitions: the archive file is the only copy, so it must
    outlive the container that wrote it and be readable by the one that builds a bundle."""
    default = Path("/var/lib/gpulease") / Path(settings.ARCHIVE_DIR).name
    for name, service in APP_SERVICES.items():
        assert "ARCHIVE_DIR" not in service["environment"], name  # the default below
        mounts = dict(v.split(":")[:2] for v in service["volumes"])
        assert mounts.get("archive") == str(default), name
    assert "archive" in COMPOSE["volumes"]


def test_every_depends_on_names_a_service():
    for name, service in SERVICES.items():
        for other in service.get("depends_on", {}):
            assert other in SERVICES, f"{name} depends on unknown {other}"


def test_the_readme_env_recipe_sets_every_variable_the_file_requires(tmp_path):
    """The .env recipe of docs/operators/deploy.md, run as written, leaves nothing for
    Compose to refuse or to fill with an empty value."""
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


def _networks(service) -> dict:  # type: ignore[no-untyped-def]
    networks = service.get("networks") or {}
    return {name: {} for name in networks} if isinstance(networks, list) else networks


def test_gunicorn_listens_only_on_the_internal_network_it_shares_with_caddy():
    declared = COMPOSE["networks"]
    for name, service in SERVICES.items():
        assert _networks(service), f"{name} names no network"
        assert set(_networks(service)) <= set(declared), name
    web = SERVICES["web"]
    assert "ports" not in web and web["expose"] == ["8000"]
    # The Dockerfile's command, bound to web's alias in `proxy` instead of 0.0.0.0.
    image_cmd = stages(ROOT / "Dockerfile")[-1].cmd
    assert image_cmd[image_cmd.index("--bind") + 1] == "0.0.0.0:8000"
    bind = web["command"].index("--bind") + 1
    assert web["command"][:bind] + web["command"][bind + 1 :] == [
        word for i, word in enumerate(image_cmd) if i != image_cmd.index("--bind") + 1
    ]
    assert web["command"][bind] == "web-proxy:8000"
    assert _networks(web)["proxy"]["aliases"] == ["web-proxy"]
    assert "web-proxy:8000/readyz" in " ".join(web["healthcheck"]["test"])
    # `proxy` is internal, and only Caddy and Prometheus (scraping /metrics) join web there;
    # web's other networks give no one a way to its port: the data stores and the app
    # services on `backend` (it listens elsewhere), web alone on `outbound`.
    assert declared["proxy"] == {"internal": True}
    on_proxy = {name for name, s in SERVICES.items() if "proxy" in _networks(s)}
    assert on_proxy == {"web", "caddy", "prometheus"}
    assert set(_networks(web)) == {"proxy", "backend", "outbound"}
    assert {name for name, s in SERVICES.items() if "outbound" in _networks(s)} == {"web"}
    assert "default" not in _networks(web)
    # Caddy and Prometheus reach web by its name: they share only `proxy` with it, so the
    # name resolves to the address gunicorn listens on.
    assert SERVICES["caddy"]["environment"]["GPULEASE_UPSTREAM"] == "web:8000"
    for name in ("caddy", "prometheus"):
        assert set(_networks(SERVICES[name])) & set(_networks(web)) == {"proxy"}, name
    # PostgreSQL and Redis only on the internal `backend`.
    assert declared["backend"] == {"internal": True}
    for name in ("postgres", "redis"):
        assert set(_networks(SERVICES[name])) == {"backend"}, name
