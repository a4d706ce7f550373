"""The web workers' process figures in prometheus_client's multiprocess mode (gunicorn with
PROMETHEUS_MULTIPROC_DIR, monitoring.gunicorn).

The library's documentation says custom collectors do not work in multiprocess mode, naming
the cpu and memory ones (https://prometheus.github.io/client_python/multiprocess/): a
ProcessCollector in the registry of /metrics describes whichever worker answers the scrape,
so ``process_cpu_seconds_total`` jumped from worker to worker and went backwards. So
/metrics leaves the process, platform and gc collectors out in that mode
(monitoring.metrics.registry) and exports instead what each worker writes to the
directory, in the metric types the mode supports:

- ``gpulease_web_process_cpu_seconds_total``, a Counter: each worker adds the user and
  system CPU time it spent since it last wrote. The multiprocess collector sums every
  worker's file, those of workers that have exited included (gunicorn's max_requests, a
  crash), so the sum only goes up while the master runs; a restart empties the directory
  (monitoring.gunicorn.on_starting), which Prometheus reads as a reset, as for any
  restarted process.
- ``gpulease_web_process_resident_memory_bytes`` and ``gpulease_web_process_open_fds``,
  Gauges in ``liveall`` mode: one series per live worker, labelled ``pid``; a worker's
  series go when it exits (monitoring.gunicorn.child_exit, ``mark_process_dead``).

A worker writes them after a request at most once a second, before it answers a scrape,
and when it exits (gunicorn's worker_exit hook); an idle worker's figures are those of its
last request. Outside multiprocess mode (runserver, tests) nothing is written here and
/metrics carries the usual ``process_*`` of its one process."""

from __future__ import annotations

import os
import time

from prometheus_client import Counter, Gauge

EVERY_S = 1.0
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Families:
    """Made by the first write, so that only processes that serve the web have files (a
    Celery child that imports this module writes none: its series would outlive it)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.cpu = Counter(
            "gpulease_web_process_cpu_seconds",
            "User and system CPU time spent by the web (gunicorn) workers, exited ones included",
            registry=None,
        )
        self.memory = Gauge(
            "gpulease_web_process_resident_memory_bytes",
            "Resident memory of each live web (gunicorn) worker",
            registry=None,
            multiprocess_mode="liveall",
        )
        self.open_fds = Gauge(
            "gpulease_web_process_open_fds",
            "Open file descriptors of each live web (gunicorn) worker",
            registry=None,
            multiprocess_mode="liveall",
        )


_families: _Families | None = None
_written = {"pid": 0, "cpu_s": 0.0, "at": -EVERY_S}


def enabled() -> bool:
    return bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))


def write(*, force: bool = False) -> None:
    """Write this worker's figures (at most once every EVERY_S unless ``force``)."""
    if not enabled():
        return
    now = time.monotonic()
    if os.getpid() != _written["pid"]:  # a process forked after import (gunicorn --preload)
        _written.update(pid=os.getpid(), cpu_s=0.0, at=-EVERY_S)
    if not force and now - _written["at"] < EVERY_S:
        return
    _written["at"] = now
    global _families
    directory = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    if _families is None or _families.directory != directory:
        _families = _Families(directory)
    times = os.times()
    cpu_s = times.user + times.system  # this process's own, from 0 at its fork
    _families.cpu.inc(max(cpu_s - _written["cpu_s"], 0.0))
    _written["cpu_s"] = cpu_s
    try:
        with open("/proc/self/statm") as statm:
            _families.memory.set(int(statm.read().split()[1]) * _PAGE)
        _families.open_fds.set(len(os.listdir("/proc/self/fd")))
    except OSError:  # not Linux: the CPU counter alone
        pass
