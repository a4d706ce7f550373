"""Training impact: a network shortfall read as GPU-hours and money (an estimate).

Assumptions, stated in every report:
- data-parallel training with one ring all-reduce of the gradients per step;
- the all-reduce runs at the lease's bus bandwidth: the NCCL collective's measured bus
  bandwidth where the lease has collective runs, otherwise the mean node-pair throughput
  (on a ring the slowest link sets the pace, so this is optimistic);
- no overlap of compute and communication (an upper bound on the communication share);
- the contracted bus bandwidth is the contracted per-node bandwidth;
- a GPU-hour is priced at node rent / GPUs per node / hours in a 30-day month.
The arithmetic is billing.calculations.training_impact."""

from dataclasses import asdict, dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from billing import calculations
from billing.sla import SlaSummary
from leases.models import Lease, LeaseTerms

GIGA = Decimal(10) ** 9
MONTH_HOURS = 720


@dataclass(frozen=True)
class Model:
    """The training job the estimate is for."""

    parameters: int = 7 * 10**9
    bytes_per_parameter: int = 2  # bf16 / fp16 gradients
    compute_seconds_per_step: Decimal = Decimal(1)

    def describe(self) -> str:
        return (
            f"{self.parameters / 1e9:g}B parameters, {self.bytes_per_parameter}-byte "
            f"gradients, {self.compute_seconds_per_step} s of compute per step"
        )


def measured_busbw_bps(summary: SlaSummary) -> Decimal | None:
    collective = summary.kind("collective").mean_bps
    return collective if collective else summary.throughput.mean_bps


def lease_gpus(lease: Lease, at: datetime) -> tuple[int, int]:
    """(GPUs in the lease, GPUs per node) at an instant."""
    counts = list(lease.assignments.in_force_at(at).values_list("node__gpu_count", flat=True))
    return sum(counts), max(counts, default=8) or 8


def estimate(
    *,
    terms: LeaseTerms,
    gpus: int,
    gpus_per_node: int,
    measured_bps: Decimal | int,
    wall_hours: Decimal,
    model: Model = Model(),
) -> dict[str, Any] | None:
    if gpus < 2 or not measured_bps or wall_hours <= 0:
        return None
    impact = calculations.training_impact(
        parameters=model.parameters,
        bytes_per_parameter=model.bytes_per_parameter,
        gpus=gpus,
        compute_seconds_per_step=model.compute_seconds_per_step,
        measured_busbw_bps=Decimal(measured_bps).quantize(Decimal(1)),
        contracted_busbw_bps=terms.contracted_bandwidth_gbps * GIGA,
        wall_hours=wall_hours,
        gpu_hour_price=calculations.gpu_hour_price(
            node_rent_per_month=terms.node_rent_per_month,
            gpus_per_node=gpus_per_node,
            month_hours=MONTH_HOURS,
        ),
    )
    figures = {key: str(value) for key, value in asdict(impact).items()}
    return {
        "model": model.describe(),
        "gpus": gpus,
        "measured_busbw_bps": int(measured_bps),
        "contracted_busbw_bps": int(terms.contracted_bandwidth_gbps * GIGA),
        "wall_hours": str(wall_hours),
        **figures,
    }
