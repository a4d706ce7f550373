"""Reads of billing data. Other apps (api, portal, monitoring) read billing's tables
through these, never through the raw managers; ``billing.services`` holds the writes.

Scoped reads are ``*_visible_to(user)``: the rows ``Model.objects.visible_to(user)``
returns (common.querysets, the one scoping path). Provider-wide reads that bypass it are
named ``*_for_provider``. Each returns a lazy QuerySet where callers chain more, so the
SQL stays the caller's."""

from typing import Any

from django.db.models import Prefetch, QuerySet

from billing.models import (
    ChainCheckpoint,
    CreditNote,
    CreditNoteLine,
    Dispute,
    DisputeEvent,
    Evidence,
    HourlyRollup,
    Invoice,
    InvoiceEvent,
    InvoiceLine,
    RunningFigure,
    Threshold,
    Voucher,
    VoucherRedemption,
)

# --- read by api, portal, monitoring ---


def invoices_visible_to(user: Any) -> QuerySet[Invoice]:
    """The invoices ``user`` sees (common.querysets scoping)."""
    return Invoice.objects.visible_to(user)


def invoice_lines_visible_to(user: Any) -> QuerySet[InvoiceLine]:
    """The invoice lines ``user`` sees (common.querysets scoping)."""
    return InvoiceLine.objects.visible_to(user)


def credit_notes_visible_to(user: Any) -> QuerySet[CreditNote]:
    """The credit notes ``user`` sees (common.querysets scoping)."""
    return CreditNote.objects.visible_to(user)


def vouchers_visible_to(user: Any) -> QuerySet[Voucher]:
    """The vouchers ``user`` sees (common.querysets scoping)."""
    return Voucher.objects.visible_to(user)


def evidence_visible_to(user: Any) -> QuerySet[Evidence]:
    """The customer evidence ``user`` sees (common.querysets scoping)."""
    return Evidence.objects.visible_to(user)


def thresholds_visible_to(user: Any) -> QuerySet[Threshold]:
    """The usage and spend thresholds ``user`` sees (common.querysets scoping)."""
    return Threshold.objects.visible_to(user)


def hourly_rollups_visible_to(user: Any) -> QuerySet[HourlyRollup]:
    """The hourly rollups ``user`` sees (common.querysets scoping)."""
    return HourlyRollup.objects.visible_to(user)


def chain_checkpoints_of(*, user: Any, lease: Any) -> QuerySet[ChainCheckpoint]:
    """The signed chain checkpoints of ``lease`` that ``user`` sees, unordered."""
    return ChainCheckpoint.objects.visible_to(user).filter(lease=lease)


def invoices_for_provider() -> QuerySet[Invoice]:
    """Every invoice, unscoped."""
    return Invoice.objects.all()


def credit_notes_for_provider() -> QuerySet[CreditNote]:
    """Every credit note, unscoped."""
    return CreditNote.objects.all()


def vouchers_for_provider() -> QuerySet[Voucher]:
    """Every voucher, unscoped."""
    return Voucher.objects.all()


def evidence_for_provider() -> QuerySet[Evidence]:
    """Every piece of customer evidence, unscoped."""
    return Evidence.objects.all()


def disputes_for_provider() -> QuerySet[Dispute]:
    """Every dispute, unscoped."""
    return Dispute.objects.all()


def thresholds_for_provider() -> QuerySet[Threshold]:
    """Every usage and spend threshold, unscoped."""
    return Threshold.objects.all()


def credit_note_totals() -> QuerySet[CreditNote]:
    """Every credit note with only its id, invoice, total and issue instant loaded:
    unscoped (for a Prefetch of an invoice's ``credit_notes``)."""
    return CreditNote.objects.only("id", "invoice_id", "total", "issued_at")


def invoices_for_balance(*, user: Any) -> QuerySet[Invoice]:
    """The invoices ``user`` sees with their tenant, credit note totals and voucher
    redemptions (with their returns) prefetched: what ``billing.balance`` reads."""
    return (
        Invoice.objects.visible_to(user)
        .select_related("tenant")
        .prefetch_related(
            Prefetch("credit_notes", queryset=credit_note_totals()),
            "voucher_redemptions__returns",
        )
    )


def invoice_lines_of(*, user: Any, invoice: Invoice) -> QuerySet[InvoiceLine]:
    """The lines of ``invoice`` that ``user`` sees, with their leases, by position."""
    return (
        InvoiceLine.objects.visible_to(user)
        .filter(invoice=invoice)
        .select_related("lease")
        .order_by("position")
    )


def credit_notes_of(*, user: Any, invoice: Invoice) -> QuerySet[CreditNote]:
    """The credit notes on ``invoice`` that ``user`` sees, oldest first, each with its
    lines and the invoice lines they correct prefetched."""
    return (
        CreditNote.objects.visible_to(user)
        .filter(invoice=invoice)
        .prefetch_related(
            Prefetch("lines", queryset=CreditNoteLine.objects.select_related("original_line"))
        )
        .order_by("issued_at", "pk")
    )


def with_invoice_detail(*, invoices: QuerySet[Invoice]) -> QuerySet[Invoice]:
    """``invoices`` with their tenant, and their lines, credit note totals, events,
    voucher redemptions and issued vouchers prefetched (the API's invoice); unordered."""
    return invoices.select_related("tenant").prefetch_related(
        Prefetch(
            "lines",
            queryset=InvoiceLine.objects.select_related("lease").order_by("position"),
        ),
        Prefetch("credit_notes", queryset=credit_note_totals()),
        Prefetch(
            "events",
            queryset=InvoiceEvent.objects.select_related("actor", "credit_note").order_by(
                "at", "id"
            ),
        ),
        Prefetch(
            "voucher_redemptions",
            queryset=VoucherRedemption.objects.select_related("voucher", "invoice")
            .prefetch_related("returns")
            .order_by("at", "id"),
        ),
        Prefetch("vouchers_issued", queryset=Voucher.objects.only("id", "number")),
    )


def with_credit_note_lines(*, notes: QuerySet[CreditNote]) -> QuerySet[CreditNote]:
    """``notes`` with their tenant and invoice, and their lines (with lease and the
    invoice line each corrects) prefetched by position; unordered."""
    return notes.select_related("tenant", "invoice").prefetch_related(
        Prefetch(
            "lines",
            queryset=CreditNoteLine.objects.select_related("lease", "original_line").order_by(
                "position"
            ),
        )
    )


def with_dispute_history(*, disputes: QuerySet[Dispute]) -> QuerySet[Dispute]:
    """``disputes`` with their lease and deciding users, and their events (with actors)
    and evidence ids prefetched; unordered."""
    return disputes.select_related("lease", "opened_by", "decided_by").prefetch_related(
        Prefetch("events", queryset=DisputeEvent.objects.select_related("actor")),
        Prefetch("evidence", queryset=Evidence.objects.only("id")),
    )


def running_figures_of(*, lease_ids: list[int], periods: list[str]) -> QuerySet[RunningFigure]:
    """The stored running figures of these leases in these months, by lease then month:
    unscoped (``billing.running.refresh_running`` writes them)."""
    return RunningFigure.objects.filter(lease_id__in=lease_ids, period__in=periods).order_by(
        "lease_id", "period"
    )
