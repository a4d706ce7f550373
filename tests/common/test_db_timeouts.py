# ruff: noqa: F811 (pytest fixtures imported from tests/common/test_partitions.py)
"""Every process's bounds on PostgreSQL, from config/settings.py's environment: a connect
that gives up (against a server that accepts TCP and never answers), a statement that is
cancelled, none when DB_STATEMENT_TIMEOUT_S=0, and the month archives lifting it for
their own long COPY statements only."""

import runpy
import time
from pathlib import Path

import pytest
from django.db import OperationalError, connection
from django.db.backends.postgresql.base import DatabaseWrapper

from common import archives
from gpulease_verify.periods import Period
from tests.common.test_partitions import (  # noqa: F401 (fixtures)
    LATER,
    NOVEMBER,
    _postgresql,
    beat_made_months,
    november,
)
from tests.deploy.neighbours import silent_listener

SETTINGS = Path(__file__).resolve().parents[2] / "config" / "settings.py"

pytestmark = pytest.mark.django_db


def database_settings(monkeypatch, tmp_path, **env: str) -> dict:  # type: ignore[no-untyped-def]
    """DATABASES["default"] as config/settings.py makes it from these variables."""
    monkeypatch.setenv("GPULEASE_VAR_DIR", str(tmp_path))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return runpy.run_path(str(SETTINGS))["DATABASES"]["default"]


def test_processes_run_with_a_25_s_statement_timeout_by_default():
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone() == ("25s",)
    assert connection.settings_dict["OPTIONS"]["connect_timeout"] == 5


def test_a_statement_past_the_timeout_is_cancelled(monkeypatch, tmp_path):
    test_db = connection.settings_dict
    url = f"postgres://{test_db['USER']}@{test_db['HOST']}:{test_db['PORT']}/{test_db['NAME']}"
    if test_db.get("PASSWORD"):
        url = url.replace("@", f":{test_db['PASSWORD']}@", 1)
    settings_dict = database_settings(
        monkeypatch, tmp_path, DATABASE_URL=url, DB_STATEMENT_TIMEOUT_S="0.5"
    )
    wrapper = DatabaseWrapper({**test_db, "OPTIONS": settings_dict["OPTIONS"]}, "timeouts")
    try:
        with wrapper.cursor() as cursor:
            cursor.execute("SHOW statement_timeout")
            assert cursor.fetchone() == ("500ms",)
            started = time.monotonic()
            with pytest.raises(OperationalError, match="statement timeout"):
                cursor.execute("SELECT pg_sleep(3)")
            assert time.monotonic() - started < 2
    finally:
        wrapper.close()


def test_no_statement_timeout_when_it_is_0(monkeypatch, tmp_path):
    settings_dict = database_settings(
        monkeypatch, tmp_path, DATABASE_URL="postgres://u@db:5432/gl", DB_STATEMENT_TIMEOUT_S="0"
    )
    assert settings_dict["OPTIONS"] == {"connect_timeout": 5}


def test_a_database_that_never_answers_fails_the_connect_within_its_timeout(monkeypatch, tmp_path):
    with silent_listener() as port:
        settings_dict = database_settings(
            monkeypatch,
            tmp_path,
            DATABASE_URL=f"postgres://gpulease:pw@127.0.0.1:{port}/gpulease",
            DB_CONNECT_TIMEOUT_S="2",
        )
        wrapper = DatabaseWrapper({**connection.settings_dict, **settings_dict}, "hung")
        started = time.monotonic()
        with pytest.raises(OperationalError):
            wrapper.ensure_connection()
        elapsed = time.monotonic() - started
    assert 1.5 < elapsed < 4, elapsed  # psycopg's floor is 2 s; without it, 130 s


def test_an_archive_lifts_the_statement_timeout_for_its_own_transaction(
    november, tmp_path, monkeypatch
):
    seen: list[str] = []
    export = archives._export

    def watched(cursor, query, target):  # type: ignore[no-untyped-def]
        cursor.execute("SHOW statement_timeout")
        seen.append(cursor.fetchone()[0])
        return export(cursor, query, target)

    load = archives._load

    def watched_load(cursor, tar, member, table):  # type: ignore[no-untyped-def]
        cursor.execute("SHOW statement_timeout")
        seen.append(cursor.fetchone()[0])
        return load(cursor, tar, member, table)

    monkeypatch.setattr(archives, "_export", watched)
    monkeypatch.setattr(archives, "_load", watched_load)
    beat_made_months()
    record = archives.archive_month(Period.parse(NOVEMBER), directory=tmp_path, now=LATER)
    exported = len(seen)
    archives.restore(Path(record.path), now=LATER)
    assert exported and len(seen) > exported and set(seen) == {"0"}
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone() == ("25s",)  # put back after each, though the test's own
        # transaction is still open around them
