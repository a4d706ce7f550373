"""Signed chain checkpoints (docs/audit.md): at each period's close in the
tenant's zone, every lease billed in the period gets one checkpoint of its hash chain,
signed with the provider's current audit key, published to the tenant (API, webhook,
portal) and carried in every later bundle. The rules an auditor checks them by live in
``gpulease_verify.checkpoints``."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from benchmarks import selectors as run_selectors
from benchmarks.links import link_pending
from billing import invoicing
from billing.audit_keys import signing_key
from billing.models import ChainCheckpoint
from common.tasks import send
from gpulease_verify import checkpoints as rules
from gpulease_verify.chain import GENESIS
from gpulease_verify.keys import public_key_info
from gpulease_verify.periods import Period
from leases.models import Lease, Tenant
from leases.selectors import tenants_by_slug

if TYPE_CHECKING:
    from common.archives import ArchivedMonth


def period_head(*, lease_id: int, end: datetime) -> tuple[int, str]:
    """The last link of a run whose slot is before ``end``: (index, hash); (0, genesis)
    when there is none."""
    head = run_selectors.chain_head_before(lease_id=lease_id, end=end)
    return (head[0] or 0, head[1]) if head else (0, GENESIS)


def create_checkpoint(
    *, lease: Lease, period: str, now: datetime | None = None
) -> tuple[ChainCheckpoint, bool]:
    """The lease's checkpoint of ``period`` and whether it was made now; an existing one
    is returned unchanged. Links the runs that are over first."""
    invoicing.check_period(period)
    existing = ChainCheckpoint.objects.filter(lease=lease, period=period).first()
    if existing is not None:
        return existing, False
    now = now or timezone.now()
    link_pending(lease_id=lease.pk, now=now)
    start, end = Period.parse(period).bounds(lease.tenant.time_zone)
    index, digest = period_head(lease_id=lease.pk, end=end)
    period_links = (
        run_selectors.runs_in_period(lease=lease, start=start, end=end)
        .filter(chain_index__lte=index)
        .count()
    )
    key = signing_key()
    info = public_key_info(key.public_key())
    checkpoint = ChainCheckpoint(
        lease=lease,
        period=period,
        head_index=index,
        head_hash=digest,
        links=index,
        period_links=period_links,
        signed_at=now,
        key_fingerprint=info["fingerprint"],
        public_key=info["public_key"],
    )
    signed = rules.signed_bytes(checkpoint.payload())
    checkpoint.signature = base64.b64encode(key.sign(signed)).decode()
    try:
        with transaction.atomic():
            checkpoint.save()
    except IntegrityError:  # another worker made it first
        return ChainCheckpoint.objects.get(lease=lease, period=period), False
    transaction.on_commit(lambda: _announce(checkpoint.pk))
    return checkpoint, True


def _announce(checkpoint_id: int) -> None:
    send("billing.notify_checkpoint", checkpoint_id)


def close_period(
    *,
    period: str,
    tenant: Tenant | None = None,
    lease: Lease | None = None,
    now: datetime | None = None,
) -> list[tuple[ChainCheckpoint, bool]]:
    """A checkpoint for every lease billed in ``period`` (of one tenant, or one lease)."""
    invoicing.check_period(period)
    if lease is not None:
        leases = [lease]
    else:
        tenants = [tenant] if tenant is not None else list(tenants_by_slug())
        leases = [
            billed
            for one in tenants
            for billed in invoicing.billed_leases(tenant=one, period=period)
        ]
    return [create_checkpoint(lease=item, period=period, now=now) for item in leases]


def close_due(*, now: datetime | None = None) -> int:
    """For beat: the month that has just ended in each tenant's zone gets its checkpoints
    (those not made yet). Returns how many were made."""
    now = now or timezone.now()
    made = 0
    for tenant in tenants_by_slug():
        period = str(Period.containing(now, tenant.time_zone).previous)
        made += sum(created for _cp, created in close_period(period=period, tenant=tenant, now=now))
    return made


def documents(*, lease: Lease, period: str) -> list[dict[str, Any]]:
    """The signed checkpoints of ``period`` and every earlier one, oldest first, as a
    bundle carries them."""
    rows = ChainCheckpoint.objects.filter(lease=lease, period__lte=period).select_related("lease")
    return [row.document() for row in rows.order_by("period")]


__all__ = ["close_due", "close_period", "create_checkpoint", "documents", "period_head"]


def archived_checkpoints(archived: ArchivedMonth) -> dict[str, Any]:
    """A month archive's anchors (``common.archives``; registered in billing.apps): the
    signed chain checkpoints of its leases for the month and the months either side."""
    month = archived.month
    periods = [str(month.previous), str(month), str(month.next)]
    rows = ChainCheckpoint.objects.filter(lease_id__in=archived.lease_ids, period__in=periods)
    return {
        "checkpoints": [
            {"lease_id": row.lease_id, **row.document()}
            for row in rows.select_related("lease").order_by("lease_id", "period")
        ]
    }
