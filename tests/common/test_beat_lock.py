"""One beat schedules at a time (common.beat_lock, config.beat_scheduler): the lock itself
on the test PostgreSQL, then two real `celery -A config beat` processes sharing it."""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from django.db import connection
from django.db.models.functions import Now
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from common import beat_lock
from common.models import BeatLock
from tests.conftest import require

# waits: two real beats kill and take over on a 2-second schedule. Beside a CPU stream of
# equal priority a loaded core delayed the killed holder's last bookkeeping write (seen once
# in three parallel runs); make test runs it in the waiting lane, which the CPU streams
# yield to (scripts/test_shards.py).
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.waits]

ROOT = Path(__file__).resolve().parents[2]


def test_one_holder_renews_others_wait_and_take_over_once_its_lease_runs_out(settings):
    settings.BEAT_LOCK_TTL_S = 30
    assert beat_lock.hold("a") == beat_lock.TAKEN
    assert beat_lock.hold("b") is None
    assert beat_lock.hold("a") == beat_lock.RENEWED
    lock = beat_lock.current()
    assert lock.holder == "a"
    assert timedelta(seconds=29) < lock.expires_at - lock.acquired_at < timedelta(seconds=31)

    # a's lease runs out (it died, or hangs): b takes over, and a, back, stands by.
    BeatLock.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert beat_lock.hold("b") == beat_lock.TAKEN
    assert beat_lock.hold("a") is None
    assert beat_lock.current().holder == "b"

    # A beat that stops cleanly releases it: the next one need not wait out the lease.
    beat_lock.release("a")  # not a's to release: nothing changes
    assert beat_lock.hold("a") is None
    beat_lock.release("b")
    assert beat_lock.hold("a") == beat_lock.TAKEN
    assert BeatLock.objects.count() == 1


def test_a_holder_whose_own_lease_ran_out_is_told_it_took_the_lock_anew():
    """Another beat may have held and released it meanwhile: the scheduler then reads the
    schedule afresh (TAKEN) instead of trusting its own memory of what it sent."""
    assert beat_lock.hold("a") == beat_lock.TAKEN
    BeatLock.objects.update(expires_at=Now())
    assert beat_lock.hold("a") == beat_lock.TAKEN
    assert beat_lock.hold("a") == beat_lock.RENEWED


# --- two real beats -----------------------------------------------------------------------

TTL_S = 10
TICK_S = 5  # DatabaseScheduler's longest sleep: how soon a standby asks again
EVERY_S = 2


def _sends(queue_dir: Path, queue: str) -> list[float]:
    """When beat sent each message of ``queue``, in seconds of the system's monotonic
    clock: kombu's filesystem transport names each message file by it (milliseconds)."""
    return sorted(
        int(path.name.split("_", 1)[0]) / 1000 for path in queue_dir.glob(f"*.{queue}.msg")
    )


def test_two_beats_send_each_due_time_once_and_the_standby_takes_over_a_killed_holder(
    tmp_path,
):
    require(connection.vendor == "postgresql", "the beats share the test database")
    database = connection.settings_dict
    login = database["USER"] + (f":{database['PASSWORD']}" if database["PASSWORD"] else "")
    every_2s, _ = IntervalSchedule.objects.get_or_create(every=EVERY_S, period="seconds")
    PeriodicTask.objects.create(
        name="single-beat: every 2 s",
        task="common.beat_heartbeat",
        interval=every_2s,
        queue="often",
    )
    # Due 10 s from now, then not for a minute: sent once, by the first holder, a few
    # seconds before it is killed. Its successor must not send it again, which it would if
    # the holder had not written that last run to the database at once.
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=60, period="seconds")
    PeriodicTask.objects.create(
        name="single-beat: every minute",
        task="common.beat_heartbeat",
        interval=every_minute,
        queue="rarely",
        last_run_at=timezone.now() - timedelta(seconds=50),
    )
    env = {
        **os.environ,
        "DATABASE_URL": (
            f"postgres://{login}@{database['HOST']}:{database['PORT']}/{database['NAME']}"
        ),
        "GPULEASE_VAR_DIR": str(tmp_path),
        "CELERY_BROKER_URL": "filesystem://",
        "BEAT_LOCK_TTL_S": str(TTL_S),
        "LOG_FORMAT": "plain",
    }
    queue_dir = tmp_path / "broker" / "queue"
    beats: list[tuple[subprocess.Popen, Path]] = []

    def start() -> tuple[subprocess.Popen, Path]:
        log = tmp_path / f"beat-{len(beats)}.log"
        with open(log, "w") as sink:
            process = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "config", "beat", "-l", "INFO"],
                cwd=ROOT,
                env=env,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        beats.append((process, log))
        return process, log

    def wait_for(condition, seconds, what):
        deadline = time.monotonic() + seconds
        while not (value := condition()):
            assert time.monotonic() < deadline, f"timed out waiting for {what}:\n" + "\n".join(
                log.read_text()[-3000:] for _, log in beats
            )
            time.sleep(0.2)
        return value

    try:
        first, first_log = start()
        wait_for(lambda: len(_sends(queue_dir, "often")) >= 2, 60, "the first beat to send")
        second, second_log = start()
        wait_for(lambda: "is standing by" in second_log.read_text(), 60, "the second beat")
        time.sleep(8)  # both beats tick; one sends

        killed_at = time.monotonic()
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        taken = wait_for(
            lambda: [at for at in _sends(queue_dir, "often") if at > killed_at],
            TTL_S + TICK_S + 10,
            "the standby to take over",
        )
        took_s = taken[0] - killed_at
        time.sleep(5)
        os.killpg(second.pid, signal.SIGKILL)
        second.wait(timeout=30)
    finally:
        for process, _ in beats:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)

    sends = _sends(queue_dir, "often")
    gaps = [later - earlier for earlier, later in pairwise(sends)]
    # Each due time sent once: two beats both sending would put pairs ~0 s apart.
    assert min(gaps) >= EVERY_S - 0.5, gaps
    # The takeover: within the holder's lease, plus a standby's tick, plus one interval.
    assert took_s <= TTL_S + TICK_S + EVERY_S + 1, took_s
    assert max(gaps) <= TTL_S + TICK_S + EVERY_S + 1, gaps
    assert len(sends) >= 8
    # The minute's entry: once, by the first holder, none by its successor.
    minutes = _sends(queue_dir, "rarely")
    assert len(minutes) == 1 and minutes[0] < killed_at, (minutes, killed_at)
    # Only the holder sent, and the standby never advanced an entry's bookkeeping: every
    # message is one run in the database.
    first_text, second_text = first_log.read_text(), second_log.read_text()
    sent_first = first_text.count("Sending due task single-beat: every 2 s")
    sent_second = second_text.count("Sending due task single-beat: every 2 s")
    assert sent_first + sent_second == len(sends)
    assert sent_second == len([at for at in sends if at > killed_at])
    assert PeriodicTask.objects.get(name="single-beat: every 2 s").total_run_count == len(sends)
    assert "holds the beat lock" in first_text and "is standing by" not in first_text
    assert "is standing by" in second_text and "holds the beat lock" in second_text


def test_a_lease_shorter_than_two_ticks_stops_the_start(tmp_path):
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**os.environ, "BEAT_LOCK_TTL_S": "5", "GPULEASE_VAR_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "BEAT_LOCK_TTL_S must be at least 10 s" in result.stderr
