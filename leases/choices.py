from django.db import models
from django.utils.translation import gettext_lazy as _


class Technology(models.TextChoices):
    ROCE = "roce", _("RoCE")
    INFINIBAND = "infiniband", _("InfiniBand")
    ETHERNET = "ethernet", _("Ethernet")


class Topology(models.TextChoices):
    FAT_TREE = "fat_tree", _("fat-tree")
    LEAF_SPINE = "leaf_spine", _("leaf-spine")
    RAIL_OPTIMISED = "rail_optimised", _("rail-optimised")
    SINGLE_SWITCH = "single_switch", _("single switch")


class SwitchRole(models.TextChoices):
    LEAF = "leaf", _("leaf")
    SPINE = "spine", _("spine")


class NodeStatus(models.TextChoices):
    AVAILABLE = "available", _("available")
    LEASED = "leased", _("leased")
    MAINTENANCE = "maintenance", _("maintenance")
    RETIRED = "retired", _("retired")


class GpuModel(models.TextChoices):
    A100 = "A100", "NVIDIA A100"
    A800 = "A800", "NVIDIA A800"
    H100 = "H100", "NVIDIA H100"
    H800 = "H800", "NVIDIA H800"
    H200 = "H200", "NVIDIA H200"
    H20 = "H20", "NVIDIA H20"
    L40S = "L40S", "NVIDIA L40S"
    NONE = "none", _("no GPU (lab host)")


class LinkLayer(models.TextChoices):
    INFINIBAND = "infiniband", _("InfiniBand")
    ETHERNET = "ethernet", _("Ethernet")


class LeaseStatus(models.TextChoices):
    DRAFT = "draft", _("draft")
    ACTIVE = "active", _("active")
    ENDED = "ended", _("ended")
    CANCELLED = "cancelled", _("cancelled")


# The only moves a lease may make; anything else is refused with a sentence.
LEASE_TRANSITIONS: dict[str, frozenset[str]] = {
    LeaseStatus.DRAFT: frozenset({LeaseStatus.ACTIVE, LeaseStatus.CANCELLED}),
    LeaseStatus.ACTIVE: frozenset({LeaseStatus.ENDED}),
    LeaseStatus.ENDED: frozenset(),
    LeaseStatus.CANCELLED: frozenset(),
}


class BillingMode(models.TextChoices):
    MONTHLY = "monthly", _("monthly plan (包月)")
    YEARLY = "yearly", _("yearly plan (包年)")
    PER_GB = "per_gb", _("pay-per-use by traffic (按量计费, per GB)")
    P95 = "p95", _("pay-per-use by 95th percentile bandwidth (95计费)")


class P95Direction(models.TextChoices):
    """gpulease_verify.calculations.P95Direction, with its labels."""

    TX = "tx", _("traffic the nodes sent (outbound)")
    RX = "rx", _("traffic the nodes received (inbound)")
    MAX = "max", _("the larger direction of each 5-minute sample, then its 95th")
    MAX_OF_P95 = "max_of_p95", _("the 95th of each direction, the larger of the two")


class P95Window(models.TextChoices):
    """gpulease_verify.calculations.P95Window, with its labels."""

    MONTHLY = "monthly", _("the 95th of the whole month")
    DAILY_AVERAGE = "daily_average", _("the 95th of each day, averaged over the days")


class ProbeKind(models.TextChoices):
    LINK = "link", _("link check")
    COUNTERS = "counters", _("NIC counters")
    THROUGHPUT = "throughput", _("throughput")
    LATENCY = "latency", _("latency")
    COLLECTIVE = "collective", _("collective (NCCL)")


HEAVY_PROBE_KINDS = frozenset({ProbeKind.THROUGHPUT, ProbeKind.LATENCY, ProbeKind.COLLECTIVE})


class HeavyProbePolicy(models.TextChoices):
    ANY_TIME = "any_time", _("any time")
    WINDOWS_ONLY = "windows_only", _("only inside agreed windows")


class InvoiceType(models.TextChoices):
    """What a tenant asks its invoices as (数电票): a 专票 lets the buyer deduct input VAT
    and needs its address, phone, bank and account; a 普票 needs name and tax ID only."""

    SPECIAL = "special", _("special VAT invoice (专票)")
    ORDINARY = "ordinary", _("ordinary invoice (普票)")
