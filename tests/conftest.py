import contextlib
import os
import shutil
from collections.abc import Iterator

import kombu.pools
import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


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
