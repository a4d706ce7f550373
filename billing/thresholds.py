"""A tenant's usage and spend thresholds (docs/billing/thresholds.md).

A tenant admin sets a line on one of three month-to-date figures, for one lease or for all
the tenant's leases together: spend so far (CNY), traffic so far (GB) or the running 95th
percentile (Mbit/s). The figures are ``billing.running``'s, that is the invoice's own
usage lines cut at now (``running.month_to_date``): spend is the sum of the usage lines,
each already rounded half-up to the fen as the invoice rounds it (199.99 GB at ¥0.50 is
¥99.995, shown and compared as ¥100.00); traffic is the per-GB lines' quantity (GB,
6 decimals); the 95th is the 95th-percentile lines' billed Mbit/s (the highest when the
terms changed in the month). All leases together: spend and traffic summed over the
leases, the 95th the highest of any lease. A figure at the line counts (``>=``).

After ingest commits new traffic samples of a lease whose tenant has a threshold, the
``billing.evaluate_thresholds`` task (enqueued on commit) evaluates the thresholds of that
lease and the tenant's all-leases ones for each billing period the new samples fall in (the
tenant's own month: a sample at 30 Nov 23:55 +08:00 counts for November even when ingest
reads it in December). The first evaluation of a period that finds a figure at or over its
line records a ThresholdCrossing, one per threshold and period (a unique constraint, so two
evaluations racing record one and the loser sends nothing), and on commit the
``billing.notify_threshold`` task sends the e-mail to the tenant's contact e-mail, then the
signed webhook (``billing.notifications``); each channel is marked when it delivered, so a
retry sends only what is still pending. A threshold added when its figure is already over
the line is told at the next ingest of a sample of the period.

Only a tenant admin who is not provider staff writes thresholds (they are the tenant's own
statements, like its contacts: ``accounts.selectors.require_tenant_admin``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from accounts.selectors import require_tenant_admin
from billing import running
from billing.choices import ThresholdKind
from billing.models import Threshold, ThresholdCrossing
from common.tasks import send_after_commit
from gpulease_verify.money import to_fen
from leases.choices import BillingMode
from leases.models import Lease, Tenant
from leases.selectors import every_lease_of, lease_with_tenant

UNITS = {
    ThresholdKind.SPEND_CNY: "CNY",
    ThresholdKind.USAGE_GB: "GB",
    ThresholdKind.P95_MBPS: "Mbit/s",
}
# The billing modes whose lines give each figure (a lease threshold must fit its lease).
MODES = {
    ThresholdKind.SPEND_CNY: (BillingMode.PER_GB, BillingMode.P95),
    ThresholdKind.USAGE_GB: (BillingMode.PER_GB,),
    ThresholdKind.P95_MBPS: (BillingMode.P95,),
}
GB_PLACES = Decimal("0.000001")  # the per-GB line's quantity (billing.invoicing.computed)
# A threshold's value: at most 12 digits before the point, 2 after (the model's field).
MAX_VALUE = Decimal("999999999999.99")


# --- the tenant's writes ----------------------------------------------------------------


def _refusal() -> str:
    return _("Only an admin of the tenant changes its thresholds.")


def _check_value(value: Decimal) -> Decimal:
    if not value.is_finite() or value <= 0 or value > MAX_VALUE:
        raise ValidationError(
            {"value": [_("A threshold is a number above 0 and at most 999999999999.99.")]}
        )
    return value.quantize(Decimal("0.01"))


def _check_lease(tenant: Tenant, lease: Lease | None, kind: str) -> None:
    if lease is None:
        return
    if lease.tenant_id != tenant.pk:
        raise ValidationError({"lease": [_("No such object.")]})
    latest = lease.terms.order_by("-version").first()
    mode = latest.billing_mode if latest is not None else ""
    if mode not in MODES[ThresholdKind(kind)]:
        raise ValidationError(
            {
                "lease": [
                    _("Lease %(lease)s is not billed by a figure this threshold watches.")
                    % {"lease": lease.reference}
                ]
            }
        )


def create_threshold(
    *,
    tenant: Tenant,
    user: Any,
    kind: str,
    value: Decimal,
    lease: Lease | None = None,
    enabled: bool = True,
    now: datetime | None = None,
) -> Threshold:
    require_tenant_admin(user, tenant, _refusal())
    if kind not in ThresholdKind.values:
        raise ValidationError({"kind": [_("Unknown threshold kind.")]})
    value = _check_value(value)
    _check_lease(tenant, lease, kind)
    now = now or timezone.now()
    return Threshold.objects.create(
        tenant=tenant,
        lease=lease,
        kind=kind,
        value=value,
        enabled=enabled,
        created_at=now,
        created_by=user,
        updated_at=now,
    )


def change_threshold(
    *,
    threshold: Threshold,
    user: Any,
    value: Decimal | None = None,
    enabled: bool | None = None,
    now: datetime | None = None,
) -> Threshold:
    """A new value or enabled state. Its kind and lease stay (a new line is a new
    threshold); a period already told is not told again for a changed value."""
    require_tenant_admin(user, threshold.tenant, _refusal())
    if value is not None:
        threshold.value = _check_value(value)
    if enabled is not None:
        threshold.enabled = enabled
    threshold.updated_at = now or timezone.now()
    threshold.save(update_fields=["value", "enabled", "updated_at"])
    return threshold


def delete_threshold(*, threshold: Threshold, user: Any) -> None:
    require_tenant_admin(user, threshold.tenant, _refusal())
    threshold.delete()


# --- the figures ------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """The month-to-date figures of some leases of a tenant (module docstring)."""

    spend_cny: Decimal
    usage_gb: Decimal | None  # None: no per-GB line among them
    p95_mbps: Decimal | None  # None: no 95th-percentile line among them
    sample_at: datetime | None  # the newest sample in them; None: no sample yet
    documents: list[dict[str, Any]]  # running.document of each usage-billed lease

    def of(self, kind: str) -> Decimal | None:
        return {
            ThresholdKind.SPEND_CNY: self.spend_cny,
            ThresholdKind.USAGE_GB: self.usage_gb,
            ThresholdKind.P95_MBPS: self.p95_mbps,
        }[ThresholdKind(kind)]


def figures(*, leases: Iterable[Lease], period: str, instant: datetime) -> Figures:
    spend = Decimal("0.00")
    gb: list[Decimal] = []
    p95: list[Decimal] = []
    newest: datetime | None = None
    documents = []
    for lease in leases:
        month = running.month_to_date(lease=lease, period=period, instant=instant)
        if month is None:
            continue
        documents.append(running.document(lease=lease, month=month, period=period))
        spend += month.amount
        if month.usage_gb is not None:
            gb.append(month.usage_gb)
        if month.p95_mbps is not None:
            p95.append(month.p95_mbps)
        if month.samples:
            last = month.samples[-1][0]
            newest = last if newest is None else max(newest, last)
    return Figures(
        spend_cny=spend,
        usage_gb=sum(gb, Decimal(0)) if gb else None,
        p95_mbps=max(p95) if p95 else None,
        sample_at=newest,
        documents=documents,
    )


def shown(kind: str, figure: Decimal) -> str:
    """A figure as the invoice prints it: CNY and Mbit/s to 0.01, GB to 6 decimals."""
    if kind == ThresholdKind.USAGE_GB:
        return str(figure.quantize(GB_PLACES))
    return str(to_fen(figure))


# --- evaluation -------------------------------------------------------------------------


periods_of = running.periods_of  # the tenant's months of a window of samples


def watch_after_commit(windows: dict[int, tuple[Lease, datetime, datetime]]) -> None:
    """After ingest rewrote the samples of [start, end) of each lease: once committed,
    evaluate the thresholds of each lease whose tenant has one enabled (one query)."""
    if not windows:
        return
    tenants = {lease.tenant_id for lease, _start, _end in windows.values()}
    watched = set(
        Threshold.objects.filter(tenant_id__in=tenants, enabled=True).values_list(
            "tenant_id", "lease_id"
        )
    )
    for lease_id, (lease, start, end) in sorted(windows.items()):
        if (lease.tenant_id, None) in watched or (lease.tenant_id, lease_id) in watched:
            periods = periods_of(lease.tenant.time_zone, start, end)
            send_after_commit("billing.evaluate_thresholds", lease_id, periods)


def evaluate(*, lease_id: int, periods: list[str], now: datetime | None = None) -> list[int]:
    """Record the crossings of the lease's thresholds and of its tenant's all-leases ones
    in ``periods`` that have none yet; the new crossings' ids (each is told on commit)."""
    lease = lease_with_tenant(pk=lease_id)
    tenant = lease.tenant
    now = now or timezone.now()
    thresholds = list(
        Threshold.objects.filter(tenant=tenant, enabled=True)
        .filter(Q(lease_id=lease_id) | Q(lease__isnull=True))
        .order_by("pk")
    )
    recorded: list[int] = []
    for period in sorted(set(periods)):
        told = set(
            ThresholdCrossing.objects.filter(threshold__in=thresholds, period=period).values_list(
                "threshold_id", flat=True
            )
        )
        due = [threshold for threshold in thresholds if threshold.pk not in told]
        cache: dict[bool, Figures] = {}
        for threshold in due:
            whole = threshold.lease_id is None
            if whole not in cache:
                leases = list(every_lease_of(tenant=tenant)) if whole else [lease]
                cache[whole] = figures(leases=leases, period=period, instant=now)
            found = cache[whole]
            figure = found.of(threshold.kind)
            if figure is None or found.sample_at is None or figure < threshold.value:
                continue
            crossing = record(threshold=threshold, period=period, figure=figure, found=found)
            if crossing is not None:
                recorded.append(crossing.pk)
    return recorded


def record(
    *, threshold: Threshold, period: str, figure: Decimal, found: Figures
) -> ThresholdCrossing | None:
    """The crossing of ``threshold`` in ``period``, or None when one is recorded already
    (by an earlier evaluation, or by one racing this one: the unique constraint waits for
    it and refuses the second). On commit its notification task is sent."""
    assert found.sample_at is not None
    try:
        with transaction.atomic():
            crossing = ThresholdCrossing.objects.create(
                threshold=threshold,
                period=period,
                value=threshold.value,
                figure=figure,
                sample_at=found.sample_at,
                crossed_at=timezone.now(),
                figures={"leases": found.documents},
            )
    except IntegrityError:
        return None
    send_after_commit("billing.notify_threshold", crossing.pk)
    return crossing
