from billing.models.evidence import Dispute, DisputeEvent, DisputeState, Evidence, EvidenceTool
from billing.models.incidents import Incident
from billing.models.invoices import Invoice, InvoiceLine
from billing.models.rollups import HourlyRollup, IngestCursor, TrafficSample

__all__ = [
    "Dispute",
    "DisputeEvent",
    "DisputeState",
    "Evidence",
    "EvidenceTool",
    "HourlyRollup",
    "Incident",
    "IngestCursor",
    "Invoice",
    "InvoiceLine",
    "TrafficSample",
]
