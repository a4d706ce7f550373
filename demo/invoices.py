"""The demo's billing, the last of ``manage.py demo``'s three steps (after
``leases.demo.load_demo`` and ``demo.history.load_history``): it reads the ingested history.
"""

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from billing import invoicing
from billing import services as billing
from billing.choices import CreditNoteKind, InvoiceStatus, LineKind
from gpulease_verify.periods import Period
from leases.selectors import leases_with_reference

# The demo's billing: the tenant whose lease breached its SLA last month (the episode in
# demo.history) gets last month's invoice issued, a credit note on it and this
# month's draft.
BREACHED_LEASE = "ZY-2026-001"
DEMO_FORCE_REASON = "demo: the demo's history is synthetic and complete"
GOODWILL = Decimal("1000.00")
GOODWILL_REASON = (
    "Goodwill: ¥1,000.00 off ZY-2026-001's network fee for the two degraded days, "
    "agreed with the customer on top of the SLA credit."
)


@dataclass
class DemoInvoices:
    issued: str  # the number of last month's invoice
    credit_note: str
    draft: str  # the period of this month's draft
    created: int = 0  # documents created this run (0 on a second run)


def load_invoices(*, now: datetime | None = None) -> DemoInvoices:
    """Issue last month's invoice of the breached lease's tenant (by force, with a
    recorded reason, if runs held it back), credit ¥1,000.00 of its network fee, and draft
    this month. Run again, it finds the issued invoice and its credit note and only
    recomputes the draft."""
    now = now or timezone.now()
    tenant = leases_with_reference(reference=BREACHED_LEASE).select_related("tenant").get().tenant
    this_month = Period.containing(now, tenant.time_zone)
    last_month = str(this_month.previous)
    created = 0
    with transaction.atomic():
        invoice = invoicing.open_invoice(tenant, last_month)
        if invoice is None or invoice.status == InvoiceStatus.DRAFT:
            draft = billing.draft_invoice(tenant=tenant, period=last_month, now=now)
            forced = bool(billing.issue_blockers(draft))
            invoice = billing.issue_invoice(
                invoice=draft,
                force=forced,
                reason=DEMO_FORCE_REASON if forced else None,
                now=now,
            )
            created += 1
        note = invoice.credit_notes.order_by("issued_at", "pk").first()
        if note is None:
            line = (
                invoice.lines.filter(lease__reference=BREACHED_LEASE, kind=LineKind.NETWORK_FEE)
                .order_by("position")
                .first()
            )
            if line is None:
                raise ValueError(f"{invoice.label} has no network fee of {BREACHED_LEASE}.")
            note = billing.create_credit_note(
                invoice=invoice,
                reason=GOODWILL_REASON,
                corrections=[billing.Correction(position=line.position, amount=GOODWILL)],
                kind=CreditNoteKind.COMMERCIAL,
                now=now,
            )
            created += 1
        billing.draft_invoice(tenant=tenant, period=str(this_month), now=now)
    return DemoInvoices(
        issued=invoice.number, credit_note=note.number, draft=str(this_month), created=created
    )
