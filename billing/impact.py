"""Training impact: a network shortfall read as GPU-hours and money (an estimate, never
billed).

Assumptions, stated in every report:
- data-parallel training with one ring all-reduce of the gradients per step;
- the all-reduce runs at the lease's measured node-pair throughput, the figure the SLA
  judges (on a ring the slowest link sets the pace, so a mean is optimistic);
- no overlap of compute and communication (an upper bound on the communication share);
- the contracted bus bandwidth is the contracted per-node bandwidth;
- a GPU-hour is priced at node rent / GPUs per node / hours in a 30-day month.

The window is elapsed time only: from the start of the billed window to the earlier of
its end and now, never the rest of a month in progress. It is cut at every terms version
that takes effect inside it (``billing.invoicing.segments``) and each segment is judged
by its own terms: its contracted bandwidth, SLA threshold, node rent and GPU count.

Formula, for a segment of H elapsed hours on N GPUs, and each measured hour h (the mean
throughput of that hour's hourly rollup; hours holding a maintenance sample are left
out):

    t_step(bw)  = compute seconds per step + P x B x 2(N-1)/N x 8 / bw
    lost(h, R)  = N x H x (1 - t_step(R) / t_step(measured_h)), or 0 when measured_h >= R
    GPU-hours   = mean over the segment's measured hours of lost(h, R)
    CNY         = GPU-hours x node rent / GPUs per node / 720, half-up to 0.01

with two references R, both reported:
- below_threshold: R = SLA threshold % x contracted, what the contract guarantees and the
  provider owes; 0 at 100 % compliance;
- below_contract: R = contracted, informational (a network at 98 of 100 Gbps passes the
  SLA yet runs slower than contracted).
Totals add the segments (CNY: their rounded amounts). The keys ``gpu_hours_lost`` and
``cost_lost`` are the below-contract totals, as before. The step figures (``t_*``,
``comm_share_*``, ``slowdown``, ``measured_busbw_bps``, ``contracted_busbw_bps``,
``gpus``) describe the latest segment with a measurement. The arithmetic is
``gpulease_verify.calculations.training_shortfalls``."""

from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from billing.invoicing import segments as terms_segments
from billing.models import HourlyRollup
from gpulease_verify import calculations
from leases.choices import ProbeKind
from leases.models import Lease, LeaseTerms
from leases.selectors import TermsTimeline

GIGA = Decimal(10) ** 9
MONTH_HOURS = 720
HOURS_QUANTUM = Decimal("0.001")
SECONDS_PER_HOUR = Decimal(3600)


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


def lease_gpus(lease: Lease, at: datetime) -> tuple[int, int]:
    """(GPUs in the lease, GPUs per node) at an instant."""
    counts = list(lease.assignments.in_force_at(at).values_list("node__gpu_count", flat=True))
    return sum(counts), max(counts, default=8) or 8


def _hours(value: Decimal) -> str:
    return str(value.quantize(HOURS_QUANTUM, rounding=ROUND_HALF_UP))


def _shortfall(figure: calculations.Shortfall) -> dict[str, str]:
    return {"gpu_hours": _hours(figure.gpu_hours), "cny": str(figure.cny)}


def _segment(
    terms: LeaseTerms, *, gpus: int, per_node: int, hours: Decimal, hourly: tuple[Decimal, ...]
) -> calculations.ImpactSegment:
    return calculations.ImpactSegment(
        wall_hours=hours,
        gpus=gpus,
        hourly_busbw_bps=hourly,
        contracted_busbw_bps=terms.contracted_bandwidth_gbps * GIGA,
        sla_threshold_percent=terms.sla_threshold_percent,
        gpu_hour_price=calculations.gpu_hour_price(
            node_rent_per_month=terms.node_rent_per_month,
            gpus_per_node=per_node,
            month_hours=MONTH_HOURS,
        ),
    )


def _mean_bps(hourly: tuple[Decimal, ...]) -> Decimal:
    return (sum(hourly, Decimal(0)) / len(hourly)).quantize(Decimal(1), rounding=ROUND_HALF_UP)


def _step_figures(segment: calculations.ImpactSegment, model: Model) -> dict[str, Any]:
    measured = _mean_bps(segment.hourly_busbw_bps)
    step = calculations.training_impact(
        parameters=model.parameters,
        bytes_per_parameter=model.bytes_per_parameter,
        gpus=segment.gpus,
        compute_seconds_per_step=model.compute_seconds_per_step,
        measured_busbw_bps=measured,
        contracted_busbw_bps=segment.contracted_busbw_bps,
        wall_hours=segment.wall_hours,
        gpu_hour_price=segment.gpu_hour_price,
    )
    return {
        "gpus": segment.gpus,
        "measured_busbw_bps": int(measured),
        "contracted_busbw_bps": int(segment.contracted_busbw_bps),
        "t_comm_measured_s": str(step.t_comm_measured_s),
        "t_comm_contracted_s": str(step.t_comm_contracted_s),
        "t_step_measured_s": str(step.t_step_measured_s),
        "t_step_contracted_s": str(step.t_step_contracted_s),
        "comm_share_measured": str(step.comm_share_measured),
        "comm_share_contracted": str(step.comm_share_contracted),
        "slowdown": str(step.slowdown),
    }


def _shortfalls(
    parts: list[calculations.ImpactSegment], model: Model
) -> calculations.TrainingShortfalls:
    return calculations.training_shortfalls(
        segments=parts,
        parameters=model.parameters,
        bytes_per_parameter=model.bytes_per_parameter,
        compute_seconds_per_step=model.compute_seconds_per_step,
    )


def estimate(
    *,
    terms: LeaseTerms,
    gpus: int,
    gpus_per_node: int,
    measured_bps: Decimal | int,
    wall_hours: Decimal,
    model: Model = Model(),
) -> dict[str, Any] | None:
    """One figure held for ``wall_hours`` under one terms version (an incident's worst
    reading for its duration)."""
    if gpus < 2 or not measured_bps or wall_hours <= 0:
        return None
    part = _segment(
        terms,
        gpus=gpus,
        per_node=gpus_per_node,
        hours=wall_hours,
        hourly=(Decimal(measured_bps).quantize(Decimal(1)),),
    )
    result = _shortfalls([part], model)
    return {
        "model": model.describe(),
        **_step_figures(part, model),
        "wall_hours": _hours(wall_hours),
        "gpu_hours_lost": _hours(result.below_contract.gpu_hours),
        "cost_lost": str(result.below_contract.cny),
        "below_threshold": _shortfall(result.below_threshold),
        "below_contract": _shortfall(result.below_contract),
    }


def _measured_hours(lease: Lease, start: datetime, end: datetime) -> list[tuple[datetime, Decimal]]:
    """(hour, mean throughput of that hour) for each hour with a figure and no sample
    inside a maintenance window, whose hour starts in [start, end)."""
    rows = (
        HourlyRollup.objects.filter(
            lease=lease,
            kind=ProbeKind.THROUGHPUT,
            hour__gte=start,
            hour__lt=end,
            measured__gt=0,
            excluded=0,
        )
        .order_by("hour")
        .values_list("hour", "sum_bps", "measured")
    )
    return [(hour, Decimal(total) / measured) for hour, total, measured in rows]


def window_impact(
    *, lease: Lease, start: datetime, end: datetime, model: Model = Model()
) -> dict[str, Any] | None:
    """The training impact of ``[start, end)``, elapsed time the caller has already cut
    at now; None when nothing was measured in it or the lease has fewer than 2 GPUs."""
    if end <= start:
        return None
    measured = _measured_hours(lease, start, end)
    parts: list[calculations.ImpactSegment] = []
    described: list[dict[str, Any]] = []
    for cut in terms_segments(timeline=TermsTimeline.for_lease(lease), start=start, end=end):
        gpus, per_node = lease_gpus(lease, cut.start + (cut.end - cut.start) / 2)
        part = _segment(
            cut.terms,
            gpus=gpus,
            per_node=per_node,
            hours=Decimal(cut.seconds) / SECONDS_PER_HOUR,
            hourly=tuple(bps for hour, bps in measured if cut.start <= hour < cut.end),
        )
        parts.append(part)
        described.append(
            {
                "terms_version": cut.terms.version,
                "from": cut.start.isoformat(),
                "until": cut.end.isoformat(),
                "wall_hours": _hours(part.wall_hours),
                "measured_hours": len(part.hourly_busbw_bps),
                "gpus": gpus,
                "contracted_busbw_bps": int(part.contracted_busbw_bps),
                "threshold_busbw_bps": int(part.threshold_busbw_bps),
                "gpu_hour_price": str(part.gpu_hour_price),
            }
        )
    latest = next((part for part in reversed(parts) if part.hourly_busbw_bps), None)
    if latest is None or latest.gpus < 2:
        return None
    result = _shortfalls(parts, model)
    for entry, part, figures in zip(described, parts, result.segments, strict=True):
        entry["measured_busbw_bps"] = (
            int(_mean_bps(part.hourly_busbw_bps)) if part.hourly_busbw_bps else None
        )
        entry["below_threshold"] = _shortfall(figures.below_threshold)
        entry["below_contract"] = _shortfall(figures.below_contract)
    return {
        "model": model.describe(),
        **_step_figures(latest, model),
        "elapsed_from": start.isoformat(),
        "elapsed_until": end.isoformat(),
        "wall_hours": _hours(sum((part.wall_hours for part in parts), Decimal(0))),
        "gpu_hours_lost": _hours(result.below_contract.gpu_hours),
        "cost_lost": str(result.below_contract.cny),
        "below_threshold": _shortfall(result.below_threshold),
        "below_contract": _shortfall(result.below_contract),
        "segments": described,
    }
