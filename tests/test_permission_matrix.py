"""The permission matrix: every route of the URLconf, found by walking the resolver, with
every HTTP method its view allows, is asked by every kind of caller for tenant alpha's
objects, and each answer must be the one in tests/permission_matrix_rows.py.

A (route, method) found here without a row fails, and so does a row without a route: a new
route or a new method cannot go unjudged. Refusals are asked first, so that an allowed
write does not change what the others see; every API refusal carries the one error shape.

How methods are found: a DRF view set's actions that its http_method_names allow; a class
view's handlers; a function view's require_http_methods list, else GET and POST (such a
view answers every method; those are the two a browser sends)."""

import copy
import inspect
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import time_machine
from django.conf import settings as django_settings
from django.core.cache import cache
from django.shortcuts import resolve_url
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, reverse
from rest_framework.test import APIClient

from accounts import services as tokens
from accounts.choices import Role
from tests.api.conftest import World, build_side
from tests.conftest import built_once
from tests.factories import MembershipFactory, StaffFactory, UserFactory, at
from tests.permission_matrix_rows import (
    API_CALLERS,
    API_ROWS,
    EXCLUDED,
    LOGIN,
    PAGE_ROWS,
    SESSION_CALLERS,
    TOKEN_CALLERS,
    TOKEN_SCOPES,
    Row,
)

NOW = at("2026-11-20 12:00")
HIDDEN_METHODS = {"head", "options"}  # answered by the framework for every route alike


# --- routes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    path: str
    name: str
    methods: tuple[str, ...]

    @property
    def is_api(self) -> bool:
        return self.path.startswith("api/")


def _walk(patterns: list[Any], prefix: str, namespace: str | None) -> Iterator[tuple]:
    for pattern in patterns:
        text = prefix + str(pattern.pattern).lstrip("^").rstrip("$")
        if isinstance(pattern, URLResolver):
            inner = ":".join(part for part in (namespace, pattern.namespace) if part) or None
            yield from _walk(pattern.url_patterns, text, inner)
        elif isinstance(pattern, URLPattern):
            name = f"{namespace}:{pattern.name}" if namespace else pattern.name
            yield text, name, pattern.callback


def _declared_methods(view: Any) -> list[str] | None:
    """The list a require_http_methods decorator closed over, anywhere down the chain of
    decorators; None when there is none."""
    while view is not None:
        if inspect.isfunction(view):
            listed = inspect.getclosurevars(view).nonlocals.get("request_method_list")
            if listed is not None:
                return [method.lower() for method in listed]
        view = getattr(view, "__wrapped__", None)
    return None


def methods_of(view: Any) -> tuple[str, ...]:
    actions = getattr(view, "actions", None)
    cls = getattr(view, "cls", None) or getattr(view, "view_class", None)
    if actions and cls is not None:
        methods = {m for m in actions if m in cls.http_method_names}
    elif cls is not None:
        methods = {m for m in cls.http_method_names if hasattr(cls, m)}
    else:
        methods = set(_declared_methods(view) or ("get", "post"))
    return tuple(sorted(methods - HIDDEN_METHODS))


def all_routes() -> list[Route]:
    return [
        Route(path, name, methods_of(view))
        for path, name, view in _walk(get_resolver().url_patterns, "", None)
    ]


def coverage_problems(routes: list[Route], rows: dict[tuple[str, str], Row]) -> list[str]:
    excluded = [r for r in routes if any(r.path.startswith(p) for p in EXCLUDED)]
    judged = [r for r in routes if r not in excluded]
    problems = [f"unnamed route {r.path}: name it" for r in judged if not r.name]
    found = {(r.name, method) for r in judged if r.name for method in r.methods}
    problems += [
        f"{name} {method.upper()} has no row in tests/permission_matrix_rows.py: add its row"
        for name, method in sorted(found - set(rows))
    ]
    problems += [
        f"row {name} {method.upper()} names no route of the URLconf: remove the row"
        for name, method in sorted(set(rows) - found)
    ]
    problems += [
        f"exclusion {prefix} matches no route: remove it"
        for prefix in EXCLUDED
        if not any(r.path.startswith(prefix) for r in excluded)
    ]
    problems += [
        f"{r.name} {method.upper()}: its row is in the wrong table (API_ROWS: under api/)"
        for r in judged
        for method in r.methods
        if (r.name, method) in (API_ROWS if not r.is_api else PAGE_ROWS)
    ]
    return problems


ALL_ROWS = {**API_ROWS, **PAGE_ROWS}


def test_every_route_and_method_has_a_row_and_every_row_a_route():
    routes = all_routes()
    names = {route.name for route in routes}
    assert {"api:lease-run-now", "api:dispute-accept", "portal:fleet", "portal:lease"} <= names
    assert coverage_problems(routes, ALL_ROWS) == []


def test_a_route_method_without_a_row_fails_naming_it():
    partial = {key: row for key, row in ALL_ROWS.items() if key != ("api:lease-run-now", "post")}
    assert coverage_problems(all_routes(), partial) == [
        "api:lease-run-now POST has no row in tests/permission_matrix_rows.py: add its row"
    ]


def test_a_row_without_a_route_fails_naming_it():
    extra = {**ALL_ROWS, ("api:lease-delete", "delete"): Row("404 " * 12)}
    assert coverage_problems(all_routes(), extra) == [
        "row api:lease-delete DELETE names no route of the URLconf: remove the row"
    ]


def test_the_methods_found_are_those_the_views_allow():
    methods = {route.name: route.methods for route in all_routes()}
    # put is in the router's actions, but SiteViewSet.http_method_names leaves it out.
    assert methods["api:site-detail"] == ("get", "patch")
    assert methods["api:lease-evidence"] == ("get", "post")  # a hand-made as_view() mapping
    assert methods["api:audit-public-key"] == ("get",)  # an APIView's handlers
    assert methods["portal:token-revoke"] == ("post",)  # @require_POST
    assert methods["portal:logout"] == ("post",)  # LogoutView.http_method_names
    assert methods["portal:overview"] == ("get", "post")  # a bare function view


# --- callers ----------------------------------------------------------------------------------


@dataclass
class Callers:
    world: World
    users: dict[str, Any]  # session caller -> user (None: anonymous)
    secrets: dict[str, str]  # token caller -> the whole token, of alpha's admin
    var_dir: Path | None = field(default=None, repr=False)  # where the world was built

    def api_client(self, caller: str) -> APIClient:
        client = APIClient(HTTP_ACCEPT_LANGUAGE="en")
        if caller in self.secrets:
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {self.secrets[caller]}")
        elif self.users[caller] is not None:
            client.force_login(self.users[caller])
        return client

    def page_client(self, caller: str) -> Client:
        client = Client(HTTP_ACCEPT_LANGUAGE="en")
        if self.users[caller] is not None:
            client.force_login(self.users[caller])
        return client


FAST_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(scope="module")
def shared_callers(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Callers]:
    """The two tenants' world and the callers, built once for the module's tests (a few
    seconds a build, and there is a test per route): each test asks in its own savepoint,
    rolled back after it (tests.conftest.built_once), so a write in one test is never seen
    by the next."""
    var_dir = tmp_path_factory.mktemp("matrix-var")

    def build() -> Callers:
        with (
            override_settings(VAR_DIR=var_dir, PASSWORD_HASHERS=FAST_HASHERS),
            time_machine.travel(NOW, tick=True),
        ):
            world = World(
                alpha=build_side("alpha"),
                beta=build_side("beta"),
                staff=StaffFactory(username="provider"),
                outsider=UserFactory(username="outsider"),
            )
            two = UserFactory(username="alpha-viewer-beta-admin")
            MembershipFactory(user=two, tenant=world.alpha.tenant, role=Role.VIEWER)
            MembershipFactory(user=two, tenant=world.beta.tenant, role=Role.ADMIN)
            inactive = UserFactory(username="alpha-admin-left", is_active=False)
            MembershipFactory(user=inactive, tenant=world.alpha.tenant, role=Role.ADMIN)
            admin = world.alpha.members[Role.ADMIN]
            users = {
                "staff": world.staff,
                "admin": admin,
                "viewer": world.alpha.members[Role.VIEWER],
                "auditor": world.alpha.members[Role.AUDITOR],
                "two": two,
                "outsider": world.outsider,
                "inactive": inactive,
                "anon": None,
            }
            assert tuple(users) == SESSION_CALLERS
            secrets = {
                caller: tokens.issue_token(user=admin, scopes=TOKEN_SCOPES[caller]).secret
                for caller in TOKEN_CALLERS
            }
            return Callers(world, users, secrets)

    with built_once(django_db_blocker, build) as callers:
        callers.var_dir = var_dir
        yield callers


@pytest.fixture
def callers(db, settings, shared_callers) -> Iterator[Callers]:
    settings.PASSWORD_HASHERS = FAST_HASHERS
    # Run-now answers 429 within the cooldown after a tenant's runs are over; the matrix
    # asks who may run it, not how often.
    settings.RUN_NOW_COOLDOWN_S = 0
    # What the build left in its VAR_DIR (the audit key, if it made one), as if the world
    # had been built in this test's.
    shutil.copytree(shared_callers.var_dir, settings.VAR_DIR, dirs_exist_ok=True)
    cache.clear()
    with time_machine.travel(NOW, tick=True):
        # A copy per test: a row that changes an object in memory changes only its own.
        yield copy.deepcopy(shared_callers)
    cache.clear()


# --- asking -----------------------------------------------------------------------------------


def _refusals_first(expected: dict[str, int | str]) -> list[str]:
    return sorted(expected, key=lambda caller: expected[caller] in (200, 201, 202, 302))


def _error_shape_problem(response: Any) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return f"not JSON: {response.content[:120]!r}"
    if set(body) != {"error"} or set(body["error"]) != {"code", "message", "fields"}:
        return f"not the error shape: {body}"
    return None


def _redirect_kind(response: Any) -> int | str:
    """302 to the login page reads "login"; any other status reads as itself."""
    login = resolve_url(django_settings.LOGIN_URL)
    if response.status_code == 302 and response["Location"].startswith(login):
        return LOGIN
    return response.status_code


def ask_api(callers: Callers, name: str, method: str) -> tuple[dict, dict, list[str]]:
    row = API_ROWS[(name, method)]
    url = reverse(name, kwargs=row.kwargs(callers.world))
    expected = row.expected(API_CALLERS)
    got: dict[str, int | str] = {}
    problems = []
    for caller in _refusals_first(expected):
        client = callers.api_client(caller)
        if method == "get":
            response = client.get(url, row.query)
        else:
            response = getattr(client, method)(url, row.body(callers.world), format="json")
        got[caller] = response.status_code
        if 400 <= response.status_code < 500:
            problem = _error_shape_problem(response)
            if problem:
                problems.append(f"{caller}: {problem}")
    return expected, got, problems


def ask_page(callers: Callers, name: str, method: str) -> tuple[dict, dict]:
    row = PAGE_ROWS[(name, method)]
    url = reverse(name, kwargs=row.kwargs(callers.world))
    expected = row.expected(SESSION_CALLERS)
    got = {}
    for caller in _refusals_first(expected):
        client = callers.page_client(caller)
        data = row.query if method == "get" else row.body(callers.world)
        got[caller] = _redirect_kind(getattr(client, method)(url, data))
    return expected, got


def _methods(rows: dict[tuple[str, str], Row], name: str) -> list[str]:
    """A route's methods, reads first (a write may change what a read answers)."""
    return sorted((m for n, m in rows if n == name), key=lambda m: (m != "get", m))


def _mismatches(name: str, method: str, expected: dict, got: dict) -> list[str]:
    return [
        f"{name} {method.upper()} as {caller}: expected {expected[caller]}, got {got[caller]}"
        for caller in expected
        if got[caller] != expected[caller]
    ]


@pytest.mark.parametrize("name", sorted({name for name, _ in API_ROWS}))
def test_api_route(callers, name):
    problems = []
    for method in _methods(API_ROWS, name):
        expected, got, shape = ask_api(callers, name, method)
        problems += _mismatches(name, method, expected, got)
        problems += [f"{name} {method.upper()} as {line}" for line in shape]
    assert problems == []


@pytest.mark.parametrize("name", sorted({name for name, _ in PAGE_ROWS}))
def test_page_route(callers, name):
    problems = []
    for method in _methods(PAGE_ROWS, name):
        expected, got = ask_page(callers, name, method)
        problems += _mismatches(name, method, expected, got)
    assert problems == []


def test_pages_of_alpha_objects_are_404_to_betas_admin(callers):
    """Another tenant's object is a page that does not exist, whatever the method."""
    beta_admin = callers.world.beta.members[Role.ADMIN]
    client = Client(HTTP_ACCEPT_LANGUAGE="en")
    client.force_login(beta_admin)
    got = {}
    for (name, method), row in PAGE_ROWS.items():
        kwargs = row.kwargs(callers.world)
        if kwargs:
            data = row.query if method == "get" else row.body(callers.world)
            got[(name, method)] = getattr(client, method)(reverse(name, kwargs=kwargs), data)
    # 15 routes with GET and POST (the invoice PDF, XLSX and 数电票 JSON, the credit note PDF
    # and 数电票 JSON, the amendment, an incident's page, a chart's CSV and a voucher's page
    # among them), the token and signing key revokes, and the audit bundle and checkpoint
    # downloads (GET only).
    assert len(got) == 34
    assert {key: response.status_code for key, response in got.items()} == dict.fromkeys(got, 404)
