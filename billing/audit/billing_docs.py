"""The bundle's billing documents: compliance step by step, the invoice lines (issued, or as
they would be drafted now) with the invoice's credit notes and lifecycle events, the credit
base and SLA credit, the dispute evidence and the disputes."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Prefetch, Q

from benchmarks import selectors as run_selectors
from billing import invoicing, sla, vouchers
from billing.models import (
    CreditNote,
    CreditNoteLine,
    Dispute,
    Evidence,
    Invoice,
    InvoiceEvent,
    Voucher,
)
from gpulease_verify import credit_base
from gpulease_verify import repair as repair_rules
from gpulease_verify.bundle import billed_lines
from gpulease_verify.calculations import sla_credit
from gpulease_verify.canonical import canonical_json, iso_utc, number_text
from gpulease_verify.samples import OUTCOMES
from incidents import selectors as incident_selectors
from incidents.models import Incident
from leases.contract_rules import credit_tiers
from leases.models import Lease, LeaseTerms

from .plain import _plain

ZERO = Decimal("0.00")


def _compliance_doc(summary: sla.SlaSummary) -> dict[str, Any]:
    def kind(figures: sla.Compliance) -> dict[str, Any]:
        return {
            **{name: getattr(figures, name) for name in OUTCOMES},
            "samples": figures.samples,
            "measured": figures.measured,
            "compliance_percent": _plain(figures.percent),
            "measured_percent": _plain(figures.measured_percent),
        }

    availability = summary.availability
    return {
        "by_kind": {name: kind(figures) for name, figures in sorted(summary.by_kind.items())},
        "availability": {
            "available_minutes": availability.available_minutes,
            "unavailable_minutes": availability.unavailable_minutes,
            "unknown_minutes": availability.unknown_minutes,
            **availability.counts(),
            "degraded_weighted": _plain(availability.degraded_weighted),
            "percent": _plain(availability.percent),
        },
        "credit_compliance_percent": _plain(summary.credit_compliance_percent),
    }


def _line(line: Any, position: int) -> dict[str, Any]:
    return {
        "position": position,
        "kind": str(line.kind),
        "description": line.description,
        "quantity": _plain(line.quantity),
        "unit": line.unit,
        "unit_price": _plain(line.unit_price),
        "amount": _plain(line.amount),
        "tax_rate_percent": _plain(line.tax_rate_percent),
        "detail": _plain(line.detail),
    }


def _invoice_doc(lease: Lease, period: str) -> dict[str, Any]:
    invoice = Invoice.objects.filter(tenant_id=lease.tenant_id, period=period).first()
    if invoice is not None:
        lines = invoice.lines.filter(lease=lease).order_by("position")
        return {
            "source": "invoice",
            "id": invoice.pk,
            "status": invoice.status,
            "period": invoice.period,
            "currency": invoice.currency,
            "tax_rate_percent": _plain(invoice.tax_rate_percent),
            "invoice_subtotal": _plain(invoice.subtotal),
            "invoice_tax": _plain(invoice.tax),
            "invoice_total": _plain(invoice.total),
            "note": (
                "the totals are the whole invoice's, tax per rate group; lines are this "
                "lease's only"
            ),
            "number": invoice.number,
            "issued_at": iso_utc(invoice.issued_at),
            "paid_at": iso_utc(invoice.paid_at),
            "voided_at": iso_utc(invoice.voided_at),
            "void_reason": invoice.void_reason,
            "lines": [_line(line, line.position) for line in lines],
            "credit_notes": _credit_notes_doc(invoice),
            "events": _events_doc(invoice),
            # The month's vouchers for the lease: those its invoice issued, and those the
            # late results found by later invoices issued (supplements, by issue).
            "vouchers_issued": [
                _voucher_doc(voucher)
                for voucher in vouchers.with_ledger(
                    Voucher.objects.filter(lease=lease, period=invoice.period).filter(
                        Q(source_invoice=invoice) | ~Q(source_invoice__period=invoice.period)
                    )
                ).order_by("issued_at", "number")
            ],
            "vouchers_applied": [
                {
                    "amount": _plain(redemption.amount),
                    "at": iso_utc(redemption.at),
                    "returns": _returns_doc(redemption),
                    "voucher": _voucher_doc(redemption.voucher),
                }
                for redemption in invoice.voucher_redemptions.prefetch_related(
                    Prefetch("voucher", queryset=vouchers.with_ledger(Voucher.objects.all())),
                    "returns__credit_note",
                ).order_by("at", "pk")
            ],
            "other_lines": [
                {
                    "position": line.position,
                    "kind": str(line.kind),
                    "lease": line.lease.reference if line.lease else None,
                    "amount": _plain(line.amount),
                    "tax_rate_percent": _plain(line.tax_rate_percent),
                }
                for line in invoice.lines.exclude(lease=lease)
                .select_related("lease")
                .order_by("position")
            ],
        }
    computed = []
    if lease.status in invoicing.BILLED_STATUSES:
        computed = invoicing.lease_lines(lease=lease, period=period, zone=lease.tenant.time_zone)
    return {
        "source": "computed",
        "id": None,
        "status": None,
        "period": period,
        "currency": "CNY",
        "note": "no invoice drafted yet: the lease's lines as they would be drafted now",
        "lines": [_line(line, position) for position, line in enumerate(computed, start=1)],
    }


def _voucher_doc(voucher: Voucher) -> dict[str, Any]:
    """A voucher with its whole ledger: every redemption, on any invoice, with that
    invoice's status (a void one's is released)."""
    return {
        "number": voucher.number,
        "lease": voucher.lease.reference,
        "period": voucher.period,
        "source_invoice_number": voucher.source_invoice.number,
        "source_invoice_status": voucher.source_invoice.status,
        "source_invoice_issued_at": iso_utc(voucher.source_invoice.issued_at),
        "supplements": voucher.supplements.number if voucher.supplements else None,
        "reason": voucher.reason,
        "adjustment": _adjustment_doc(voucher.detail) if voucher.reason else None,
        "amount": _plain(voucher.amount),
        "issued_at": iso_utc(voucher.issued_at),
        "validity_months": voucher.validity_months,
        "expires_at": iso_utc(voucher.expires_at),
        "voided_at": iso_utc(voucher.voided_at),
        "redemptions": [
            {
                "invoice_number": redemption.invoice.number,
                "invoice_status": redemption.invoice.status,
                "amount": _plain(redemption.amount),
                "at": iso_utc(redemption.at),
                "returns": _returns_doc(redemption),
            }
            for redemption in voucher.redemptions.all()
        ],
        "reductions": [
            {
                "invoice_number": reduction.invoice.number,
                "invoice_status": reduction.invoice.status,
                "amount": _plain(reduction.amount),
                "excess": _plain(reduction.excess),
                "at": iso_utc(reduction.at),
                "reason": reduction.reason,
                "adjustment": _adjustment_doc(reduction.detail),
            }
            for reduction in voucher.reductions.all()
        ],
    }


def _adjustment_doc(detail: dict[str, Any]) -> dict[str, Any]:
    """A late change's figures: what the month's vouchers gave before, the credit's
    voucher recomputed then, and the month and invoice it adjusts."""
    return {
        "given_before": detail.get("given_before"),
        "recomputed": detail.get("recomputed"),
        "adjusted_period": detail.get("adjusted_period"),
        "adjusted_invoice_number": detail.get("adjusted_invoice_number"),
    }


def _returns_doc(redemption: Any) -> list[dict[str, Any]]:
    """What credit notes on the redemption's invoice gave back of it, in order."""
    return [
        {
            "credit_note_number": back.credit_note.number,
            "amount": _plain(back.amount),
            "at": iso_utc(back.at),
        }
        for back in sorted(redemption.returns.all(), key=lambda row: (row.at, row.pk))
    ]


def _credit_notes_doc(invoice: Invoice) -> list[dict[str, Any]]:
    """Every credit note of the invoice (its totals cover lines of any lease), each line
    naming the invoice line it corrects by position (in ``lines`` or ``other_lines``)."""
    notes = (
        CreditNote.objects.filter(invoice=invoice)
        .prefetch_related(
            Prefetch(
                "lines",
                queryset=CreditNoteLine.objects.select_related("lease", "original_line").order_by(
                    "position"
                ),
            )
        )
        .order_by("issued_at", "pk")
    )
    return [
        {
            "number": note.number,
            "invoice_number": invoice.number,
            "kind": note.kind,
            "full_reversal": note.full_reversal,
            "reason": note.reason,
            "issued_at": iso_utc(note.issued_at),
            "issue_date": note.issue_date.isoformat(),
            "currency": note.currency,
            "subtotal": _plain(note.subtotal),
            "tax": _plain(note.tax),
            "total": _plain(note.total),
            "lines": [
                {
                    "position": line.position,
                    "original_position": line.original_line.position,
                    "lease": line.lease.reference if line.lease else None,
                    "kind": str(line.kind),
                    "description": line.description,
                    "amount": _plain(line.amount),
                    "tax_rate_percent": _plain(line.tax_rate_percent),
                }
                for line in note.lines.all()
            ],
        }
        for note in notes
    ]


def _events_doc(invoice: Invoice) -> list[dict[str, Any]]:
    """The invoice's life in the order it was recorded: who, when, from, to, why."""
    events = (
        InvoiceEvent.objects.filter(invoice=invoice)
        .select_related("actor", "credit_note")
        .order_by("at", "pk")
    )
    return [
        {
            "at": iso_utc(event.at),
            "kind": event.kind,
            "from_state": event.from_state,
            "to_state": event.to_state,
            "actor": event.actor.get_username() if event.actor else None,
            "reason": event.reason,
            "credit_note": event.credit_note.number if event.credit_note else None,
        }
        for event in events
    ]


def _base_doc(base: credit_base.CreditBase) -> dict[str, Any]:
    return {
        "credit_base": base.basis,
        "amount": _plain(base.amount),
        "parts": [
            {
                "terms_version": part.span.terms_version,
                "credit_base": part.span.basis,
                "start": iso_utc(part.span.start),
                "end": iso_utc(part.span.end),
                "amount": _plain(part.amount),
            }
            for part in base.parts
        ],
    }


def _closing_run(incident: Incident) -> int | None:
    """The run whose passing sample resolved an incident ingest closed (it closes at that
    run's finish): a scheduled run of the incident's lease, kind, pattern and target."""
    if incident.closed_source != "ingest" or incident.closed_at is None:
        return None
    runs = run_selectors.scheduled_closing_runs(
        lease_id=incident.lease_id,
        kind=incident.kind,
        pattern=incident.pattern,
        opened_at=incident.opened_at,
        closed_at=incident.closed_at,
    )
    if incident.pattern != "sweep":
        runs = runs.filter(target=incident.target)
    return runs.order_by("chain_index").values_list("pk", flat=True).first()


def _incidents_doc(
    lease: Lease, window: tuple[datetime | None, datetime | None]
) -> tuple[list[dict[str, Any]], list[Incident]]:
    """The lease's network faults open at some instant of the billed window or resolved in
    it (``gpulease_verify.repair``): their four instants, the runs that opened them and the
    run that resolved them; and the incidents themselves."""
    start, end = window
    if start is None or end is None:
        return [], []
    found = incident_selectors.repairs_overlapping(lease_id=lease.pk, start=start, end=end)
    return [
        {
            "id": incident.pk,
            "kind": incident.kind,
            "pattern": incident.pattern,
            "target": incident.target,
            "state": incident.state,
            "opened_at": iso_utc(incident.opened_at),
            "acknowledged_at": iso_utc(incident.acknowledged_at),
            "mitigated_at": iso_utc(incident.mitigated_at),
            "closed_at": iso_utc(incident.closed_at),
            "closed_source": incident.closed_source or None,
            "repair_minutes": (
                None
                if incident.closed_at is None
                else str(repair_rules.minutes(incident.opened_at, incident.closed_at))
            ),
            "opened_by_runs": sorted(run.pk for run in incident.runs.all()),
            "closed_by_run": _closing_run(incident),
        }
        for incident in found
    ], found


def _credit_doc(
    terms: LeaseTerms | None,
    compliance: Decimal | None,
    lines: list[dict[str, Any]],
    spans: list[credit_base.Span],
    month_seconds: int,
    repairs: tuple[list[Incident], datetime, datetime] | None = None,
) -> dict[str, Any] | None:
    if terms is None:
        return None
    fee = sum((Decimal(line["amount"]) for line in lines if line["kind"] == "network_fee"), ZERO)
    base = credit_base.credit_base(
        spans=spans, lines=billed_lines(lines), month_seconds=month_seconds
    )
    tiers = credit_tiers(terms.credit_tiers)
    result = sla_credit(
        base=base.amount,
        compliance_percent=compliance,
        tiers=tiers,
        cap_percent=terms.credit_cap_percent,
    )
    doc = {
        "terms_version": terms.version,
        "credit_base": _base_doc(base),
        "network_fee": _plain(fee),
        "compliance_percent": _plain(compliance),
        "tiers": [{"below_percent": str(b), "credit_percent": str(c)} for b, c in tiers],
        "cap_percent": _plain(terms.credit_cap_percent),
        "tier_percent": _plain(result.tier_percent),
        "percent_applied": _plain(result.percent_applied),
        "capped": result.capped,
        "reason": str(result.reason),
        "amount": _plain(result.amount),
    }
    if repairs is not None and terms.repair_objective_minutes is not None:
        incidents, start, end = repairs
        repair = repair_rules.repair_credit(
            incidents=incidents,
            start=start,
            end=end,
            objective_minutes=terms.repair_objective_minutes,
            credit_percent=terms.repair_credit_percent,
            base=base.amount,
            sla_percent=result.percent_applied,
            sla_amount=result.amount,
        )
        doc["repair"] = repair.as_dict()
        doc["total_amount"] = _plain(result.amount + repair.amount)
    return doc


def _evidence_doc(lease: Lease, start: datetime, end: datetime) -> list[dict[str, Any]]:
    items = (
        Evidence.objects.filter(lease=lease, measured_at__gte=start, measured_at__lt=end)
        .select_related("terms")
        .prefetch_related("nodes")
        .order_by("measured_at", "pk")
    )
    return [
        {
            "id": item.pk,
            "tool": item.tool,
            "measured_at": iso_utc(item.measured_at),
            "submitted_at": iso_utc(item.created_at),
            "nodes": sorted(node.hostname for node in item.nodes.all()),
            "raw_sha256": item.raw_sha256,
            "parsed": canonical_json(item.parsed),
            "measured_bps": item.measured_bps,
            "latency_us": number_text(item.latency_us),
            "terms_version": item.terms.version,
            "verdict": item.verdict,
            "rule": item.rule,
            "verdict_reason": item.verdict_reason,
        }
        for item in items
    ]


def _disputes_doc(lease: Lease, period: str, start: datetime, end: datetime) -> list[Any]:
    disputes = (
        Dispute.objects.filter(lease=lease)
        .filter(Q(created_at__gte=start, created_at__lt=end) | Q(credit_period=period))
        .prefetch_related("events", "evidence")
        .order_by("created_at", "pk")
    )
    return [
        {
            "id": dispute.pk,
            "state": dispute.state,
            "probe_run": dispute.probe_run_id,
            "incident": dispute.incident_id,
            "invoice": dispute.invoice_id,
            "reason": dispute.reason,
            "evidence": sorted(item.pk for item in dispute.evidence.all()),
            "decision_reason": dispute.decision_reason,
            "credit_cny": _plain(dispute.credit_cny),
            "credit_period": dispute.credit_period or None,
            "events": [
                {
                    "at": iso_utc(event.at),
                    "action": event.action,
                    "reason": event.reason,
                    "detail": _plain(event.detail),
                }
                for event in dispute.events.all()
            ],
        }
        for dispute in disputes
    ]
