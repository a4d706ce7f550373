from billing.models.incidents import Incident
from billing.models.invoices import Invoice, InvoiceLine
from billing.models.rollups import HourlyRollup, IngestCursor, TrafficSample

__all__ = ["HourlyRollup", "Incident", "IngestCursor", "Invoice", "InvoiceLine", "TrafficSample"]
