"""A probe batch is asked to stop before Celery kills it, whatever PROBE_TASK_TIME_LIMIT_S
is: a limit of 30 s or less once gave a soft limit at or below zero, which stopped every
batch as it began (SoftTimeLimitExceeded before the claim)."""

from benchmarks.tasks import execute_batch, soft_time_limit


def test_the_soft_limit_comes_before_the_hard_one_and_after_the_start():
    assert soft_time_limit(900) == 870
    assert soft_time_limit(90) == 60
    assert soft_time_limit(20) == 14
    assert soft_time_limit(15) == 10
    assert 0 < execute_batch.soft_time_limit < execute_batch.time_limit
