"""A new chain checkpoint (billing.checkpoints) goes to the tenant's webhook as event
``chain.checkpoint``, with the signed checkpoint document, so the tenant keeps its own copy.
It is delivered and signed like an incident's event (``incidents.notifications.deliver``).

A threshold the tenant set that a month's figures reached (``billing.thresholds``) goes as
event ``threshold.crossed`` and as an e-mail to the contact e-mail."""

import uuid
from typing import Any

from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.models import ChainCheckpoint, ThresholdCrossing
from billing.thresholds import UNITS, shown
from common.locks import locking
from incidents.notifications import DELIVERY_NAMESPACE, deliver, in_zone, utc_iso

CHECKPOINT_EVENT = "chain.checkpoint"


def checkpoint_payload(checkpoint: ChainCheckpoint) -> dict[str, Any]:
    return {
        "event": CHECKPOINT_EVENT,
        "lease": checkpoint.lease.reference,
        "tenant": checkpoint.lease.tenant.slug,
        "checkpoint": checkpoint.document(),
        "sent_at": utc_iso(timezone.now()),
    }


def send_checkpoint(*, checkpoint_id: int) -> bool:
    """POST the checkpoint to the tenant's webhook; False when the tenant has none."""
    checkpoint = ChainCheckpoint.objects.select_related("lease__tenant").get(pk=checkpoint_id)
    tenant = checkpoint.lease.tenant
    if not tenant.webhook_url:
        return False
    deliver(
        tenant,
        event=CHECKPOINT_EVENT,
        msg_id=str(
            uuid.uuid5(DELIVERY_NAMESPACE, f"checkpoint/{checkpoint.pk}/{checkpoint.period}")
        ),
        payload=checkpoint_payload(checkpoint),
    )
    return True


THRESHOLD_EVENT = "threshold.crossed"


def threshold_payload(crossing: ThresholdCrossing) -> dict[str, Any]:
    """The ``threshold.crossed`` document (docs/billing/thresholds.md): the threshold, the
    period, the figure that reached it as the invoice would print it, the newest sample's
    slot, and each lease's month-to-date figures (``billing.running.document``)."""
    threshold = crossing.threshold
    return {
        "event": THRESHOLD_EVENT,
        "tenant": threshold.tenant.slug,
        "threshold": {
            "id": threshold.pk,
            "kind": threshold.kind,
            "value": str(crossing.value),
            "unit": UNITS[threshold.kind],
            "lease": threshold.lease.reference if threshold.lease else None,
        },
        "period": crossing.period,
        "figure": shown(threshold.kind, crossing.figure),
        "sample_at": utc_iso(crossing.sample_at),
        "crossed_at": utc_iso(crossing.crossed_at),
        "leases": crossing.figures.get("leases", []),
        "sent_at": utc_iso(timezone.now()),
    }


def send_threshold_webhook(*, crossing: ThresholdCrossing) -> None:
    """POST the crossing to the tenant's webhook; every attempt carries the same
    webhook-id, so the receiver drops a repeat."""
    name = f"threshold/{crossing.threshold_id}/{crossing.period}/{crossing.pk}"
    deliver(
        crossing.threshold.tenant,
        event=THRESHOLD_EVENT,
        msg_id=str(uuid.uuid5(DELIVERY_NAMESPACE, name)),
        payload=threshold_payload(crossing),
    )


def send_threshold_email(*, crossing: ThresholdCrossing) -> None:
    threshold = crossing.threshold
    tenant = threshold.tenant
    values = {
        "kind": threshold.get_kind_display(),
        "value": f"{crossing.value} {UNITS[threshold.kind]}",
        "period": crossing.period,
    }
    context = {
        **values,
        "tenant": tenant.name,
        "lease": threshold.lease.reference if threshold.lease else None,
        "figure": f"{shown(threshold.kind, crossing.figure)} {UNITS[threshold.kind]}",
        "sample_at": in_zone(crossing.sample_at, tenant.time_zone),
        "leases": [
            {
                "lease": document["lease"],
                "amount": document["usage"]["amount_so_far"],
                "projected": document["usage"]["projected_amount"],
            }
            for document in crossing.figures.get("leases", [])
            if document.get("usage")
        ],
    }
    send_mail(
        subject=_("[gpulease] Threshold reached: %(kind)s %(value)s (%(period)s)") % values,
        message=render_to_string("billing/threshold_email.txt", context).strip() + "\n",
        from_email=None,
        recipient_list=[tenant.contact_email],
        html_message=render_to_string("billing/threshold_email.html", context),
    )


def notify_threshold(*, crossing_id: int) -> list[str]:
    """Send the crossing's e-mail (to the tenant's contact e-mail) and then its signed
    webhook, each channel the tenant has and that has not delivered yet; the row is locked
    meanwhile, so two workers never send it twice. Returns the channels that delivered
    now; re-raises the first failure once what delivered is marked."""
    failure: Exception | None = None
    delivered: list[str] = []
    with transaction.atomic():
        crossing = (
            locking(
                ThresholdCrossing.objects.select_related("threshold__tenant", "threshold__lease"),
                of=("self",),
            )
            .filter(pk=crossing_id)
            .first()
        )
        if crossing is None:  # the threshold was deleted since: nothing to tell
            return []
        tenant = crossing.threshold.tenant
        if crossing.emailed_at is None and tenant.contact_email:
            try:
                send_threshold_email(crossing=crossing)
                crossing.emailed_at = timezone.now()
                delivered.append("email")
            except Exception as error:
                failure = error
        if failure is None and crossing.webhook_sent_at is None and tenant.webhook_url:
            try:
                send_threshold_webhook(crossing=crossing)
                crossing.webhook_sent_at = timezone.now()
                delivered.append("webhook")
            except Exception as error:
                failure = error
        crossing.save(update_fields=["emailed_at", "webhook_sent_at"])
    if failure is not None:
        raise failure
    return delivered
