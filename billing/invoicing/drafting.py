"""Drafting: what a tenant's invoice for a month says now (``compute_invoice``, no
writes), and saving it as the month's draft (``draft_invoice``, ``draft_period``). A draft
is rebuilt from scratch each time; an issued or paid invoice is never touched."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.translation import gettext as _

from billing.choices import BILLED_INVOICE_STATUSES, InvoiceStatus
from billing.invoicing.adjustments import adjustments, dispute_credits
from billing.invoicing.computed import (
    ComputedInvoice,
    ComputedLine,
    VoucherChange,
    check_period,
)
from billing.invoicing.lines import lease_part, lease_share
from billing.invoicing.summary import issued_message
from billing.invoicing.windows import BILLED_STATUSES, billed_leases
from billing.models import Invoice, InvoiceLine
from common.progress import progress
from gpulease_verify.calculations import invoice_totals_by_rate
from gpulease_verify.periods import Period
from leases.models import Tenant
from leases.selectors import leases_overlapping, tenants_where
from leases.services import lock_tenant


def compute_invoice(*, tenant: Tenant, period: str) -> ComputedInvoice:
    """What the tenant's invoice for the month says now: lease lines, adjustments for the
    billed months it is the next open invoice of, totals with tax per rate group. Reads
    only; nothing is saved."""
    check_period(period)
    start, end = Period.parse(period).bounds(tenant.time_zone)
    vouchers: list[ComputedLine] = []
    changes: list[VoucherChange] = []
    leases = lease_part(tenant, period, vouchers)
    lines = leases + adjustments(tenant, period, changes) + dispute_credits(tenant, period)
    totals = invoice_totals_by_rate([(line.amount, line.tax_rate_percent) for line in lines])
    rates = {line.tax_rate_percent for line in lines}
    return ComputedInvoice(
        tenant=tenant,
        period=period,
        period_start=start,
        period_end=end,
        lines=lines,
        tax_rate_percent=rates.pop() if len(rates) == 1 else None,
        tax_groups=totals.groups,
        subtotal=totals.subtotal,
        tax=totals.tax,
        total=totals.total,
        network_cost_share=lease_share(leases),
        voucher_credits=vouchers,
        voucher_changes=changes,
    )


def open_invoice(tenant: Tenant, period: str) -> Invoice | None:
    """The month's invoice that is not void (there is at most one)."""
    return (
        Invoice.objects.filter(tenant=tenant, period=period)
        .exclude(status=InvoiceStatus.VOID)
        .first()
    )


def draft_invoice(*, tenant: Tenant, period: str, now: datetime | None = None) -> Invoice:
    """Create or recompute the tenant's draft invoice for the month: its lines are
    deleted and rebuilt from ``compute_invoice``. An issued or paid invoice is refused, and
    so is a month that has not started yet (``now``, default the current time). A void
    invoice stays as it is; the month gets a new draft."""
    return drafted(tenant=tenant, period=period, now=now)[0]


@transaction.atomic
def drafted(
    *, tenant: Tenant, period: str, now: datetime | None = None
) -> tuple[Invoice, ComputedInvoice]:
    """``draft_invoice`` with the computation it saved (issuing reads its voucher credits)."""
    check_period(period)
    now = now or timezone.now()
    # One drafter per tenant at a time: the tenant row is the lock.
    tenant = lock_tenant(pk=tenant.pk)
    start, end = Period.parse(period).bounds(tenant.time_zone)
    if start > now:
        raise ValidationError(
            _("Period %(period)s has not started yet; there is nothing to bill.")
            % {"period": period}
        )
    invoice = open_invoice(tenant, period)
    if invoice is not None and invoice.status != InvoiceStatus.DRAFT:
        raise ValidationError(issued_message(invoice))
    computed = compute_invoice(tenant=tenant, period=period)
    if invoice is None:
        invoice = Invoice(tenant=tenant, period=period)
    invoice.period_start, invoice.period_end = start, end
    invoice.status = InvoiceStatus.DRAFT
    invoice.subtotal, invoice.tax, invoice.total = computed.subtotal, computed.tax, computed.total
    invoice.tax_rate_percent = computed.tax_rate_percent
    invoice.network_cost_share = computed.network_cost_share
    invoice.save()
    invoice.lines.all().delete()
    InvoiceLine.objects.bulk_create(
        InvoiceLine(
            invoice=invoice,
            position=position,
            lease=line.lease,
            kind=line.kind,
            description=line.description,
            quantity=line.quantity,
            unit=line.unit,
            unit_price=line.unit_price,
            amount=line.amount,
            tax_rate_percent=line.tax_rate_percent,
            detail=line.detail,
        )
        for position, line in enumerate(computed.lines, start=1)
    )
    return invoice, computed


def _candidate_tenants(period: str, tenant: Tenant | None) -> list[Tenant]:
    """Tenants with a billed lease near the month (every zone is within a day of UTC),
    or a billed invoice of an earlier month (late results may adjust it)."""
    utc_start, utc_end = Period.parse(period).bounds("UTC")
    near = leases_overlapping(
        statuses=BILLED_STATUSES,
        start=utc_start - timedelta(days=1),
        end=utc_end + timedelta(days=1),
    )
    tenants = tenants_where(
        condition=Q(pk__in=near.values("tenant"))
        | Q(invoices__period__lt=period, invoices__status__in=BILLED_INVOICE_STATUSES)
        | Q(leases__disputes__state="accepted", leases__disputes__credit_period=period)
    )
    if tenant is not None:
        tenants = tenants.filter(pk=tenant.pk)
    return list(tenants.order_by("slug"))


@transaction.atomic
def draft_period(
    *, period: str, tenant: Tenant | None = None, now: datetime | None = None
) -> list[Invoice]:
    """Draft the month's invoice of every tenant (or of one) with a billed lease in it,
    or with adjustments to carry from an earlier month. An issued or paid invoice is
    returned unchanged rather than refused, so that a run over every tenant goes on;
    callers say so."""
    check_period(period)
    invoices = []
    candidates = _candidate_tenants(period, tenant)
    for candidate in progress(candidates, desc=f"draft {period}", unit="tenant"):
        existing = open_invoice(candidate, period)
        if existing is not None and existing.status != InvoiceStatus.DRAFT:
            invoices.append(existing)
            continue
        changes: list[VoucherChange] = []
        if (
            existing is None
            and not billed_leases(tenant=candidate, period=period)
            and not adjustments(candidate, period, changes)
            and not changes
            and not dispute_credits(candidate, period)
        ):
            continue  # nothing to bill and nothing to carry
        invoices.append(draft_invoice(tenant=candidate, period=period, now=now))
    return invoices
