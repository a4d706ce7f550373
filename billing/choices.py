from django.db import models
from django.utils.translation import gettext_lazy as _


class InvoiceStatus(models.TextChoices):
    DRAFT = "draft", _("draft")
    ISSUED = "issued", _("issued")
    PAID = "paid", _("paid")
    VOID = "void", _("void")


class CreditNoteKind(models.TextChoices):
    """Whether the next recomputation of the month accounts for a credit note.

    A *correction* takes off a figure that was wrong (a node billed twice, a wrong
    assignment); once the data is fixed the month's recomputation agrees with it, and until
    then an adjustment bills the difference back. A *commercial* credit (goodwill, a
    negotiated discount) is a decision no recomputation knows about: it is never counted
    against the recomputation, so it is never taken back."""

    CORRECTION = "correction", _("correction of a wrong figure")
    COMMERCIAL = "commercial", _("commercial credit (goodwill, discount)")


class InvoiceEventKind(models.TextChoices):
    """One step of an invoice's life (``billing.models.InvoiceEvent``)."""

    ISSUED = "issued", _("issued")
    PAID = "paid", _("paid")
    VOIDED = "voided", _("voided")
    CREDITED = "credited", _("credit note issued")


# An issued or paid invoice is billed: it never changes, and late results adjust it.
BILLED_INVOICE_STATUSES = (InvoiceStatus.ISSUED, InvoiceStatus.PAID)


class LineKind(models.TextChoices):
    NODE_RENT = "node_rent", _("node rent")
    NETWORK_FEE = "network_fee", _("network fee")
    USAGE_GB = "usage_gb", _("traffic (per GB)")
    USAGE_P95 = "usage_p95", _("95th percentile bandwidth")
    SLA_CREDIT = "sla_credit", _("SLA credit")
    ADJUSTMENT = "adjustment", _("adjustment for an earlier period")


class ThresholdKind(models.TextChoices):
    """What a tenant's threshold watches (``billing.thresholds``): the month-to-date
    figures of ``billing.running``, as the invoice would show them."""

    SPEND_CNY = "spend_cny", _("spend so far (CNY)")
    USAGE_GB = "usage_gb", _("traffic so far (GB)")
    P95_MBPS = "p95_mbps", _("running 95th percentile (Mbit/s)")
