"""The OpenAPI schema generates without warnings, the docs are served with gpulease's own
assets, and schemathesis, driven by that schema against the WSGI app with a provider token
and a tenant token, with valid and invalid inputs, finds no 5xx and no response that
violates the schema."""

import itertools
import re

import pytest
import schemathesis
from django.contrib.staticfiles import finders
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from hypothesis.errors import Unsatisfiable
from rest_framework.throttling import SimpleRateThrottle
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from accounts import services as tokens
from accounts.choices import Role
from config.wsgi import application

pytestmark = pytest.mark.django_db

EXAMPLES_PER_OPERATION = 10


def test_schema_generates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/v1/probe-runs/{id}/raw/" in text
    assert "bearerFormat: gpl_<prefix>_<secret>" in text


def test_schema_and_docs_are_served_without_a_cdn(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    assert schema.json()["openapi"].startswith("3.")
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn." not in html and "unpkg" not in html
    assets = re.findall(r'(?:src|href)="/static/([^"]+)"', html)
    assert any("swagger-ui" in asset for asset in assets)
    for asset in assets:
        assert finders.find(asset), asset
    assert client.get("/api/redoc/").status_code == 200


def _object_ids(world) -> dict[str, int]:  # type: ignore[no-untyped-def]
    side = world.alpha
    return {
        "/api/v1/tenants/": side.tenant.pk,
        "/api/v1/sites/": side.nodes[0].leaf_switch.fabric.site_id,
        "/api/v1/fabrics/": side.nodes[0].leaf_switch.fabric_id,
        "/api/v1/nodes/": side.nodes[0].pk,
        "/api/v1/leases/": side.lease.pk,
        "/api/v1/probe-runs/": side.runs[0].pk,
        "/api/v1/incidents/": side.incident.pk,
        "/api/v1/invoices/": side.invoice.pk,
        "/api/v1/api-tokens/": side.token.pk,
    }


@pytest.fixture
def keep_test_connection():
    """Django's handler closes the database connection when a request ends, which would end
    the test's transaction; the test client avoids it the same way."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def _exerciser(strategy, secret: str):  # type: ignore[no-untyped-def]
    """A Hypothesis test of one operation with one token; returns how many calls it made."""
    calls = []

    @given(case=strategy)
    @hypothesis_settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def exercise(case):  # type: ignore[no-untyped-def]
        headers = {"Authorization": f"Bearer {secret}", "Accept-Language": "en"}
        response = case.call(headers=headers)
        calls.append(response.status_code)
        case.validate_response(response, checks=[not_a_server_error, response_schema_conformance])

    def run() -> int:
        exercise()
        return len(calls)

    return run


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    world, monkeypatch, keep_test_connection
):
    monkeypatch.setattr(
        SimpleRateThrottle,
        "THROTTLE_RATES",
        {"api": "1000000/min", "anon": "1000000/min", "auth_failure": "1000000/min"},
    )
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)
    secrets = {
        "provider": tokens.issue_token(user=world.staff, scopes=["read", "write", "audit"]).secret,
        "tenant": tokens.issue_token(
            user=world.alpha.members[Role.ADMIN], scopes=["read", "write", "audit"]
        ).secret,
    }
    ids = _object_ids(world)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 25
    calls = 0
    for operation in operations:
        path_ids = {}
        if "{id}" in operation.path or "{pk}" in operation.path:
            collection = next(
                (prefix for prefix in ids if operation.full_path.startswith(prefix)), None
            )
            if collection is not None:
                name = "id" if "{id}" in operation.path else "pk"
                path_ids = {name: ids[collection]}
        for (who, secret), mode in itertools.product(secrets.items(), GenerationMode):
            strategy = operation.as_strategy(mode, path_parameters=path_ids or None)
            try:
                calls += _exerciser(strategy, secret)()
            except Unsatisfiable:
                # No input to get wrong (no parameters, no body): nothing negative to send.
                assert mode is GenerationMode.NEGATIVE, operation.label
            except Exception as exc:
                exc.add_note(f"{who} token, {mode.value} cases, {operation.label}")
                raise
    print(f"schemathesis: {len(operations)} operations, {calls} calls")
    assert calls > 200
