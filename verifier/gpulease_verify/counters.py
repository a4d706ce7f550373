"""Traffic metering from NIC byte counters (按量计费): the bytes between two readings of a
counter, through wraps and resets. Conventions: ``gpulease_verify.arithmetic``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal, localcontext
from enum import StrEnum
from itertools import pairwise

from gpulease_verify.arithmetic import _CONTEXT, _whole


class DeltaKind(StrEnum):
    NORMAL = "normal"
    WRAP = "wrap"
    RESET = "reset"


@dataclass(frozen=True, slots=True)
class Delta:
    """Bytes counted between two consecutive readings of one counter."""

    start: datetime
    end: datetime
    bytes: int
    kind: DeltaKind

    @property
    def seconds(self) -> Decimal:
        """The interval in seconds, exact to the microsecond."""
        return Decimal((self.end - self.start) // timedelta(microseconds=1)) / 10**6

    @property
    def rate_bps(self) -> Decimal:
        """The average rate over the interval, ``bytes * 8 / seconds`` in bits/s, unrounded
        (50 significant digits): the 5-minute sample that feeds ``percentile_95``."""
        with localcontext(_CONTEXT):
            return Decimal(self.bytes * 8) / self.seconds


def counter_deltas(
    readings: Sequence[tuple[datetime, int]],
    *,
    counter_bits: int = 64,
    max_rate_bps: int | None = None,
) -> list[Delta]:
    """Bytes between consecutive readings of a monotonic NIC byte counter.

    ``readings`` are ``(time, counter value)`` in strictly increasing time; a counter value
    is ``0 <= value < 2**counter_bits``. For each consecutive pair ``(prev, new)``:

    - ``new >= prev``: ``normal``, ``bytes = new - prev``.
    - ``new < prev`` and a wrap is plausible: ``wrap``, ``bytes = 2**counter_bits - prev
      + new`` (the counter passed its maximum once).
    - ``new < prev`` otherwise: ``reset`` (the counter restarted from 0: driver reload,
      reboot, NIC replaced), ``bytes = new``. The bytes counted between ``prev`` and the
      restart are unknown and are not billed: a reset can only under-bill.

    A wrap is plausible when:

    - ``max_rate_bps`` is given (the port speed): the wrapped byte count does not exceed
      ``max_rate_bps * interval_seconds / 8 * 1.1`` (10% tolerance for clock skew between
      poller and NIC). Compared exactly in integers.
    - ``max_rate_bps`` is not given: only for counters of 32 bits or fewer. A 64-bit byte
      counter takes over eleven years to wrap at 400 Gbps, so going backwards is a reset.

    Only one wrap per interval can be seen. A 32-bit byte counter wraps every 0.34 s at
    100 Gbps, so for fast ports only 64-bit counters (Linux ``/sys/class/net/*/statistics``
    and ``ethtool -S`` on 64-bit kernels) give trustworthy traffic.
    """
    bits = _whole(counter_bits, "counter_bits")
    if bits <= 0:
        raise ValueError("counter_bits must be positive.")
    modulus = 2**bits
    if max_rate_bps is not None and (_whole(max_rate_bps, "max_rate_bps") <= 0):
        raise ValueError("max_rate_bps must be greater than zero.")
    for when, value in readings:
        _whole(value, "A counter reading")
        if not 0 <= value < modulus:
            raise ValueError(f"Counter reading {value} at {when} does not fit in {bits} bits.")

    deltas: list[Delta] = []
    for (start, prev), (end, new) in pairwise(readings):
        if end <= start:
            raise ValueError(f"Readings must be in strictly increasing time: {end} after {start}.")
        if new >= prev:
            deltas.append(Delta(start=start, end=end, bytes=new - prev, kind=DeltaKind.NORMAL))
            continue
        wrapped = modulus - prev + new
        if max_rate_bps is None:
            plausible = bits <= 32
        else:
            # wrapped <= max_rate_bps * interval_us / 10^6 / 8 * 11/10, in integers.
            interval_us = (end - start) // timedelta(microseconds=1)
            plausible = wrapped * 8 * 10 * 10**6 <= max_rate_bps * interval_us * 11
        if plausible:
            deltas.append(Delta(start=start, end=end, bytes=wrapped, kind=DeltaKind.WRAP))
        else:
            deltas.append(Delta(start=start, end=end, bytes=new, kind=DeltaKind.RESET))
    return deltas
