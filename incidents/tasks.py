"""Celery tasks: thin adapters that take ids and call a service."""

import smtplib

from celery import shared_task

from incidents import notifications

TRANSIENT_DELIVERY_ERRORS = (notifications.WebhookFailed, smtplib.SMTPException, OSError)


# The name stays "billing.notify_incident" (the task was billing's): deliveries already queued
# under it still run, and config.celery.route_task sends it to BILLING_QUEUE as before.
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
