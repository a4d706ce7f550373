"""Celery tasks: thin adapters that take ids and call a service."""

import smtplib

from celery import shared_task

from billing import notifications

TRANSIENT_DELIVERY_ERRORS = (notifications.WebhookFailed, smtplib.SMTPException, OSError)


@shared_task(
    name="billing.notify_incident",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    autoretry_for=TRANSIENT_DELIVERY_ERRORS,
    retry_backoff=True,
    retry_backoff_max=3600,
    retry_jitter=True,
    max_retries=10,
)
def notify_incident(  # type: ignore[no-untyped-def]
    self, incident_id: int, event: str, *, channels: list[str] | None = None
) -> list[str]:
    try:
        return notifications.notify(incident_id=incident_id, event=event, channels=channels)
    except notifications.PartlyDelivered as partly:
        # The retry that autoretry sends is built from the request: it carries only the
        # channels still pending, so a delivered email is not sent again.
        self.request.kwargs = {**(self.request.kwargs or {}), "channels": partly.pending}
        raise partly.failure from partly


@shared_task(name="billing.ingest", ignore_result=True)
def ingest() -> int:
    """Roll up the runs finished since the last call (one batch; beat calls it every
    minute, and a backlog drains a batch a minute)."""
    from billing.ingest import ingest as ingest_runs

    return ingest_runs().runs


@shared_task(name="billing.draft_previous_month", ignore_result=True)
def draft_previous_month() -> int:
    """Month end: bring the rollups up to date, then draft every tenant's invoice for the
    month that just ended (in Asia/Shanghai, the providers' zone; each invoice is still cut
    in its tenant's own zone)."""
    from datetime import timedelta
    from zoneinfo import ZoneInfo

    from django.utils import timezone

    from billing.ingest import ingest_all
    from billing.invoicing import draft_period

    ingest_all()
    local = timezone.now().astimezone(ZoneInfo("Asia/Shanghai"))
    last_month = local.replace(day=1) - timedelta(days=1)
    return len(draft_period(period=f"{last_month:%Y-%m}"))
