"""Budgets that make abuse cost the abuser: bad tokens and anonymous requests per
address, and failed logins on the portal and the admin (django-axes)."""

import pytest
from django.test import Client
from rest_framework.test import APIClient
from rest_framework.throttling import SimpleRateThrottle

from accounts import services as tokens
from accounts.choices import Role


@pytest.fixture
def tight_budgets(monkeypatch):
    monkeypatch.setattr(
        SimpleRateThrottle,
        "THROTTLE_RATES",
        {"api": "1000/min", "anon": "4/min", "auth_failure": "5/min"},
    )


def _client(address: str, token: str | None = None, **headers: str) -> APIClient:
    client = APIClient(REMOTE_ADDR=address, HTTP_ACCEPT_LANGUAGE="en", **headers)
    if token:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def _shape(response) -> dict:  # type: ignore[no-untyped-def]
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "fields"}
    return body["error"]


def test_bad_tokens_spend_their_addresses_budget_then_everything_from_it_is_a_429(
    world, tight_budgets
):
    guesser = _client("198.18.0.66", token="gpl_deadbeef_not-a-real-secret")
    statuses = [guesser.get("/api/v1/leases/").status_code for _ in range(6)]
    assert statuses == [401] * 5 + [429]
    refused = guesser.get("/api/v1/leases/")
    error = _shape(refused)
    assert error["code"] == "throttled"
    assert "failed to authenticate" in error["message"]
    assert 0 < int(refused["Retry-After"]) <= 60
    # Even a good token is refused from that address until the window passes ...
    good = tokens.issue_token(user=world.alpha.members[Role.ADMIN], scopes=["read"]).secret
    assert _client("198.18.0.66", token=good).get("/api/v1/leases/").status_code == 429
    # ... while another address is untouched.
    assert _client("198.18.0.77", token=good).get("/api/v1/leases/").status_code == 200


def test_anonymous_requests_to_protected_routes_spend_the_same_budget(world, tight_budgets):
    anonymous = _client("198.18.0.66")
    statuses = [anonymous.get("/api/v1/invoices/").status_code for _ in range(6)]
    assert statuses == [401] * 5 + [429]
    _shape(anonymous.get("/api/v1/invoices/"))


def test_a_forged_forwarded_for_header_does_not_buy_a_fresh_budget(world, tight_budgets):
    statuses = [
        _client("198.18.0.66", token="gpl_deadbeef_x", HTTP_X_FORWARDED_FOR=f"198.19.0.{n}")
        .get("/api/v1/leases/")
        .status_code
        for n in range(6)
    ]
    assert statuses == [401] * 5 + [429]


def test_behind_one_proxy_the_401_budget_is_the_clients_not_the_proxys(
    world, tight_budgets, settings
):
    settings.TRUSTED_PROXY_COUNT = 1
    caddy = "172.18.0.5"
    guesser = _client(caddy, token="gpl_deadbeef_x", HTTP_X_FORWARDED_FOR="203.0.113.10")
    assert [guesser.get("/api/v1/leases/").status_code for _ in range(6)] == [401] * 5 + [429]
    good = tokens.issue_token(user=world.alpha.members[Role.ADMIN], scopes=["read"]).secret
    neighbour = _client(caddy, token=good, HTTP_X_FORWARDED_FOR="203.0.113.20")
    assert neighbour.get("/api/v1/leases/").status_code == 200


def test_anonymous_requests_to_open_routes_have_their_own_rate(world, tight_budgets):
    anonymous = _client("198.18.0.66")
    statuses = [anonymous.get("/api/v1/audit/public-key/").status_code for _ in range(5)]
    assert statuses == [200] * 4 + [429]
    # A signed-in user is not held to the anonymous rate.
    staff = APIClient(REMOTE_ADDR="198.18.0.66")
    staff.force_authenticate(world.staff)
    assert staff.get("/api/v1/audit/public-key/").status_code == 200


@pytest.mark.parametrize("login_path", ["/accounts/login/", "/admin/login/"])
def test_logins_lock_an_address_out_after_repeated_failures(world, settings, login_path):
    settings.AXES_FAILURE_LIMIT = 3
    admin = world.alpha.members[Role.ADMIN]
    admin.set_password("the-right-one")
    admin.is_staff = login_path.startswith("/admin")  # the admin site logs in staff only
    admin.save()
    browser = Client(REMOTE_ADDR="198.18.0.66", HTTP_ACCEPT_LANGUAGE="en")
    for n in range(3):  # three names, so it is the address that locks, not a username
        failed = browser.post(login_path, {"username": f"nobody-{n}", "password": "guess"})
        assert failed.status_code in (200, 429)
    locked = browser.post(login_path, {"username": admin.username, "password": "the-right-one"})
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert "_auth_user_id" not in browser.session
    # Another address still logs in.
    other = Client(REMOTE_ADDR="198.18.0.77", HTTP_ACCEPT_LANGUAGE="en")
    ok = other.post(login_path, {"username": admin.username, "password": "the-right-one"})
    assert ok.status_code == 302


@pytest.mark.parametrize("period", ["２０２６-11", "2026-11\n", " 2026-11", "2026-11 "])  # noqa: RUF001
def test_a_period_is_ascii_yyyy_mm_and_nothing_around_it(world, period):
    staff = APIClient(HTTP_ACCEPT_LANGUAGE="en")
    staff.force_authenticate(world.staff)
    response = staff.get(f"/api/v1/leases/{world.alpha.lease.pk}/sla/", {"period": period})
    assert response.status_code == 400
    assert _shape(response)["fields"] == {
        "period": ["The period must be written YYYY-MM, for example 2026-11."]
    }
    portal = Client(HTTP_ACCEPT_LANGUAGE="en")
    portal.force_login(world.staff)
    page = portal.get("/provider/cost-share/", {"period": period})
    assert page.status_code == 400
