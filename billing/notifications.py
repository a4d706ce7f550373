"""A new chain checkpoint (billing.checkpoints) goes to the tenant's webhook as event
``chain.checkpoint``, with the signed checkpoint document, so the tenant keeps its own copy.
It is delivered and signed like an incident's event (``incidents.notifications.deliver``)."""

import uuid
from typing import Any

from django.utils import timezone

from billing.models import ChainCheckpoint
from incidents.notifications import DELIVERY_NAMESPACE, deliver, utc_iso

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
