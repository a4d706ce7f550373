import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from typing import TypeVar

import kombu.pools
import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"

T = TypeVar("T")


def require(condition: bool, reason: str) -> None:
    """Skip a test whose service, privilege or tool is missing here, but fail it in CI:
    CI must never go green by skipping what it was meant to prove."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI=true and {reason}", pytrace=False)
    pytest.skip(reason)


def require_tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    require(path is not None, f"{name} is not installed")
    return path or ""


def _drop_pools(app) -> None:  # type: ignore[no-untyped-def]
    kombu.pools.reset()  # closes every pool and forgets it (a closed one is never handed out)
    app._pool = None
    app.amqp._producer_pool = None


@contextlib.contextmanager
def celery_broker(url: str) -> Iterator[None]:
    """gpulease's Celery app sends to ``url`` inside the block. Its connection and producer
    pools are dropped on the way in and out: a pool made earlier (by any test that sent a
    task, to the filesystem broker under its own var dir) would otherwise go on sending to
    the broker it was made for, and a worker on ``url`` would never see the task."""
    from config.celery import app

    previous = app.conf.broker_url
    _drop_pools(app)
    app.conf.broker_url = url
    try:
        yield
    finally:
        _drop_pools(app)
        app.conf.broker_url = previous


@contextlib.contextmanager
def built_once(django_db_blocker, build: Callable[[], T]) -> Iterator[T]:  # type: ignore[no-untyped-def]
    """Data that several tests read, built once for all of them (a module- or class-scoped
    fixture wraps this; it must also ask for ``django_db_setup``).

    ``build()`` runs inside an outer transaction that stays open while the tests run: each
    test (``django_db`` without ``transaction=True``) runs in a savepoint inside it that is
    rolled back after the test, so every test starts from the data as built, whatever the
    tests before it wrote; at the end the outer transaction is rolled back too, and nothing
    reaches the database. A transactional test must not run inside the scope (it would
    commit or flush under the outer transaction). Model instances in the value are shared
    by the tests: a test that changes one in memory deep-copies it first."""
    from django.db import transaction

    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
        try:
            value = build()
        except BaseException as error:
            outer.__exit__(type(error), error, error.__traceback__)
            raise
    try:
        yield value
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)


@pytest.fixture
def redis_url() -> str:
    import redis

    url = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
        reachable = True
    except redis.RedisError:
        reachable = False
    require(reachable, f"Redis at {url} is not reachable")
    return url


@pytest.fixture(autouse=True)
def _private_var_dir(settings, tmp_path):
    """Keep tests from writing into the developer's var/ (demo logins and the like)."""
    settings.VAR_DIR = tmp_path


@pytest.fixture(autouse=True)
def _roomy_address_budgets(monkeypatch):
    """Every test client comes from 127.0.0.1, so the per-address budgets for anonymous
    requests and failed authentication would carry from one request loop to the next.
    Tests of those budgets set their own rates."""
    from rest_framework.throttling import SimpleRateThrottle

    rates = {**SimpleRateThrottle.THROTTLE_RATES, "anon": "100000/min"}
    monkeypatch.setattr(
        SimpleRateThrottle, "THROTTLE_RATES", rates | {"auth_failure": "100000/min"}
    )


@pytest.fixture(autouse=True)
def _roomy_portal_budgets(settings):
    """Likewise the portal's and the audit bundle's budgets (anonymous pages count against
    127.0.0.1); their tests set their own."""
    settings.PORTAL_RATE_LIMIT = "100000/min"
    settings.AUDIT_BUNDLE_RATE_LIMIT = "100000/min"


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Every UserFactory user has a password, and Django's PBKDF2 takes 0.3-0.7 s a hash on
    this 2-core machine (the demo alone makes six users). No test asserts the production
    hasher; one that does would set its own."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _english():
    """Messages are asserted in English; pages that test Chinese ask for it explicitly."""
    from django.utils import translation

    with translation.override("en"):
        yield


@pytest.fixture
def redis_cache(settings, redis_url):
    """Django's cache on the test Redis, as production's CACHE_URL: the rate-limit counters
    every web worker shares. Emptied before and after."""
    from django.core.cache import cache

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": redis_url}
    }
    cache.clear()
    yield cache
    cache.clear()
