"""The beat schedule, in code (django-celery-beat's DatabaseScheduler copies it into its
tables when beat starts, so the admin still shows it; an entry edited there is put back to
this at the next start).

All crontabs are UTC: a tenant's month closes at its own zone's midnight, so the monthly
jobs run hourly on the 1st and 2nd and each one acts only on tenants whose month is over
(and only once)."""

from datetime import timedelta

from celery.schedules import crontab

# How often the telemetry beat looks for nodes due (settings.TELEMETRY_TICK_S reads it).
TELEMETRY_TICK_S = 15

SCHEDULE = {
    # Run by a worker: beat, the broker, a worker and the database work. The alert
    # GpuleaseBeatHeartbeatMissing fires when none has run for five minutes.
    "gpulease: beat heartbeat": {
        "task": "common.beat_heartbeat",
        "schedule": timedelta(seconds=60),
    },
    "gpulease: dispatch due probes": {
        "task": "benchmarks.dispatch",
        "schedule": timedelta(seconds=60),
    },
    # Passive fabric telemetry: each node is read when its terms' interval has passed.
    "gpulease: poll fabric telemetry": {
        "task": "telemetry.poll",
        "schedule": timedelta(seconds=TELEMETRY_TICK_S),
    },
    # PostgreSQL's monthly partitions (common.partitions): made months ahead, and archived
    # to files past the retention; both do nothing on SQLite.
    "gpulease: create partitions ahead": {
        "task": "common.ensure_partitions",
        "schedule": crontab(minute="10", hour="1"),
    },
    "gpulease: archive partitions past retention": {
        "task": "common.archive_partitions",
        "schedule": crontab(minute="20", hour="2", day_of_month="3"),
    },
    "gpulease: probe results self-check": {
        "task": "benchmarks.self_check",
        "schedule": timedelta(seconds=300),
    },
    "gpulease: ingest finished probe runs": {
        "task": "billing.ingest",
        "schedule": timedelta(seconds=60),
    },
    "gpulease: draft last month's invoices": {
        "task": "billing.draft_previous_month",
        "schedule": crontab(minute="30", hour="*", day_of_month="1,2"),
    },
    "gpulease: sign last month's chain checkpoints": {
        "task": "billing.close_chain_checkpoints",
        "schedule": crontab(minute="45", hour="*", day_of_month="1,2"),
    },
}
