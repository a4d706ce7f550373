"""`make bench`: run every benchmark and write perf/results/*.json."""

import os

from perf import bench_billing, bench_dispatcher, bench_probe_overhead

bench_dispatcher.main()
bench_billing.main()
if os.geteuid() == 0:
    bench_probe_overhead.main()
else:
    print("probe_overhead: skipped, it builds a network lab and needs root")
