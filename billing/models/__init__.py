from billing.models.checkpoints import ChainCheckpoint
from billing.models.evidence import Dispute, DisputeEvent, DisputeState, Evidence, EvidenceTool
from billing.models.incidents import Incident
from billing.models.invoices import (
    CreditNote,
    CreditNoteLine,
    DocumentCounter,
    Invoice,
    InvoiceEvent,
    InvoiceImmutable,
    InvoiceLine,
    Voucher,
    VoucherRedemption,
)
from billing.models.rollups import HourlyRollup, IngestCursor, TrafficSample

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
    "Incident",
    "IngestCursor",
    "Invoice",
    "InvoiceEvent",
    "InvoiceImmutable",
    "InvoiceLine",
    "TrafficSample",
    "Voucher",
    "VoucherRedemption",
]
