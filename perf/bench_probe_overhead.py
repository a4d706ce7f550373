"""Probe overhead: the wall time one throughput probe holds its nodes through gpulease
(claim, node locks, the switch witness's first reading, SSH logins, starting and stopping
the iperf3 server) divided by the bare iperf3 client run it wraps, on the network lab.
Target: at most 1.05. The settled switch reading, judging and recording come after the
nodes are free (benchmarks.witness_settle). Needs root (it builds a private lab)."""

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from perf.harness import flush, save, setup_django

SECONDS = 10
REPEAT = 3


def bare_iperf3(state) -> float:  # type: ignore[no-untyped-def]
    client, server = state.host("lab-h1"), state.host("lab-h2")
    listener = subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            server.namespace,
            "iperf3",
            "-s",
            "-1",
            "-p",
            "5399",
            "-B",
            server.data_address,
        ],
        stdout=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    started = time.perf_counter()
    subprocess.run(
        [
            "ip",
            "netns",
            "exec",
            client.namespace,
            "iperf3",
            "-c",
            server.data_address,
            "-p",
            "5399",
            "-J",
            "-t",
            str(SECONDS),
            "-O",
            "1",
            "-P",
            "1",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - started
    listener.wait(timeout=30)
    return elapsed


def through_gpulease(lease) -> float:  # type: ignore[no-untyped-def]
    """Until the probe's nodes are free again: claimed, locked, run and released. The
    switch witness's settled reading and the run's judging and recording follow off this
    path (benchmarks.witness_settle); they are done here, untimed, and checked."""
    from benchmarks import execution, services, witness_settle
    from benchmarks.models import NodeLock, ProbeRun

    for batch in services.request_runs(lease=lease, kinds=["throughput"], enqueue=False):
        if ProbeRun.objects.filter(batch=batch, target="lab-h1>lab-h2", pattern="ring").exists():
            started = time.perf_counter()
            execution.execute_batch(batch, max_attempts=1)
            elapsed = time.perf_counter() - started
            # only the client's port stays fenced until the switch reading
            assert set(NodeLock.objects.values_list("node__hostname", flat=True)) <= {"lab-h1"}
            witness_settle.settle_in_foreground(batch)
            run = ProbeRun.objects.get(batch=batch)
            assert run.state == "ok", run.error
            assert "witness" in (run.parsed or {}), "the switch witness was not read"
            return elapsed
    raise AssertionError("no ring batch for lab-h1>lab-h2")


def main() -> dict:
    setup_django()
    from django.conf import settings

    from benchmarks import netlab
    from benchmarks.lab_registry import register_lab

    flush()
    with tempfile.TemporaryDirectory() as state_dir:
        state = netlab.up(
            netlab.LabSpec(
                state_dir=Path(state_dir),
                prefix="gbench",
                data_subnet="198.18.250.0/24",
                mgmt_subnet="198.19.250.0/24",
            )
        )
        try:
            settings.PROBE_SSH_KEY = Path(state.client_key_path)
            settings.PROBE_THROUGHPUT_SECONDS = SECONDS
            lease = register_lab(state)
            bare = [bare_iperf3(state) for _ in range(REPEAT)]
            wrapped = [through_gpulease(lease) for _ in range(REPEAT)]
        finally:
            netlab.down(state_dir)
    results = {
        "iperf3_seconds": SECONDS + 1,
        "bare_iperf3_s": [round(x, 3) for x in bare],
        "through_gpulease_s": [round(x, 3) for x in wrapped],
        "ratio_median": round(statistics.median(wrapped) / statistics.median(bare), 3),
    }
    save("probe_overhead", results)
    return results


if __name__ == "__main__":
    main()
