"""The training-impact estimate (not a billed amount): all-reduce time, the communication
share, GPU-hours lost to a degraded fabric and the shortfalls per segment. Conventions:
``gpulease_verify.arithmetic``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext

from gpulease_verify.arithmetic import (
    _CONTEXT,
    HUNDRED,
    ZERO_CNY,
    Number,
    _non_negative,
    _positive,
    _whole,
)
from gpulease_verify.money import to_fen


def allreduce_seconds(
    *, parameters: int, bytes_per_parameter: Number, gpus: int, busbw_bps: Number
) -> Decimal:
    """Seconds per step to all-reduce the gradients, by the ring algorithm.

    Rule: each GPU moves ``2(N-1)/N * parameters * bytes_per_parameter`` bytes; nccl-tests'
    bus bandwidth already includes the ``2(N-1)/N`` factor (busbw = algbw * 2(N-1)/N), so
    ``t_comm = parameters * bytes_per_parameter * 2(N-1)/N / (busbw_bps / 8)``.
    ``busbw_bps`` is in bits/s (100 GB/s = 8 * 10^11 bits/s). One GPU -> 0. Latency terms
    and bucket overheads are ignored. Unrounded Decimal seconds.
    """
    params = _whole(parameters, "parameters")
    n = _whole(gpus, "gpus")
    width = _positive(bytes_per_parameter, "bytes_per_parameter")
    busbw = _positive(busbw_bps, "busbw_bps")
    if params < 0:
        raise ValueError("parameters cannot be negative.")
    if n < 1:
        raise ValueError("gpus must be at least 1.")
    with localcontext(_CONTEXT):
        moved = params * width * 2 * (n - 1) / n
        return moved * 8 / busbw


def communication_share(*, t_comm: Number, t_compute: Number) -> Decimal:
    """``t_comm / (t_comm + t_compute)``, unrounded.

    Assumes no overlap of compute and communication, so it is an upper bound: frameworks
    overlap the all-reduce of early buckets with the backward pass of later layers.
    """
    comm = _non_negative(t_comm, "t_comm")
    compute = _non_negative(t_compute, "t_compute")
    if comm + compute == 0:
        raise ValueError("A step cannot take zero time.")
    with localcontext(_CONTEXT):
        return comm / (comm + compute)


def gpu_hour_price(
    *, node_rent_per_month: Number, gpus_per_node: int, month_hours: Number
) -> Decimal:
    """CNY per GPU-hour: ``node_rent_per_month / gpus_per_node / month_hours``, unrounded
    (a rate, not an amount: 45,000 / 8 / 720 = 7.8125)."""
    rent = _non_negative(node_rent_per_month, "node_rent_per_month")
    gpus = _whole(gpus_per_node, "gpus_per_node")
    hours = _positive(month_hours, "month_hours")
    if gpus < 1:
        raise ValueError("gpus_per_node must be at least 1.")
    with localcontext(_CONTEXT):
        return rent / gpus / hours


def _step_seconds(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds: Decimal,
    busbw_bps: Decimal,
) -> Decimal:
    t_comm = allreduce_seconds(
        parameters=parameters,
        bytes_per_parameter=bytes_per_parameter,
        gpus=gpus,
        busbw_bps=busbw_bps,
    )
    with localcontext(_CONTEXT):
        step = compute_seconds + t_comm
    if step == 0:
        raise ValueError("A step cannot take zero time.")
    return step


def gpu_hours_lost(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds_per_step: Number,
    measured_busbw_bps: Number,
    reference_busbw_bps: Number,
    wall_hours: Number,
) -> Decimal:
    """GPU-hours a data-parallel job loses by running its all-reduce at the measured
    instead of the reference bus bandwidth, unrounded.

    Rule: ``gpus * wall_hours * (1 - t_step(reference) / t_step(measured))``, with
    ``t_step = compute_seconds_per_step + allreduce_seconds(...)``: of the wall hours run at
    the measured bandwidth, the share the same steps would not have needed at the
    reference one. 0 when measured >= reference (a network that beats the reference
    earns nothing back).
    """
    return _hours_lost(
        parameters=parameters,
        bytes_per_parameter=bytes_per_parameter,
        gpus=gpus,
        compute_seconds_per_step=compute_seconds_per_step,
        measured=[measured_busbw_bps],
        reference_busbw_bps=reference_busbw_bps,
        wall_hours=wall_hours,
    )[0]


def _hours_lost(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds_per_step: Number,
    measured: Sequence[Number],
    reference_busbw_bps: Number,
    wall_hours: Number,
) -> list[Decimal]:
    """``gpu_hours_lost`` for each of ``measured`` against one reference: the reference
    step is computed once, and each distinct measured figure once (a month's hours)."""
    compute = _non_negative(compute_seconds_per_step, "compute_seconds_per_step")
    wall = _non_negative(wall_hours, "wall_hours")
    reference = _positive(reference_busbw_bps, "reference_busbw_bps")
    figures = [_positive(one, "measured_busbw_bps") for one in measured]

    def step(busbw: Decimal) -> Decimal:
        return _step_seconds(
            parameters=parameters,
            bytes_per_parameter=bytes_per_parameter,
            gpus=gpus,
            compute_seconds=compute,
            busbw_bps=busbw,
        )

    t_step_r: Decimal | None = None
    known: dict[Decimal, Decimal] = {}
    lost = []
    for figure in figures:
        if figure >= reference:
            lost.append(Decimal(0))
            continue
        if figure not in known:
            if t_step_r is None:
                t_step_r = step(reference)
            t_step_m = step(figure)
            with localcontext(_CONTEXT):
                known[figure] = gpus * wall * (1 - t_step_r / t_step_m)
        lost.append(known[figure])
    return lost


@dataclass(frozen=True, slots=True)
class TrainingImpact:
    """Seconds, shares and factors are unrounded Decimals; ``cost_lost`` is CNY to 0.01."""

    t_comm_measured_s: Decimal
    t_comm_contracted_s: Decimal
    t_step_measured_s: Decimal
    t_step_contracted_s: Decimal
    comm_share_measured: Decimal
    comm_share_contracted: Decimal
    slowdown: Decimal
    gpu_hours_lost: Decimal
    cost_lost: Decimal


def training_impact(
    *,
    parameters: int,
    bytes_per_parameter: Number,
    gpus: int,
    compute_seconds_per_step: Number,
    measured_busbw_bps: Number,
    contracted_busbw_bps: Number,
    wall_hours: Number,
    gpu_hour_price: Number,
) -> TrainingImpact:
    """What the shortfall of measured against contracted bus bandwidth cost a
    data-parallel training job. An estimate for the customer report, never billed.

    Rule, with ``t_comm`` from ``allreduce_seconds`` and no compute/communication overlap
    (an upper bound):

    - ``t_step = compute_seconds_per_step + t_comm``, at measured and at contracted busbw;
    - ``slowdown = t_step_measured / t_step_contracted`` (below 1 when the network beat
      the contract);
    - ``gpu_hours_lost``: ``gpu_hours_lost`` with the contracted bandwidth as reference;
    - ``cost_lost = gpu_hours_lost * gpu_hour_price``, rounded half-up to 0.01 CNY.
    """
    compute = _non_negative(compute_seconds_per_step, "compute_seconds_per_step")
    price = _non_negative(gpu_hour_price, "gpu_hour_price")
    measured = _positive(measured_busbw_bps, "measured_busbw_bps")
    contracted = _positive(contracted_busbw_bps, "contracted_busbw_bps")
    t_comm_m, t_comm_c = (
        allreduce_seconds(
            parameters=parameters,
            bytes_per_parameter=bytes_per_parameter,
            gpus=gpus,
            busbw_bps=busbw,
        )
        for busbw in (measured, contracted)
    )
    lost_hours = gpu_hours_lost(
        parameters=parameters,
        bytes_per_parameter=bytes_per_parameter,
        gpus=gpus,
        compute_seconds_per_step=compute,
        measured_busbw_bps=measured,
        reference_busbw_bps=contracted,
        wall_hours=wall_hours,
    )
    with localcontext(_CONTEXT):
        t_step_m = compute + t_comm_m
        t_step_c = compute + t_comm_c
        if t_step_m == 0:
            raise ValueError("A step cannot take zero time.")
        return TrainingImpact(
            t_comm_measured_s=t_comm_m,
            t_comm_contracted_s=t_comm_c,
            t_step_measured_s=t_step_m,
            t_step_contracted_s=t_step_c,
            comm_share_measured=communication_share(t_comm=t_comm_m, t_compute=compute),
            comm_share_contracted=communication_share(t_comm=t_comm_c, t_compute=compute),
            slowdown=t_step_m / t_step_c,
            gpu_hours_lost=lost_hours,
            cost_lost=to_fen(lost_hours * price),
        )


@dataclass(frozen=True, slots=True)
class ImpactSegment:
    """Elapsed time under one terms version and what was measured in it: the mean bus
    bandwidth of each measured hour, in bits/s."""

    wall_hours: Decimal
    gpus: int
    hourly_busbw_bps: tuple[Decimal, ...]
    contracted_busbw_bps: Decimal
    sla_threshold_percent: Decimal
    gpu_hour_price: Decimal

    @property
    def threshold_busbw_bps(self) -> Decimal:
        """What the SLA guarantees: ``sla_threshold_percent`` of the contracted, exact."""
        with localcontext(_CONTEXT):
            return self.contracted_busbw_bps * self.sla_threshold_percent / HUNDRED


@dataclass(frozen=True, slots=True)
class Shortfall:
    """GPU-hours unrounded; ``cny`` to the fen."""

    gpu_hours: Decimal
    cny: Decimal


@dataclass(frozen=True, slots=True)
class SegmentShortfalls:
    below_threshold: Shortfall
    below_contract: Shortfall


@dataclass(frozen=True, slots=True)
class TrainingShortfalls:
    """Totals over the segments, and each segment's own figures in the same order."""

    below_threshold: Shortfall
    below_contract: Shortfall
    segments: tuple[SegmentShortfalls, ...]


@dataclass(frozen=True, slots=True)
class _JobModel:
    parameters: int
    bytes_per_parameter: Number
    compute_seconds_per_step: Number


def _segment_shortfall(
    segment: ImpactSegment, *, reference_bps: Decimal, model: _JobModel
) -> Shortfall:
    if not segment.hourly_busbw_bps or reference_bps <= 0:
        return Shortfall(gpu_hours=Decimal(0), cny=ZERO_CNY)
    lost = _hours_lost(
        parameters=model.parameters,
        bytes_per_parameter=model.bytes_per_parameter,
        compute_seconds_per_step=model.compute_seconds_per_step,
        gpus=segment.gpus,
        measured=segment.hourly_busbw_bps,
        reference_busbw_bps=reference_bps,
        wall_hours=segment.wall_hours,
    )
    with localcontext(_CONTEXT):
        hours = sum(lost, Decimal(0)) / len(lost)
        return Shortfall(gpu_hours=hours, cny=to_fen(hours * segment.gpu_hour_price))


def _total(parts: Sequence[Shortfall]) -> Shortfall:
    with localcontext(_CONTEXT):
        return Shortfall(
            gpu_hours=sum((part.gpu_hours for part in parts), Decimal(0)),
            cny=sum((part.cny for part in parts), ZERO_CNY),
        )


def training_shortfalls(
    *,
    segments: Sequence[ImpactSegment],
    parameters: int,
    bytes_per_parameter: Number,
    compute_seconds_per_step: Number,
) -> TrainingShortfalls:
    """The two shortfalls of a window cut into terms segments, each judged by its own terms.

    Rule, per segment: each measured hour's loss is ``gpu_hours_lost`` over the segment's
    wall hours at that hour's mean bus bandwidth against the reference; the segment
    loses the mean of those (an unmeasured hour is taken to be like the measured ones; a
    segment with no measured hour loses nothing). Two references:

    - below threshold: ``contracted * sla_threshold_percent / 100``, what the SLA
      guarantees and the provider owes;
    - below contract: the contracted bandwidth itself, informational.

    Each segment's ``cny = gpu_hours * its gpu_hour_price``, rounded half-up to 0.01; a
    total's ``cny`` is the sum of its segments' rounded ``cny`` (so the parts add up) and
    its ``gpu_hours`` the unrounded sum. Both are 0 wherever every measured hour reached
    the reference, so at 100 % compliance the below-threshold shortfall is 0.
    """
    model = _JobModel(parameters, bytes_per_parameter, compute_seconds_per_step)
    parts = tuple(
        SegmentShortfalls(
            below_threshold=_segment_shortfall(
                segment, reference_bps=segment.threshold_busbw_bps, model=model
            ),
            below_contract=_segment_shortfall(
                segment, reference_bps=segment.contracted_busbw_bps, model=model
            ),
        )
        for segment in segments
    )
    return TrainingShortfalls(
        below_threshold=_total([part.below_threshold for part in parts]),
        below_contract=_total([part.below_contract for part in parts]),
        segments=parts,
    )
