"""Invoices: one per tenant and billing month, computed from the contract terms, the node
assignments, the traffic samples and the hourly SLA rollups. All arithmetic and every
rounding is ``gpulease_verify.calculations``; this package only chooses the inputs, records them
in each line's ``detail`` and saves the result. Its modules, by use case:

- ``windows``: billing start (acceptance), the billed window, the leases a month bills,
  segments;
- ``lines``: a lease-month's lines (rent, fee, usage, credit) and its SLA credit;
- ``adjustments``: what has been billed so far, late-result adjustments, dispute credits;
- ``drafting``: ``compute_invoice`` (no writes), ``draft_invoice``, ``draft_period``,
  ``open_invoice``;
- ``summary``: ``invoice_summary`` and ``issued_message``;
- ``computed``: the computed line and invoice, the month, and shared formatting.

The rules, in the order an invoice is built:

1. **Period.** A calendar month in the tenant's time zone (``gpulease_verify.periods.Period``).
   Every proration divides by that month's seconds (``Period.seconds``), whatever part of it a
   lease covers.
2. **Leases.** The tenant's leases that are active or ended (drafts and cancelled leases
   are never billed) and overlap the month, in reference order.
3. **Billing start.** A lease whose first terms version says
   ``billing_starts_on_acceptance`` is billed from the finish of its first passing
   acceptance (``billing_start``). Not yet accepted: the lease gets no line at all this
   month; its charges start in the month the acceptance passes.
4. **Segments.** The billed window ``[max(month start, lease start, billing start),
   min(month end, lease end))`` is cut wherever a terms version takes effect, so a
   mid-month amendment gives two segments, each priced by its own version.
5. **Lines of a lease**, each amount rounded half-up to 0.01 CNY once, each carrying the
   VAT rate of its price component (rule 7):

   - *node rent*, per segment: the node-seconds of every live assignment inside the
     segment (a swap is two assignments that add up) x rate / month seconds;
   - *network fee*, per segment, for the monthly and yearly plans (包月/包年, both billed
     monthly): fee x segment seconds / month seconds. The pay-per-use modes replace the
     fixed fee, so it is not billed there;
   - *traffic* (按量计费), per segment: bytes of the samples whose slot starts in the
     segment (``metering.samples_in``; an interval that straddles the month boundary is
     split pro rata by time, ``gpulease_verify.traffic``) x price per GB;
   - *95th percentile* (95计费), per segment: the p95 of the segment's own samples, in
     billable Mbps, x price per Mbps x segment seconds / month seconds. A mid-month
     price or bandwidth change therefore bills each part's p95 for its share of the
     month; a lease that starts mid-month pays its p95 for the share it ran;
   - *SLA credit*, once per lease, automatic (no claim): the compliance over the whole
     billed window (``billing.sla.evaluate``), the credit tiers and cap of the terms in
     force at the end of that window, applied to the credit base: per segment, what its
     terms' ``credit_base`` names (``gpulease_verify.credit_base``): the network fee lines
     (default), the usage lines (per GB, 95th percentile), or the contracted monthly
     base fee (保底) prorated. No base, unknown compliance, or compliance at or above
     every tier: no line. Where that version's ``credit_mode`` is ``voucher`` the credit
     is no line either: issuing the invoice issues it as a voucher (``billing.vouchers``),
     applied to the next invoices after tax.

6. **Adjustments.** An issued (or paid) invoice never changes. Each of the tenant's
   billed months before this one whose next open draft this is (no other draft lies
   between them) is recomputed now, in memory, by the same code, and compared with what
   has been billed for it so far: its own lease lines, plus the adjustment lines that
   issued invoices already carry for it (``detail.adjusted_invoice``), plus the credit
   notes on those lines. Every (lease, kind, tax rate) whose amount differs gives one
   adjustment line of the difference, at that rate, whatever month it belongs to (a
   (lease, kind) billed at two rates, or whose rate was corrected, gives a line per rate);
   once that draft is issued the line counts as billed, so nothing is carried twice and
   nothing is lost. An accepted dispute's credit (``billing.evidence``) is one more
   adjustment line, minus the credit, at the network service's rate of the terms in force
   when it was accepted, on the invoice of the month it was accepted in. A credit the
   terms give as a voucher is compared the same way, per lease, with what the month's
   vouchers give so far (``voucher_changes``): no line; issuing the draft issues a
   supplementary voucher or reduces the month's vouchers (``billing.vouchers.adjust``).
7. **Tax and totals.** Each price component carries its VAT rate in the terms: node rent
   lines the version's ``rent_tax_rate_percent``; network fee, traffic, 95th percentile
   and SLA credit lines (a credit reduces the network service) its
   ``tax_rate_percent``; the credit line the rate of the version whose tiers it applies.
   ``invoice_totals_by_rate`` groups the lines by rate: subtotal = the sum of the lines,
   tax = the sum over rate groups of (group subtotal x rate / 100, rounded half-up once
   per group), total = subtotal + tax. The invoice's own ``tax_rate_percent`` is the rate
   all its lines share, or empty when they differ.
8. **Network cost share.** (network fee + usage) / (rent + network fee + usage), before
   credits, tax and adjustments: per invoice on the invoice, per lease in each of the
   lease's lines' detail.

A draft is recomputed from scratch each time (its lines are deleted and rebuilt), so the
same inputs give the same lines, positions and amounts; re-rating a past window after a
terms correction is just drafting again. Descriptions are written in English so that a
re-draft is identical whatever language the request ran in.
"""

from billing.invoicing.adjustments import (
    adjustable_invoices,
    adjustments,
    billed_so_far,
    dispute_credits,
)
from billing.invoicing.computed import (
    KIND_NAMES,
    KIND_ORDER,
    USAGE_KINDS,
    ComputedInvoice,
    ComputedLine,
    check_period,
    previous_period,
)
from billing.invoicing.drafting import (
    compute_invoice,
    draft_invoice,
    draft_period,
    drafted,
    open_invoice,
)
from billing.invoicing.lines import (
    LeaseCredit,
    LeaseFacts,
    credit_spans,
    lease_credit,
    lease_credits,
    lease_lines,
    month_credit,
    month_lines,
)
from billing.invoicing.summary import invoice_summary, issued_message
from billing.invoicing.windows import (
    BILLED_STATUSES,
    Segment,
    Window,
    awaiting_acceptance,
    billed_leases,
    billed_window,
    billing_start,
    billing_starts,
    requires_acceptance,
    segments,
)

__all__ = [
    "BILLED_STATUSES",
    "KIND_NAMES",
    "KIND_ORDER",
    "USAGE_KINDS",
    "ComputedInvoice",
    "ComputedLine",
    "LeaseCredit",
    "LeaseFacts",
    "Segment",
    "Window",
    "adjustable_invoices",
    "adjustments",
    "awaiting_acceptance",
    "billed_leases",
    "billed_so_far",
    "billed_window",
    "billing_start",
    "billing_starts",
    "check_period",
    "compute_invoice",
    "credit_spans",
    "dispute_credits",
    "draft_invoice",
    "draft_period",
    "drafted",
    "invoice_summary",
    "issued_message",
    "lease_credit",
    "lease_credits",
    "lease_lines",
    "month_credit",
    "month_lines",
    "open_invoice",
    "previous_period",
    "requires_acceptance",
    "segments",
]
