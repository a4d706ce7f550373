"""Celery routing (config.celery.route_task): billing tasks go to BILLING_QUEUE, which is
the default queue unless set, so one worker (make run) still runs everything."""

import pytest

from config.celery import app

BILLING_TASKS = [
    "billing.ingest",
    "billing.draft_previous_month",
    "billing.close_chain_checkpoints",
    "billing.notify_incident",
    "billing.notify_checkpoint",
    "billing.evaluate_thresholds",
    "billing.notify_threshold",
]


def queue_of(name: str, **options: str) -> str:
    return app.amqp.router.route(options, name, (), {})["queue"].name


def test_every_billing_task_is_routed():
    app.loader.import_default_modules()
    assert sorted(name for name in app.tasks if name.startswith("billing.")) == sorted(
        BILLING_TASKS
    )


@pytest.mark.parametrize("name", BILLING_TASKS)
def test_billing_tasks_go_to_the_billing_queue(settings, name):
    assert settings.BILLING_QUEUE == "celery"
    assert queue_of(name) == "celery"
    settings.BILLING_QUEUE = "billing"
    assert queue_of(name) == "billing"


def test_other_tasks_keep_the_default_queue_and_probe_batches_name_their_own(settings):
    settings.BILLING_QUEUE = "billing"
    for name in ("benchmarks.dispatch", "benchmarks.self_check", "common.beat_heartbeat"):
        assert queue_of(name) == "celery"
    assert queue_of("benchmarks.execute_batch", queue="probes.lab") == "probes.lab"
