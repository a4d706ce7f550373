"""Lab fidelity (issue 34): what a healthy link of the network lab carries, as a share of
its shaper, measured the way gpulease measures a lease: its own throughput probe (iperf3 over
SSH, PROBE_THROUGHPUT_SECONDS with the first second left out, judged and stored).

It builds a private lab like the issue's bar (4 hosts of 1 Gbit on 2 leaves, 2 Gbit uplinks,
lab-h4 shaped to 400 Mbit), registers it as lease LAB-1 and runs N probes (default 20) of the
healthy ring pairs in turn (lab-h1>lab-h2, lab-h2>lab-h3), the first right after `up`. It
prints each run and the fidelity figure: median, min, max, spread, the first run's, with the
machine's load (load average, and the CPUs' busy and steal shares during each run from
/proc/stat). The ceiling is 8948/9014 = 0.9927: TCP payload per 9000-byte frame that HTB
counts. Needs root. `python -m perf.bench_lab_fidelity [--runs N]`."""

import argparse
import os
import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from perf.harness import flush, save, setup_django

RUNS = 20
CEILING = 8948 / 9014
DEGRADED = "lab-h4"


@dataclass(frozen=True)
class CpuTimes:
    busy: int
    steal: int
    total: int

    @classmethod
    def now(cls) -> "CpuTimes":
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        user, nice, system, idle, iowait, irq, softirq, steal = fields[:8]
        return cls(
            busy=user + nice + system + irq + softirq + steal,
            steal=steal,
            total=user + nice + system + idle + iowait + irq + softirq + steal,
        )

    def shares_since(self, before: "CpuTimes") -> tuple[float, float]:
        total = max(1, self.total - before.total)
        return (self.busy - before.busy) / total, (self.steal - before.steal) / total


def probe(lease, target: str):  # type: ignore[no-untyped-def]
    """One throughput probe of the ring pair ``target`` through gpulease; the other batches
    the request made are dropped unrun."""
    from benchmarks import execution, services
    from benchmarks.models import ProbeRun

    batches = services.request_runs(lease=lease, kinds=["throughput"], enqueue=False)
    runs = ProbeRun.objects.filter(batch__in=batches)
    run = runs.filter(target=target, pattern="ring").get()
    runs.exclude(batch=run.batch).delete()
    execution.execute_batch(run.batch, max_attempts=1)
    run.refresh_from_db()
    assert run.state == "ok", (run.state, run.error)
    return run


def seconds_of(raw_output: str) -> list[float]:
    import json

    report = json.loads(raw_output)
    return [
        float(i["sum"]["bits_per_second"])
        for i in report["intervals"]
        if not i["sum"].get("omitted")
    ]


def lab_parameters(state) -> dict:  # type: ignore[no-untyped-def]
    """What the lab under test really runs: read from the lab, not from the code."""
    from benchmarks.netlab.shell import in_netns, tc

    host = state.host("lab-h1")
    shaped = tc("class", "show", "dev", "data0", netns=host.namespace)
    burst = int(re.search(r"\bburst (\d+)b", shaped).group(1))  # type: ignore[union-attr]
    return {
        "host_burst_bytes": burst,
        "host_burst_ms": round(burst * 8 * 1000 / host.rate_bps, 2),
        "host_congestion_control": in_netns(
            host.namespace, "sysctl", "-n", "net.ipv4.tcp_congestion_control"
        ).strip(),
        "root_congestion_control": Path("/proc/sys/net/ipv4/tcp_congestion_control")
        .read_text()
        .strip(),
        "kernel": os.uname().release,
        "cpus": os.cpu_count(),
    }


def summary(figures: list[float]) -> dict:
    return {
        "median": round(statistics.median(figures), 4),
        "min": round(min(figures), 4),
        "max": round(max(figures), 4),
        "spread": round(max(figures) - min(figures), 4),
        "first_run": round(figures[0], 4),
        "below_0_985": sum(f < 0.985 for f in figures),
        "below_0_97": sum(f < 0.97 for f in figures),
    }


def main(runs: int = RUNS) -> dict:
    setup_django()
    from django.conf import settings

    from benchmarks import netlab
    from benchmarks.lab_registry import register_lab

    flush()
    loads = [os.getloadavg()[0]]
    rows = []
    with tempfile.TemporaryDirectory() as state_dir:
        state = netlab.up(
            netlab.LabSpec(
                state_dir=Path(state_dir),
                prefix="gfid",
                data_subnet="198.18.251.0/24",
                mgmt_subnet="198.19.251.0/24",
                uplink_rate="2gbit",
                degrade={DEGRADED: "400mbit"},
            )
        )
        try:
            settings.PROBE_SSH_KEY = Path(state.client_key_path)
            lease = register_lab(state)
            parameters = lab_parameters(state)
            print(f"lab_fidelity: {parameters}", flush=True)
            names = [h.name for h in state.hosts]
            rate = {h.name: h.rate_bps for h in state.hosts}
            ring = [(a, b) for a, b in zip(names, names[1:] + names[:1], strict=True)]
            healthy = [f"{a}>{b}" for a, b in ring if rate[a] == rate[b] == state.host_rate_bps]
            for index in range(runs):
                target = healthy[index % len(healthy)]
                load, cpu_before, started = os.getloadavg()[0], CpuTimes.now(), time.monotonic()
                run = probe(lease, target)
                busy, steal = CpuTimes.now().shares_since(cpu_before)
                shaped = min(rate[host] for host in target.split(">"))
                seconds = seconds_of(run.raw_output)
                row = {
                    "run": index + 1,
                    "target": target,
                    "fidelity": round(run.measured_bps / shaped, 4),
                    "worst_second": round(min(seconds) / shaped, 4),
                    "best_second": round(max(seconds) / shaped, 4),
                    "verdict": run.verdict,
                    "load_1m": round(load, 2),
                    "cpu_busy": round(busy, 3),
                    "cpu_steal": round(steal, 3),
                    "wall_s": round(time.monotonic() - started, 1),
                }
                rows.append(row)
                print(f"lab_fidelity: {row}", flush=True)
                loads.append(os.getloadavg()[0])
        finally:
            netlab.down(state_dir)
    figures = [row["fidelity"] for row in rows]
    results = {
        "runs": runs,
        "seconds": settings.PROBE_THROUGHPUT_SECONDS,
        "ceiling": round(CEILING, 4),
        "lab": parameters,
        "fidelity": summary(figures),
        "verdicts_fail": sum(row["verdict"] == "fail" for row in rows),
        "load_1m": {"median": round(statistics.median(loads), 2), "max": round(max(loads), 2)},
        "cpu_busy_median": round(statistics.median(row["cpu_busy"] for row in rows), 3),
        "cpu_steal_max": max(row["cpu_steal"] for row in rows),
        "per_run": rows,
    }
    save("lab_fidelity", results)
    return results


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS, help=f"probes to run ({RUNS})")
    main(parser.parse_args().runs)
