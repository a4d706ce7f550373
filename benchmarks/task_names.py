"""The names of benchmarks' Celery tasks (benchmarks/tasks.py). The services that enqueue
them send them by name (``common.tasks.send``), so they never import the tasks module,
which imports them."""

EXECUTE_BATCH = "benchmarks.execute_batch"
SETTLE_WITNESS = "benchmarks.settle_witness"
