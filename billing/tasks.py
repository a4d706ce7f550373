"""Celery tasks: thin adapters that take ids and call a service. An incident's
notification (``billing.notify_incident``) is incidents.tasks'."""

from celery import shared_task

from billing import notifications
from incidents.tasks import TRANSIENT_DELIVERY_ERRORS


@shared_task(name="billing.ingest", ignore_result=True)
def ingest() -> int:
    """Roll up the runs finished since the last call (one batch; beat calls it every
    minute, and a backlog drains a batch a minute)."""
    from billing.ingest import ingest as ingest_runs

    return ingest_runs().runs


@shared_task(name="billing.draft_previous_month", ignore_result=True)
def draft_previous_month() -> int:
    """Month end: bring the rollups up to date, then draft each tenant's invoice for the
    month that has just ended in that tenant's own time zone. Beat calls it every hour on
    the 1st and 2nd (UTC), so every zone from UTC-12 to UTC+14 has closed its month by one
    of the calls; a month already drafted is left for `bill` to recompute."""
    from django.utils import timezone

    from billing.ingest import ingest_all
    from billing.invoicing import draft_period
    from billing.models import Invoice
    from gpulease_verify.periods import Period
    from leases.selectors import tenants_by_slug

    now = timezone.now()
    due = []
    for tenant in tenants_by_slug():
        period = Period.containing(now, tenant.time_zone).previous
        if not Invoice.objects.filter(tenant=tenant, period=str(period)).exists():
            due.append((tenant, str(period)))
    if not due:
        return 0
    ingest_all()
    return sum(len(draft_period(period=p, tenant=t, now=now)) for t, p in due)


@shared_task(name="billing.close_chain_checkpoints", ignore_result=True)
def close_chain_checkpoints() -> int:
    """Month end: sign a chain checkpoint for every lease billed in the month that has just
    ended in its tenant's zone. Beat calls it hourly on the 1st and 2nd (UTC), like the
    drafting; a checkpoint already made is kept, so the calls after the first do nothing."""
    from billing.checkpoints import close_due

    return close_due()


@shared_task(
    name="billing.notify_checkpoint",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    autoretry_for=TRANSIENT_DELIVERY_ERRORS,
    retry_backoff=True,
    retry_backoff_max=3600,
    retry_jitter=True,
    max_retries=10,
)
def notify_checkpoint(checkpoint_id: int) -> bool:
    """Send the tenant's webhook the new checkpoint (event ``chain.checkpoint``)."""
    return notifications.send_checkpoint(checkpoint_id=checkpoint_id)


@shared_task(name="billing.evaluate_thresholds", ignore_result=True)
def evaluate_thresholds(lease_id: int, periods: list[str]) -> list[int]:
    """After ingest committed new traffic samples of the lease: record the crossings of
    its tenant's thresholds in ``periods`` (``billing.thresholds``)."""
    from billing import thresholds

    return thresholds.evaluate(lease_id=lease_id, periods=periods)


@shared_task(
    name="billing.notify_threshold",
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    autoretry_for=TRANSIENT_DELIVERY_ERRORS,
    retry_backoff=True,
    retry_backoff_max=3600,
    retry_jitter=True,
    max_retries=10,
)
def notify_threshold(crossing_id: int) -> list[str]:
    """E-mail and webhook of a new threshold crossing; a retry sends only the channels
    that have not delivered yet."""
    return notifications.notify_threshold(crossing_id=crossing_id)
