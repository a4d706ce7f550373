"""`make bench`: run every benchmark and write perf/results/*.json."""

import os
import subprocess
import sys

from perf import (
    bench_audit,
    bench_billing,
    bench_dispatcher,
    bench_history,
    bench_lab_fidelity,
    bench_probe_overhead,
    bench_running,
    bench_telemetry,
)

bench_dispatcher.main()
bench_billing.main()
bench_running.main()
bench_audit.main()
bench_history.main()
# Part 2 (the lab over real SSH) runs only as root, like probe_overhead.
bench_telemetry.main()
if os.geteuid() == 0:
    bench_probe_overhead.main()
    bench_lab_fidelity.main()
else:
    print("probe_overhead, lab_fidelity: skipped, they build a network lab and need root")
# In a process of its own: it uses a database of its own (gpulease_bench_api), and Django
# is already set up on the others' here.
subprocess.run([sys.executable, "-m", "perf.bench_api"], check=True)
# Reads bench_api's database (a year of history on one lease), in a process of its own too.
subprocess.run([sys.executable, "-m", "perf.bench_portal"], check=True)
