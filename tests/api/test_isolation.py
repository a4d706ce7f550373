"""Isolation proof: every API route under /api/v1/, found by walking the URL resolver, is
checked for every role of one tenant against the other tenant's objects. Detail routes
answer 404 to every method (never 403: existence does not leak); list routes never
contain the other tenant's rows, even when filtered by their ids. A route without an entry
in isolation_cases.CASES fails here, so a new route cannot go unproven."""

from dataclasses import dataclass
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from accounts.choices import Role
from tests.api.isolation_cases import CASES, BodyOf, DetailOf, ListOf, NoRows

pytestmark = pytest.mark.django_db

API_PREFIX = "api/v1/"


@dataclass(frozen=True)
class Route:
    path: str
    name: str
    methods: tuple[str, ...]
    kwargs: tuple[str, ...]


def _walk(patterns: list[Any], prefix: str, namespace: str | None):  # type: ignore[no-untyped-def]
    for pattern in patterns:
        text = prefix + str(pattern.pattern).lstrip("^").rstrip("$")
        if isinstance(pattern, URLResolver):
            ns = pattern.namespace
            inner = f"{namespace}:{ns}" if namespace and ns else (ns or namespace)
            yield from _walk(pattern.url_patterns, text, inner)
        elif isinstance(pattern, URLPattern):
            yield text, (f"{namespace}:{pattern.name}" if namespace else pattern.name), pattern


def api_routes() -> list[Route]:
    routes = []
    for path, name, pattern in _walk(get_resolver().url_patterns, "", None):
        if not path.startswith(API_PREFIX):
            continue
        actions = getattr(pattern.callback, "actions", None) or {}
        allowed = getattr(getattr(pattern.callback, "cls", None), "http_method_names", actions)
        methods = tuple(
            sorted(m for m in actions if m in allowed and m not in ("head", "options"))
        ) or ("get",)
        routes.append(Route(path, name, methods, tuple(pattern.pattern.regex.groupindex)))
    return routes


ROLES = [Role.ADMIN, Role.VIEWER, Role.AUDITOR, "outsider"]


def _user(world, role: str):  # type: ignore[no-untyped-def]
    return world.outsider if role == "outsider" else world.alpha.members[role]


def _ids(response) -> set[int]:  # type: ignore[no-untyped-def]
    data = response.json()
    rows = data["results"] if isinstance(data, dict) and "results" in data else data
    return {row["id"] for row in rows}


def _call(client, method: str, url: str, case: DetailOf):  # type: ignore[no-untyped-def]
    if method == "get":
        return client.get(url, case.query)
    return getattr(client, method)(url, case.body, format="json")


def coverage_problems(routes: list[Route], cases: dict[str, Any]) -> list[str]:
    names = {route.name for route in routes}
    problems = [f"unnamed API route {route.path}" for route in routes if not route.name]
    problems += [
        f"API route {name} has no isolation case in tests/api/isolation_cases.py: add one "
        "saying how to build another tenant's object for it"
        for name in sorted(names - set(cases))
    ]
    problems += [
        f"isolation case for a route that no longer exists: {name}"
        for name in sorted(set(cases) - names)
    ]
    return problems


def test_every_api_route_has_an_isolation_case():
    routes = api_routes()
    assert {"api:lease-detail", "api:proberun-list", "api:proberun-raw"} <= {r.name for r in routes}
    assert coverage_problems(routes, CASES) == []


def test_a_route_without_a_case_is_reported():
    partial = {name: case for name, case in CASES.items() if name != "api:lease-sla"}
    assert coverage_problems(api_routes(), partial) == [
        "API route api:lease-sla has no isolation case in tests/api/isolation_cases.py: add one "
        "saying how to build another tenant's object for it"
    ]


def test_another_tenants_objects_are_unreachable_for_every_route_and_role(world, client_for):
    checked = 0
    for route in api_routes():
        case = CASES.get(route.name)
        if case is None or isinstance(case, NoRows):
            continue
        if isinstance(case, BodyOf):
            url = reverse(route.name)
            body = case.body(world.beta)
            for role in ROLES:
                response = _call(
                    client_for(_user(world, role)), "post", url, DetailOf(dict, body=body)
                )
                assert response.status_code in (400, 403), (route.name, role, response.json())
                if response.status_code == 400:
                    assert response.json()["error"]["fields"] == {
                        case.field: ["No such object."]
                    }, (route.name, role)
                checked += 1
            assert (
                _call(client_for(None), "post", url, DetailOf(dict, body=body)).status_code == 401
            )
            # Control: the tenant's own admin is answered, so the refusals are the scope's.
            own = client_for(world.alpha.members[Role.ADMIN]).post(
                url, case.body(world.alpha), format="json"
            )
            assert own.status_code == 200, (route.name, own.content[:200])
        elif isinstance(case, DetailOf):
            url = reverse(route.name, kwargs=case.kwargs(world.beta))
            own_url = reverse(route.name, kwargs=case.kwargs(world.alpha))
            for method in route.methods:
                for role in ROLES:
                    response = _call(client_for(_user(world, role)), method, url, case)
                    assert response.status_code == 404, (route.name, method, role, response.json())
                    assert response.json()["error"]["code"] == "not_found"
                    checked += 1
                anonymous = _call(client_for(None), method, url, case)
                assert anonymous.status_code == 401, (route.name, method)
            if "get" in route.methods:
                # Controls: the route works, so the 404s above are the scope's doing.
                assert client_for(world.staff).get(url, case.query).status_code == 200, route
                own = client_for(world.alpha.members[Role.ADMIN]).get(own_url, case.query)
                assert own.status_code == 200, (route.name, own.content[:200])
        else:
            assert isinstance(case, ListOf)
            url = reverse(route.name)
            hidden = case.ids(world.beta)
            staff_ids = _ids(client_for(world.staff).get(url, {"page_size": 500, **case.query}))
            assert hidden <= staff_ids, (route.name, "control: staff must see them")
            for role in ROLES:
                client = client_for(_user(world, role))
                response = client.get(url, {"page_size": 500, **case.query})
                assert response.status_code == 200, (route.name, role)
                assert not hidden & _ids(response), (route.name, role)
                for params in case.filters(world.beta):
                    filtered = client.get(url, {**params, **case.query})
                    assert filtered.status_code in (200, 400), (route.name, params)
                    if filtered.status_code == 200:
                        assert not _ids(filtered), (route.name, role, params)
                checked += 1
            assert client_for(None).get(url).status_code == 401, route.name
    assert checked > 50
