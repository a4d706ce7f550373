"""The compose stack's processes, run directly (no Docker engine here) as docker-compose.yml
describes them, with the .env docs/operators/deploy.md's recipe writes: Caddy with
deploy/caddy/Caddyfile in front of the Dockerfile's own gunicorn command (3 workers), the
production settings unchanged (DJANGO_DEBUG=false, SSL redirect, secure cookies, HSTS,
LOG_FORMAT=json), and the compose worker and beat commands. Only what must differ on one
host without Docker is changed: addresses (the test database and Redis, free ports) and
the state folder.

- https://localhost answers with a certificate from Caddy's own CA, made on first start:
  the portal's redirect to its login page, the login page, a login; plain HTTP is
  redirected to HTTPS, never to itself.
- Caddy's listener for Alertmanager's webhook reaches the intake (and nothing else).
- Every line that web (gunicorn's own and Django's), the worker and beat write is one JSON
  object with a UTC time; every request writes one access line with its id, route,
  status, latency, user and tenants; no secret of a query string is written anywhere."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from django.conf import global_settings

from accounts import services as tokens
from tests.conftest import require_tool
from tests.deploy.conftest import STATE_DIR
from tests.deploy.image_context import stages
from tests.deploy.processes import (
    ROOT,
    Process,
    base_env,
    database_url,
    free_port,
    log_lines,
    program,
    start,
    wait_for,
)
from tests.deploy.recipe import (
    COMPOSE,
    read_env_file,
    readme_block,
    run_block,
    service_environment,
)
from tests.factories import MembershipFactory, UserFactory

pytestmark = pytest.mark.services
DOTENV_RECIPE = "# .env beside docker-compose.yml: secrets generated, GPULEASE_HOST to edit"
IMAGE = stages(ROOT / "Dockerfile")[-1]
# The caddy image's own command (its CMD; the compose service sets none) and where the
# compose file mounts the Caddyfile.
CADDY_CMD = ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]


def _redis_url() -> str:
    import os

    return os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@dataclass
class Stack:
    dotenv: dict[str, str]
    app_env: dict[str, str]  # web's, worker's and beat's environment on this host
    logs: Path
    web: Process
    caddy: Process
    https: int
    http: int
    intake: int
    context: ssl.SSLContext
    others: list[Process] = field(default_factory=list)

    @property
    def processes(self) -> list[Process]:
        return [self.web, self.caddy, *self.others]

    def url(self, path: str) -> str:
        return f"https://localhost:{self.https}{path}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # a redirect is an answer to look at, not to follow


def fetch(
    stack: Stack, url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, Any, bytes]:
    opener = urllib.request.build_opener(
        urllib.request.HTTPSHandler(context=stack.context), _NoRedirect
    )
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def _on_this_host(value: str, production_files: dict[str, Any]) -> str:
    return value.replace(STATE_DIR, str(production_files["state"])).replace(
        "/app/static", str(production_files["static"])
    )


@pytest.fixture(scope="module")
def dotenv(tmp_path_factory) -> dict[str, str]:
    """The .env the deploy page's recipe writes, run as an operator runs it."""
    folder = tmp_path_factory.mktemp("dotenv")
    run_block(readme_block(DOTENV_RECIPE), folder)
    return read_env_file(folder / ".env")


@pytest.fixture(scope="module")
def stack(dotenv, production_files, django_db_setup, tmp_path_factory):
    require_tool("caddy")
    base = tmp_path_factory.mktemp("stack")
    logs = base / "logs"
    redis = _redis_url()
    compose_app = service_environment("web", dotenv)
    # The production settings this test is about, as the compose file sets them.
    assert compose_app["DJANGO_DEBUG"] == "false"
    assert compose_app["SECURE_SSL_REDIRECT"] == "true"
    assert compose_app["LOG_FORMAT"] == "json"
    assert compose_app["ALLOWED_HOSTS"] == dotenv["GPULEASE_HOST"] == "localhost"
    image_env = {k: _on_this_host(v, production_files) for k, v in IMAGE.env.items()}
    app_env = {
        **image_env,
        **{k: _on_this_host(v, production_files) for k, v in compose_app.items()},
        # Addresses of this host instead of the compose services'.
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": redis,
        "CELERY_RESULT_BACKEND": redis,
        "CACHE_URL": redis,
        "CELERY_METRICS_PORT": str(free_port()),
    }
    web_port = free_port()
    # compose's web command (the Dockerfile's CMD bound to the proxy network), on this host.
    args = list(COMPOSE["services"]["web"].get("command") or IMAGE.cmd)
    args[args.index("--bind") + 1] = f"127.0.0.1:{web_port}"
    args[args.index("--workers") + 1] = "3"
    web_env = base_env(base / "web") | app_env | {"PROMETHEUS_MULTIPROC_DIR": str(base / "m")}
    web = start("web", program(args), env=web_env, cwd=ROOT, logs=logs)

    caddy_service = COMPOSE["services"]["caddy"]
    assert "./deploy/caddy/Caddyfile:/etc/caddy/Caddyfile:ro" in caddy_service["volumes"]
    caddy_env = service_environment("caddy", dotenv)
    assert caddy_env["GPULEASE_UPSTREAM"] == "web:8000"
    assert caddy_env["CADDY_TLS"] == "internal"  # the default: Caddy's own CA
    https, http, intake = free_port(), free_port(), free_port()
    caddy_env |= {
        "GPULEASE_UPSTREAM": f"127.0.0.1:{web_port}",
        "CADDY_HTTPS_PORT": str(https),
        "CADDY_HTTP_PORT": str(http),
        "CADDY_INTAKE_PORT": str(intake),
        # The image's /data and /config volumes.
        "XDG_DATA_HOME": str(base / "caddy-data"),
        "XDG_CONFIG_HOME": str(base / "caddy-config"),
    }
    caddy_args = [*CADDY_CMD]
    caddy_args[caddy_args.index("--config") + 1] = str(ROOT / "deploy/caddy/Caddyfile")
    caddy = start(
        "caddy", caddy_args, env=base_env(base / "caddy") | caddy_env, cwd=base, logs=logs
    )
    # The certificate is made on first start, by Caddy's own CA: the client trusts its root.
    root = base / "caddy-data/caddy/pki/authorities/local/root.crt"
    stack = Stack(
        dotenv, app_env, logs, web, caddy, https, http, intake, ssl.create_default_context()
    )
    try:
        wait_for(lambda: web.alive() and caddy.alive() and root.exists(), seconds=60, what="CA")
        stack.context = ssl.create_default_context(cafile=str(root))

        def answers() -> bool:
            web.alive()
            caddy.alive()
            try:
                return fetch(stack, stack.url("/healthz"))[0] == 200
            except (OSError, ssl.SSLError):
                return False

        wait_for(answers, seconds=90, what="https://localhost/healthz through Caddy")
        yield stack
    finally:
        for process in stack.processes:
            process.stop()


def _cookies(headers: Any) -> dict[str, str]:
    jar = {}
    for header in headers.get_all("Set-Cookie") or []:
        name, _, rest = header.partition("=")
        jar[name] = rest.split(";", 1)[0]
    return jar


def test_https_localhost_serves_the_portal_with_the_production_settings(
    stack, transactional_db, settings
):
    # The stack's gunicorn checks the login's password with production's hashers (Django's
    # default list), not the fast one the tests hash with (tests/conftest.py).
    settings.PASSWORD_HASHERS = global_settings.PASSWORD_HASHERS
    # The portal's home sends an anonymous visitor to the login page, on the same origin.
    status, headers, _ = fetch(stack, stack.url("/"))
    assert (status, headers["Location"]) == (302, "/accounts/login/?next=/")
    assert headers["Strict-Transport-Security"].startswith("max-age=31536000")
    status, headers, page = fetch(stack, stack.url("/accounts/login/?next=/"))
    assert status == 200, page[:500]
    assert b'name="csrfmiddlewaretoken"' in page
    cookies = _cookies(headers)
    assert "Secure" in headers["Set-Cookie"]  # CSRF_COOKIE_SECURE, over HTTPS

    # Plain HTTP goes to HTTPS (Caddy), the same host and path: never to itself. (Its
    # port is HTTPS's own, 443: here the test's HTTPS port is another.)
    opener = urllib.request.build_opener(_NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as redirect:
        opener.open(f"http://localhost:{stack.http}/accounts/login/", timeout=10)
    assert redirect.value.code == 308
    assert redirect.value.headers["Location"] == "https://localhost/accounts/login/"

    # A login: CSRF and secure cookies work behind the proxy (Origin = the HTTPS host).
    user = UserFactory()
    MembershipFactory(user=user)
    token = page.split(b'name="csrfmiddlewaretoken" value="', 1)[1].split(b'"', 1)[0].decode()
    body = urllib.parse.urlencode(
        {"username": user.username, "password": "pw-for-tests", "csrfmiddlewaretoken": token}
    ).encode()
    status, headers, answer = fetch(
        stack,
        stack.url("/accounts/login/?next=/"),
        data=body,
        headers={
            "Cookie": f"csrftoken={cookies['csrftoken']}",
            "Origin": f"https://localhost:{stack.https}",
            "Referer": stack.url("/accounts/login/"),
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert (status, headers["Location"]) == (302, "/"), answer[:500]
    session = _cookies(headers)["sessionid"]
    status, _, home = fetch(stack, stack.url("/"), headers={"Cookie": f"sessionid={session}"})
    assert status == 200, home[:500]
    assert user.username.encode() in home


def test_alertmanagers_listener_reaches_the_intake_and_nothing_else(stack, transactional_db):
    url = f"http://127.0.0.1:{stack.intake}/api/v1/alertmanager/alerts/"
    body = json.dumps({"version": "4", "status": "firing", "alerts": []}).encode()
    headers = {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=body, headers=headers)
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 401  # not a redirect to HTTPS, not a bad host: the token
    bearer = {"Authorization": f"Bearer {stack.dotenv['ALERTMANAGER_TOKEN']}"}
    request = urllib.request.Request(url, data=body, headers=headers | bearer)
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert (answer.status, json.load(answer)["received"]) == (200, 0)
    with pytest.raises(urllib.error.HTTPError) as other:
        urllib.request.urlopen(f"http://127.0.0.1:{stack.intake}/accounts/login/", timeout=10)
    assert other.value.code == 404


SECRETS = {
    "password": "hunter2-" + uuid.uuid4().hex,
    "api_key": "ak-" + uuid.uuid4().hex,
    "X-Amz-Signature": "sig" + uuid.uuid4().hex,
}


def test_every_line_of_web_worker_and_beat_is_a_json_log_line(stack, transactional_db):
    """Last in this module: it stops the stack to read everything the processes wrote."""
    member = MembershipFactory()
    issued = tokens.issue_token(user=member.user, scopes=["read"])
    secret_query = urllib.parse.urlencode({**SECRETS, "token": issued.secret})
    bearer = {"Authorization": f"Bearer {issued.secret}"}
    spoofed = {"X-Forwarded-For": "203.0.113.7"}  # a client's own claim: never believed

    # The worker and beat as the compose file runs them; the worker on a queue of its own
    # (beat's tasks go to the default queue, which other tests' workers consume).
    queue = f"logs-{uuid.uuid4().hex[:8]}"
    worker_env = base_env(stack.logs / "worker") | stack.app_env
    worker_env["PROMETHEUS_MULTIPROC_DIR"] = str(stack.logs / "worker-metrics")
    (stack.logs / "worker-metrics").mkdir(parents=True)
    compose_worker = COMPOSE["services"]["worker"]["command"].split()
    compose_beat = COMPOSE["services"]["beat"]["command"].split()
    worker = start(
        "worker",
        program([*compose_worker, "-n", f"{queue}@%h", "-Q", queue, "--concurrency=1"]),
        env=worker_env,
        cwd=ROOT,
        logs=stack.logs,
    )
    stack.others.append(worker)
    beat = start(
        "beat",
        program(compose_beat),
        env=base_env(stack.logs / "beat") | stack.app_env,
        cwd=ROOT,
        logs=stack.logs,
    )
    stack.others.append(beat)

    asked = {
        # (what, path, headers): answers through Caddy, each with its request id.
        "anonymous page": ("/accounts/login/?" + secret_query, spoofed),
        "token user": ("/api/v1/leases/", bearer),
        "token in the query": ("/api/v1/leases/?" + secret_query, {}),
        "not found": ("/no-such-page/?" + secret_query, {}),
        "bad token": ("/api/v1/leases/", {"Authorization": "Bearer gpl_0123abcd_" + "x" * 43}),
        "ready": ("/readyz", {}),  # database, cache and broker answer; beat is not web's concern
    }
    answers = {}
    for what, (path, headers) in asked.items():
        status, response_headers, _ = fetch(stack, stack.url(path), headers=headers)
        answers[what] = (status, response_headers["X-Request-ID"])
    assert {what: status for what, (status, _) in answers.items()} == {
        "anonymous page": 200,
        "token user": 200,
        "token in the query": 401,  # a query string is no way to authenticate
        "not found": 404,
        "bad token": 401,
        "ready": 200,
    }

    celery = Celery(broker=stack.app_env["CELERY_BROKER_URL"], set_as_current=False)
    wait_for(lambda: worker.alive() and "ready." in worker.output(), seconds=90, what="worker")
    # A task whose argument and result look like a secret: the worker's lines redact both.
    celery.send_task("common.ping", args=[f"password={SECRETS['password']}"], queue=queue)
    wait_for(lambda: "succeeded" in worker.output(), seconds=60, what="common.ping to run")
    wait_for(lambda: beat.alive() and "Starting..." in beat.output(), seconds=60, what="beat")

    exits = {process.name: process.stop() for process in stack.processes}
    with celery.connection_for_write() as connection:
        connection.default_channel.queue_purge("celery")  # what beat sent meanwhile
    assert exits == {"web": 0, "caddy": 0, "worker": 0, "beat": 0}

    lines = log_lines(stack.web, worker, beat)
    access = [line for line in lines if line["logger"] == "gunicorn.access"]
    by_id = {}
    for line in access:
        by_id.setdefault(line["request_id"], []).append(line)
    for what, (status, request_id) in answers.items():
        (line,) = by_id[request_id]  # one access line per request
        assert (line["status"], line["method"]) == (status, "GET"), what
        assert isinstance(line["latency_ms"], float) and 0 <= line["latency_ms"] < 30_000
        assert line["client"] == "127.0.0.1", what  # Caddy's X-Forwarded-For, not the claim
    anonymous = by_id[answers["anonymous page"][1]][0]
    assert (anonymous["route"], anonymous["user_id"], anonymous["tenant_ids"]) == (
        "portal:login",
        None,
        [],
    )
    user_line = by_id[answers["token user"][1]][0]
    assert (user_line["route"], user_line["user_id"], user_line["tenant_ids"]) == (
        "api:lease-list",
        member.user.pk,
        [member.tenant_id],
    )
    assert by_id[answers["not found"][1]][0]["route"] == "unmatched"
    assert by_id[answers["ready"][1]][0]["route"] == "ready"
    # The fixture's /healthz while it waited for the stack wrote access lines too.
    assert len(access) > len(answers)
    assert all(line["request_id"] not in ("", "-") for line in access)

    # Nothing went wrong (django.request would log a 5xx as an error).
    errors = [line for line in lines if line["level"] in ("ERROR", "CRITICAL")]
    assert [(line["logger"], line["message"]) for line in errors] == []
    # gunicorn's own lines, Django's, the worker's (a task's too) and beat's are all there.
    messages = [(line["_process"], line["logger"], line["message"]) for line in lines]
    assert ("web", "gunicorn.error", "Shutting down: Master") in messages
    assert any(m[1] == "django.request" and "Not Found" in m[2] for m in messages)
    assert any(m[0] == "worker" and m[2].endswith(" ready.") for m in messages)
    assert any(m[1] == "celery.app.trace" and "common.ping" in m[2] for m in messages)
    assert ("worker", "celery.apps.worker", "Warm shutdown on SIGTERM") in messages
    assert any(m[0] == "beat" and m[2] == "beat: Starting..." for m in messages)

    # No secret anywhere: not in an access line, not in django.request's, not in Caddy's.
    written = "".join(process.output() for process in stack.processes)
    for secret in [*SECRETS.values(), issued.secret.split("_", 2)[2]]:
        assert secret not in written
    assert "token=***" in written and "password=***" in written
