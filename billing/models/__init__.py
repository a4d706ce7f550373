from billing.models.checkpoints import ChainCheckpoint
from billing.models.evidence import Dispute, DisputeEvent, DisputeState, Evidence, EvidenceTool
from billing.models.invoices import (
    CreditNote,
    CreditNoteLine,
    DocumentCounter,
    Invoice,
    InvoiceEvent,
    InvoiceImmutable,
    InvoiceLine,
)
from billing.models.rollups import HourlyRollup, IngestCursor, RunningFigure, TrafficSample
from billing.models.thresholds import Threshold, ThresholdCrossing
from billing.models.vouchers import Voucher, VoucherRedemption, VoucherReduction, VoucherReturn

__all__ = [
    "ChainCheckpoint",
    "CreditNote",
    "CreditNoteLine",
    "Dispute",
    "DisputeEvent",
    "DisputeState",
    "DocumentCounter",
    "Evidence",
    "EvidenceTool",
    "HourlyRollup",
    "IngestCursor",
    "Invoice",
    "InvoiceEvent",
    "InvoiceImmutable",
    "InvoiceLine",
    "RunningFigure",
    "Threshold",
    "ThresholdCrossing",
    "TrafficSample",
    "Voucher",
    "VoucherRedemption",
    "VoucherReduction",
    "VoucherReturn",
]
