"""Login lockouts (django-axes, common.login_attempts) through the real login page: per
username and per client address, and a success clears only its own username's failures
from its own address."""

import pytest
from django.test import Client

from tests.factories import UserFactory

LOGIN = "/accounts/login/"
ATTACKER = "198.51.100.66"


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.AXES_FAILURE_LIMIT = 10


@pytest.fixture
def accounts(db):
    victim = UserFactory(username="victim", password="victims-secret")
    mallory = UserFactory(username="mallory", password="mallorys-own")
    bob = UserFactory(username="bob", password="bobs-own")
    return victim, mallory, bob


def login(username: str, password: str, address: str, forwarded: str | None = None) -> int:
    headers = {"HTTP_X_FORWARDED_FOR": forwarded} if forwarded else {}
    browser = Client(REMOTE_ADDR=address, HTTP_ACCEPT_LANGUAGE="en", **headers)
    return browser.post(LOGIN, {"username": username, "password": password}).status_code


def test_logging_in_to_your_own_account_between_guesses_does_not_buy_more_guesses(accounts):
    guesses, own_logins = [], []
    for round_ in range(3):
        guesses += [login("victim", f"guess-{round_}-{n}", ATTACKER) for n in range(9)]
        own_logins.append(login("mallory", "mallorys-own", ATTACKER))
    # The 10th guess at the victim locks: 9 failures, a success of mallory's, 1 more.
    assert guesses == [200] * 9 + [429] * 18
    assert own_logins == [302, 429, 429]  # the address is locked too
    # The victim's username is locked wherever it is tried from, the right password too ...
    assert login("victim", "victims-secret", "203.0.113.5") == 429
    # ... while another account logs in from another address.
    assert login("bob", "bobs-own", "203.0.113.5") == 302


def test_a_username_is_locked_after_failures_from_many_addresses(accounts):
    spread = [login("victim", "guess", f"198.51.100.{n}") for n in range(1, 12)]
    assert spread == [200] * 9 + [429] * 2
    assert login("victim", "victims-secret", "203.0.113.5") == 429
    # Each of those addresses failed once: it still logs its own users in.
    assert login("bob", "bobs-own", "198.51.100.1") == 302


def test_the_owners_success_clears_their_typos_not_an_attackers_failures(accounts):
    assert [login("victim", "guess", ATTACKER) for _ in range(5)] == [200] * 5
    home = "203.0.113.5"
    assert [login("victim", "typo", home) for _ in range(3)] == [200] * 3
    assert login("victim", "victims-secret", home) == 302
    # The three typos are gone, the attacker's five stay: five more and the name locks.
    assert [login("victim", "guess", ATTACKER) for _ in range(5)] == [200] * 4 + [429]
    assert login("victim", "victims-secret", home) == 429


def test_behind_one_proxy_two_clients_do_not_lock_each_other_out(accounts, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    caddy = "172.18.0.5"  # every request reaches gunicorn from the proxy
    # The guesser writes its own X-Forwarded-For; Caddy appends the address it saw.
    guesses = [
        login(f"nobody-{n}", "guess", caddy, forwarded=f"10.9.9.{n}, 203.0.113.10")
        for n in range(11)
    ]
    assert guesses == [200] * 9 + [429] * 2
    assert login("mallory", "mallorys-own", caddy, forwarded="203.0.113.10") == 429
    assert login("bob", "bobs-own", caddy, forwarded="203.0.113.20") == 302


def test_without_a_trusted_proxy_a_forwarded_for_header_is_ignored(accounts, settings):
    settings.TRUSTED_PROXY_COUNT = 0
    guesses = [
        login(f"nobody-{n}", "guess", ATTACKER, forwarded=f"203.0.113.{n}") for n in range(11)
    ]
    assert guesses == [200] * 9 + [429] * 2
    assert login("bob", "bobs-own", ATTACKER, forwarded="203.0.113.99") == 429
