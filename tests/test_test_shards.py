"""`make test` splits the suite into parallel streams (scripts/test_shards.py): every test
file must run exactly once on PostgreSQL, the SQLite files once more, each stream on its own
databases, the files that mostly wait in a lane of their own beside the CPU streams, and the
serial files alone."""

import importlib.util
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def shards(monkeypatch):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("test_shards", ROOT / "scripts/test_shards.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setenv("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")
    monkeypatch.setenv("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    return module


def test_every_file_runs_once_on_postgresql_and_the_sqlite_files_again(shards):
    sqlite = ["tests/test_clock_matrix.py", "tests/api/test_hostile_input.py"]
    lanes, serial = shards.plan(2, sqlite, {"tests/test_clock_matrix.py": 500.0})
    postgres = [
        path
        for lane in lanes
        for job in shards.grouped(lane)
        if not job.name.endswith("sqlite")
        for path in job.files
    ]
    everything = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py"))
    assert sorted(postgres + serial.files) == everything
    assert len(set(postgres)) == len(postgres)
    assert serial.files == ["tests/benchmarks/test_confirmation_load_lab.py"]
    jobs = [job for lane in lanes for job in shards.grouped(lane)]
    (sqlite_job,) = [job for job in jobs if job.name.endswith("sqlite")]
    assert sqlite_job.files == sqlite
    assert sqlite_job.env["DATABASE_URL"].startswith("sqlite:///")


def test_each_stream_has_its_own_databases_and_the_longest_file_goes_first(shards):
    durations = {"tests/test_clock_matrix.py": 500.0, "tests/test_docs.py": 2.0, "x.py": 1.0}
    lanes, serial = shards.plan(2, [], durations)
    first, second, waiting = (shards.grouped(lane)[0] for lane in lanes)
    assert first.env == {
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test",
        "TEST_REDIS_URL": "redis://127.0.0.1:6379/15",
    }
    assert second.env == {
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test_s1",
        "TEST_REDIS_URL": "redis://127.0.0.1:6379/14",
    }
    # The 500-second file is placed first; every other file (2 s, the median, when not
    # measured) goes to the other stream until it has caught up.
    assert "tests/test_clock_matrix.py" in first.files
    assert "tests/test_clock_matrix.py" not in second.files
    assert first.files == ["tests/test_clock_matrix.py"]
    assert serial.env == first.env
    assert waiting.env == {
        "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/test_s2",
        "TEST_REDIS_URL": "redis://127.0.0.1:6379/13",
    }


def test_the_files_that_wait_run_beside_the_cpu_streams_which_yield_to_them(shards):
    lanes, _ = shards.plan(2, [], {})
    *cpu, waiting = lanes
    assert waiting.waiting and not any(lane.waiting for lane in cpu)
    (job,) = shards.grouped(waiting)
    assert job.name == "waiting"
    assert "tests/benchmarks/test_probes_celery.py" in job.files
    assert "tests/common/test_beat_lock.py" in job.files
    for path in job.files:
        assert shards.waits(path) and not shards.is_serial(path), path
    on_cpu = {path for lane in cpu for j in shards.grouped(lane) for path in j.files}
    assert not on_cpu & set(job.files)
    # A CPU stream's shell lowers its own priority first; all it starts inherits it.
    script = shards.stream_script([], nice=shards.CPU_NICE) + "\nnice"
    printed = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert int(printed.stdout) == shards.CPU_NICE
