"""Pure billing arithmetic, one import for all of it: 95th percentile, traffic metering,
proration, SLA credits, invoice totals, network cost share and the training-impact estimate.

No ORM and no Django here. An auditor recomputes an invoice with these functions, the
contract terms and the raw measurements alone, so every function states its rule and its
rounding in its docstring. The conventions (Decimal CNY, the one named half-up rounding,
floats refused, 50 significant digits in between, decimal units) are in
``gpulease_verify.arithmetic``. Each rule has its home, which this module re-exports as the
verifier's public API (billing, the portal, the tests and the docs import it from here):

- ``gpulease_verify.p95``: the 95th percentile (95计费), by direction and window;
- ``gpulease_verify.counters``: bytes between NIC counter readings (wraps, resets);
- ``gpulease_verify.charges``: traffic in GB, proration, SLA credits, invoice totals per
  VAT rate, the network's share of the bill;
- ``gpulease_verify.impact``: the training-impact estimate (not a billed amount).
"""

from gpulease_verify.charges import (
    BYTES_PER_GB,
    CreditReason,
    CreditResult,
    NodeRentLine,
    RateGroup,
    Totals,
    bytes_to_gb,
    credit_percent,
    invoice_totals,
    invoice_totals_by_rate,
    network_cost_share,
    node_rent_line,
    overlap_seconds,
    prorate,
    sla_credit,
    traffic_charge,
)
from gpulease_verify.counters import (
    Delta,
    DeltaKind,
    counter_deltas,
)
from gpulease_verify.impact import (
    ImpactSegment,
    SegmentShortfalls,
    Shortfall,
    TrainingImpact,
    TrainingShortfalls,
    allreduce_seconds,
    communication_share,
    gpu_hour_price,
    gpu_hours_lost,
    training_impact,
    training_shortfalls,
)
from gpulease_verify.p95 import (
    BITS_PER_MBPS,
    P95_DIRECTIONS,
    P95_DROP_PERCENT,
    P95_WINDOWS,
    P95Direction,
    P95Figure,
    P95Group,
    P95Line,
    P95Window,
    TrafficRate,
    billable_mbps,
    p95_bandwidth,
    p95_charge,
    p95_detail,
    p95_line,
    percentile_95,
)

__all__ = [
    "BITS_PER_MBPS",
    "BYTES_PER_GB",
    "P95_DIRECTIONS",
    "P95_DROP_PERCENT",
    "P95_WINDOWS",
    "CreditReason",
    "CreditResult",
    "Delta",
    "DeltaKind",
    "ImpactSegment",
    "NodeRentLine",
    "P95Direction",
    "P95Figure",
    "P95Group",
    "P95Line",
    "P95Window",
    "RateGroup",
    "SegmentShortfalls",
    "Shortfall",
    "Totals",
    "TrafficRate",
    "TrainingImpact",
    "TrainingShortfalls",
    "allreduce_seconds",
    "billable_mbps",
    "bytes_to_gb",
    "communication_share",
    "counter_deltas",
    "credit_percent",
    "gpu_hour_price",
    "gpu_hours_lost",
    "invoice_totals",
    "invoice_totals_by_rate",
    "network_cost_share",
    "node_rent_line",
    "overlap_seconds",
    "p95_bandwidth",
    "p95_charge",
    "p95_detail",
    "p95_line",
    "percentile_95",
    "prorate",
    "sla_credit",
    "traffic_charge",
    "training_impact",
    "training_shortfalls",
]
