"""Every instant the API takes carries its UTC offset: a naive one (2026-11-10T08:00:00) is a
400 naming the field, never a time read in the server's zone (Asia/Shanghai, eight hours
from what a client in UTC meant).

The instants are found by walking the OpenAPI schema (drf-spectacular): every request-body
property and query parameter of format date-time. A field added later is found the same
way, so it cannot forget. Dates (YYYY-MM-DD) and periods (YYYY-MM) are not instants.
Alertmanager's intake, left out of the schema, is held to it in
tests/monitoring/test_alertmanager.py."""

import json
from typing import Any

import pytest
from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator

from tests.api.test_hostile_input import WRITES, error_of, get, reads, send

pytestmark = pytest.mark.django_db

NAIVE = "2026-11-10T08:00:00"
MESSAGE = (
    "Give the instant with its UTC offset (2026-11-10T08:00:00+08:00, or Z for UTC): "
    "without one it is ambiguous."
)
Path = tuple[str | int, ...]


def _date_times(schema: dict[str, Any], components: dict[str, Any], path: Path = ()) -> list[Path]:
    """Paths of the writable date-time properties of a request body schema."""
    if "$ref" in schema:
        return _date_times(components[schema["$ref"].rsplit("/", 1)[1]], components, path)
    found: list[Path] = []
    for key in ("allOf", "oneOf", "anyOf"):
        for part in schema.get(key, []):
            found += _date_times(part, components, path)
    if schema.get("format") == "date-time" and not schema.get("readOnly"):
        found.append(path)
    for name, item in schema.get("properties", {}).items():
        if not item.get("readOnly"):
            found += _date_times(item, components, (*path, name))
    if "items" in schema:
        found += _date_times(schema["items"], components, (*path, 0))
    return found


def instant_inputs() -> list[tuple[str, str, str, Path]]:
    """(method, route name, "body" or "query", field) for every instant the schema names."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    found = []
    for url, operations in schema["paths"].items():
        name = resolve(url.replace("{id}", "1").replace("{pk}", "1")).view_name
        for method, operation in operations.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and parameter["schema"].get("format") == "date-time":
                    found.append((method, name, "query", (parameter["name"],)))
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            for field in _date_times(body["schema"], components) if body else []:
                found.append((method, name, "body", field))
    return found


def with_value(body: dict[str, Any], field: Path, value: str) -> dict[str, Any]:
    copy = json.loads(json.dumps(body))
    target = copy
    for step in field[:-1]:
        target = target[step]
    target[field[-1]] = value
    return copy


def naive_refusal_problem(response, name: str) -> str | None:  # type: ignore[no-untyped-def]
    try:
        error = error_of(response, 400)
    except AssertionError as exc:
        return str(exc)[:300]
    if MESSAGE not in json.dumps(error["fields"].get(name)):
        return f"the error does not name {name} as naive: {error}"[:300]
    return None


def test_the_schema_walk_finds_the_instants_we_know():
    found = {(method, name, where, field[0]) for method, name, where, field in instant_inputs()}
    assert found >= {
        ("post", "api:lease-list", "body", "starts_at"),
        ("post", "api:lease-list", "body", "ends_at"),
        ("post", "api:apitoken-list", "body", "expires_at"),
        ("post", "api:lease-evidence", "body", "measured_at"),
        ("post", "api:termsamendment-list", "body", "effective_from"),
        ("get", "api:incident-list", "query", "opened_at_after"),
        ("get", "api:incident-list", "query", "opened_at_before"),
        ("get", "api:proberun-list", "query", "slot_at_after"),
        ("get", "api:proberun-list", "query", "slot_at_before"),
    }


def test_a_naive_instant_is_a_400_naming_the_field_everywhere(world, client_for):
    by_name = {read.name: read for read in reads(world)}
    problems, checked = [], 0
    for method, name, where, field in instant_inputs():
        label = f"{method.upper()} {name} {where} {'.'.join(map(str, field))}"
        if where == "query":
            (parameter,) = field
            read = by_name[name]
            client = client_for(world.staff)
            # A range filter's two ends (opened_at_after, opened_at_before) answer as one.
            filter_name = parameter.rsplit("_", 1)[0]
            aware = get(client, read, **{parameter: f"{NAIVE}Z"})
            if aware.status_code != 200:
                problems.append(f"{label}: the same instant with Z is refused: {aware.content}")
            problem = naive_refusal_problem(get(client, read, **{parameter: NAIVE}), filter_name)
        else:
            write = WRITES[name]
            assert write.method == method, label
            body = write.body(world)  # type: ignore[misc]
            value = body
            for step in field:
                value = value[step]
            # The valid body's own instant without its offset: nothing else differs.
            naive = with_value(body, field, value[:19])
            response = send(world, client_for, name, json.dumps(naive))
            problem = naive_refusal_problem(response, str(field[0]))
        checked += 1
        if problem:
            problems.append(f"{label}: {problem}")
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)
    assert checked >= 9
