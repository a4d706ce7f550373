"""Shared plumbing: a dedicated PostgreSQL database, Django set up on it, timing, results."""

import json
import os
import resource
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
BENCH_DB = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpulease_bench")


def setup_django() -> None:
    """Point Django at the benchmark database (created if missing) and migrate it."""
    import psycopg

    name = BENCH_DB.rsplit("/", 1)[1]
    admin = BENCH_DB.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = BENCH_DB
    # Benchmarks build fleets and years of samples in single statements: no request bound.
    os.environ.setdefault("DB_STATEMENT_TIMEOUT_S", "0")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def flush() -> None:
    from django.core.management import call_command

    call_command("flush", verbosity=0, interactive=False)


@contextmanager
def timer(results: dict, key: str):
    started = time.perf_counter()
    yield
    results[key] = round(time.perf_counter() - started, 3)


def captured_queries(fn: Callable[[], object]) -> tuple[Any, list[dict]]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        value = fn()
    return value, captured.captured_queries


def peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def save(name: str, results: dict) -> None:
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=2))
    print(f"{name}: {json.dumps(results)}")
