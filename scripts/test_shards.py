"""Run the whole test suite as `make test` does, in parallel streams on this machine's cores.

Every test file under tests/ runs exactly once on PostgreSQL, and the SQLite files
(``--sqlite``) once more on SQLite, as before; what changes is that they run in ``--streams``
processes at once. Each stream has its own PostgreSQL test database and Redis database, so a
test that empties its Redis database or migrates its database never touches another
stream's. Files are given to the streams whole (their module fixtures are built once) by
their last measured time (tests/durations.json), the longest first, each to the stream that
would finish first. Files marked ``waits`` (they mostly wait on real time: network labs,
Celery workers killed and restarted, beats taking over) run in one more stream beside them,
the waiting lane, while the CPU streams run at a lower priority (``nice``), so that a
waiting test's short bursts of work are not queued behind theirs. Files marked ``serial``
(``pytestmark = pytest.mark.serial``: they load every core on purpose) run afterwards,
alone.

    python scripts/test_shards.py --sqlite tests/test_clock_matrix.py ...
    python scripts/test_shards.py --record var/test-shards/*.xml   # refresh durations.json
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DURATIONS = ROOT / "tests" / "durations.json"
LOGS = ROOT / "var" / "test-shards"
# The CPU streams' niceness while a waiting lane runs beside them.
CPU_NICE = 10
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=20"]


@dataclass
class Job:
    name: str
    files: list[str]
    env: dict[str, str]
    seconds: float = 0.0


@dataclass
class Stream:
    number: int
    jobs: list[Job] = field(default_factory=list)
    waiting: bool = False  # the lane of the files that mostly wait

    @property
    def seconds(self) -> float:
        return sum(job.seconds for job in self.jobs)


def test_files() -> list[str]:
    return sorted(str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py"))


def marked(path: str, marker: str) -> bool:
    """Whether the file's ``pytestmark`` carries ``pytest.mark.<marker>``."""
    pattern = rf"^pytestmark\s*=.*\bpytest\.mark\.{marker}\b"
    return bool(re.search(pattern, (ROOT / path).read_text(encoding="utf-8"), re.MULTILINE))


def is_serial(path: str) -> bool:
    return marked(path, "serial")


def waits(path: str) -> bool:
    return marked(path, "waits")


def with_database(url: str, suffix: str) -> str:
    """``postgres://host/test`` -> ``postgres://host/test_s1`` (pytest-django prefixes test_)."""
    if not suffix:
        return url
    base, _, name = url.rpartition("/")
    return f"{base}/{name}_{suffix}"


def with_redis_db(url: str, offset: int) -> str:
    """Stream k's Redis database: the given number minus k (15, 14, ...)."""
    base, _, number = url.rpartition("/")
    database = int(number or 0) - offset
    if database < 0:
        raise SystemExit(f"TEST_REDIS_URL {url}: no Redis database below it for stream {offset}")
    return f"{base}/{database}"


def plan(
    streams: int, sqlite_files: list[str], durations: dict[str, float]
) -> tuple[list[Stream], Job]:
    database = os.environ["DATABASE_URL"]
    redis = os.environ["TEST_REDIS_URL"]
    known = sorted(durations.values())
    unknown = known[len(known) // 2] if known else 10.0  # a new file: a median file's time
    files = test_files()
    serial = [path for path in files if is_serial(path)]
    waiting = [path for path in files if path not in serial and waits(path)]

    def file_job(path: str) -> Job:
        return Job(f"postgresql {path}", [path], {}, durations.get(path, unknown))

    jobs = [file_job(path) for path in files if path not in serial and path not in waiting]
    if sqlite_files:
        sqlite_url = f"sqlite:///{tempfile.mkdtemp(prefix='gpulease-test-')}/test.sqlite3"
        seconds = sum(durations.get(f"sqlite:{path}", unknown) for path in sqlite_files)
        jobs.append(Job("sqlite", sqlite_files, {"DATABASE_URL": sqlite_url}, seconds))
    lanes = [Stream(number) for number in range(streams)]
    for job in sorted(jobs, key=lambda job: -job.seconds):
        lane = min(lanes, key=lambda lane: lane.seconds)
        lane.jobs.append(job)
    if waiting:
        lanes.append(Stream(streams, [file_job(path) for path in waiting], waiting=True))
    for lane in lanes:
        suffix = f"s{lane.number}" if lane.number else ""
        for job in lane.jobs:
            job.env.setdefault("DATABASE_URL", with_database(database, suffix))
            job.env["TEST_REDIS_URL"] = with_redis_db(redis, lane.number)
    serial_job = Job("serial", serial, {"DATABASE_URL": database, "TEST_REDIS_URL": redis})
    return lanes, serial_job


def grouped(lane: Stream) -> list[Job]:
    """One pytest process per database: the stream's PostgreSQL files together (one
    migration), then its SQLite files."""
    postgres = [job for job in lane.jobs if job.name != "sqlite"]
    others = [job for job in lane.jobs if job.name == "sqlite"]
    merged = []
    if postgres:
        files = sorted(path for job in postgres for path in job.files)
        seconds = sum(job.seconds for job in postgres)
        name = "waiting" if lane.waiting else f"stream {lane.number}"
        merged.append(Job(name, files, postgres[0].env, seconds))
    for job in others:
        merged.append(Job(f"stream {lane.number} sqlite", job.files, job.env, job.seconds))
    return merged


def log_of(job: Job) -> Path:
    return LOGS / (job.name.replace(" ", "-") + ".log")


def stream_script(jobs: list[Job], nice: int = 0) -> str:
    """The shell script of a stream: its jobs one after the other, at niceness ``nice``
    (every process it starts inherits it)."""
    lines = [f"renice -n {nice} -p $$ > /dev/null"] if nice else []
    for job in jobs:
        log = log_of(job)
        env = " ".join(f"{key}={shlex.quote(value)}" for key, value in job.env.items())
        command = " ".join(shlex.quote(part) for part in [*PYTEST, *job.files])
        lines.append(
            f"env {env} {command} --junitxml={log.with_suffix('.xml')} > {log} 2>&1; "
            f"echo $? > {log.with_suffix('.code')}"
        )
    return "\n".join(lines)


def run_stream(jobs: list[Job], nice: int = 0) -> subprocess.Popen[bytes]:
    """A stream in its own shell; the streams run at the same time."""
    return subprocess.Popen(["bash", "-c", stream_script(jobs, nice)], cwd=ROOT)


def report(logs: list[Path]) -> bool:
    ok = True
    for log in logs:
        code_file = log.with_suffix(".code")
        code = int(code_file.read_text().strip()) if code_file.exists() else -1
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        print(f"===== {log.name}: exit {code} =====")
        print(text)
        ok = ok and code == 0
    return ok


def run(streams: int, sqlite_files: list[str]) -> int:
    durations = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    lanes, serial = plan(streams, sqlite_files, durations)
    LOGS.mkdir(parents=True, exist_ok=True)
    for old in LOGS.glob("*"):
        old.unlink()
    began = time.monotonic()
    processes = []
    logs: list[Path] = []
    beside_waiting = any(lane.waiting and lane.jobs for lane in lanes)
    for lane in lanes:
        jobs = grouped(lane)
        if not jobs:
            continue
        names = ", ".join(
            f"{job.name} ({len(job.files)} files, ~{job.seconds:.0f} s)" for job in jobs
        )
        nice = CPU_NICE if beside_waiting and not lane.waiting else 0
        print(f"stream {lane.number}{f' (nice {nice})' if nice else ''}: {names}", flush=True)
        processes.append(run_stream(jobs, nice))
        logs += [log_of(job) for job in jobs]
    for process in processes:
        process.wait()
    parallel = time.monotonic() - began
    ok = report(logs)
    print(f"parallel streams: {parallel:.0f} s", flush=True)
    if serial.files:
        print(f"serial, alone: {' '.join(serial.files)}", flush=True)
        serial_began = time.monotonic()
        run_stream([serial]).wait()
        ok = report([log_of(serial)]) and ok
        print(f"serial: {time.monotonic() - serial_began:.0f} s", flush=True)
    print(f"all tests: {time.monotonic() - began:.0f} s, {'passed' if ok else 'FAILED'}")
    return 0 if ok else 1


def record(reports: list[Path]) -> int:
    """Per-file seconds from the JUnit reports of a run (var/test-shards/*.xml) into
    tests/durations.json; a SQLite job's files are keyed ``sqlite:tests/...``."""
    durations: dict[str, float] = defaultdict(float)
    for path in reports:
        prefix = "sqlite:" if path.stem.endswith("sqlite") else ""
        for case in ET.parse(path).getroot().iter("testcase"):
            module = [
                part for part in case.get("classname", "").split(".") if not part[:1].isupper()
            ]
            durations[prefix + "/".join(module) + ".py"] += float(case.get("time", 0))
    rounded = {key: round(value, 1) for key, value in sorted(durations.items())}
    DURATIONS.write_text(json.dumps(rounded, indent=1) + "\n")
    print(f"{DURATIONS.relative_to(ROOT)}: {len(rounded)} files")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--sqlite", nargs="*", default=[], help="files run again on SQLite")
    parser.add_argument("--record", nargs="+", type=Path, help="JUnit reports to learn from")
    options = parser.parse_args()
    if options.record:
        return record(options.record)
    return run(max(1, options.streams), options.sqlite)


if __name__ == "__main__":
    sys.exit(main())
