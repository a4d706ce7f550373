"""Fabric health rules over the telemetry samples of a port, and the switch-side witness.

Each rule is named and versioned: a finding records the version that produced it, so a
later change of a rule never silently re-judges old findings. The rules come in sets
(:data:`RULE_SETS`); a lease's terms version says which set judges it (``health_rules``:
1 for every version written before set 2 existed, 2 for new ones), so a bundle is
recomputed by the set its terms name. The thresholds are a frozen
:class:`HealthThresholds` whose defaults are the public anchors named on each field; a
lease's terms may override them (``from_terms``).

Anchors: IBTA's link bit-error-rate target (10^-12) as NVIDIA's fabric health tooling
(NVSentinel) and Azure HPC's node health checks apply it to ``symbol_error``;
leptonai/gpud (components/accelerator/nvidia/infiniband, commit 4a8de33a) for flaps
(``store/scan_flaps.go``), drops (``store/scan_drops.go``), their sticky windows
(``component.go``, ``set_healthy.go``) and a port below its expected rate
(``check_thresholds.go``); the IBA PortCounters widths for saturated counters. The RoCE
congestion rates have no public per-second anchor: their defaults are this project's.

Pure and Django-free; time is whatever the samples and ``now`` say.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation

from gpulease_verify.telemetry import IB_COUNTER_BITS, PortSample

FATAL = "fatal"
DEGRADED = "degraded"

# Each set: rule -> the version of it the set applies.
RULE_SETS: dict[int, dict[str, int]] = {
    1: {
        "ib_symbol_errors": 1,
        "ib_link_error_recovery": 1,
        "ib_fatal_counters": 1,
        "link_flap": 1,
        "link_drop": 1,
        "roce_congestion": 1,
    },
    2: {
        "ib_symbol_errors": 1,
        "ib_link_error_recovery": 1,
        "ib_fatal_counters": 1,
        "link_flap": 2,
        "link_drop": 2,
        "roce_congestion": 1,
        "link_speed_downgrade": 1,
        "ib_counter_saturated": 1,
    },
}
LATEST_RULES = 2
RULES: dict[str, int] = RULE_SETS[LATEST_RULES]
SEVERITY: dict[str, str] = {
    "ib_symbol_errors": FATAL,
    "ib_link_error_recovery": FATAL,
    "ib_fatal_counters": FATAL,
    "link_flap": FATAL,
    "link_drop": FATAL,
    "roce_congestion": DEGRADED,
    "link_speed_downgrade": FATAL,  # degraded above speed_fatal_below_percent
    "ib_counter_saturated": DEGRADED,
}
# Counters whose increase is the link going down: not trusted from an interval whose
# down the switch disputed.
DOWN_COUNTERS = ("link_downed", "carrier_changes")
# Counters whose every increase means the link failed (IBA PortCounters): link_downed
# (the link went down), local_link_integrity_errors (too many local physical errors) and
# excessive_buffer_overrun_errors (flow control broke).
FATAL_COUNTERS = ("link_downed", "local_link_integrity_errors", "excessive_buffer_overrun_errors")

_PFC_PAUSE = re.compile(r"^[rt]x_prio[0-7]_pause$")


@dataclass(frozen=True)
class HealthThresholds:
    """Limits of the health rules. Rates are "above the limit fires"; counts "at or above"."""

    # IBTA's 10^-12 BER at the port's symbol rate comes to about 120 symbol errors an hour
    # (NVSentinel, Azure HPC health checks). Counted over a trailing window.
    symbol_errors_per_hour: float = 120
    symbol_error_window_s: float = 3600
    # gpud: link_error_recovery above 5 a minute is a link retraining over and over.
    link_error_recovery_per_minute: float = 5
    # gpud (scan_flaps.go): 3 flap events make a flapping port. Set 1 counts
    # down-then-up cycles instead, at least flap_min_spacing_s apart within flap_window_s
    # (a reading of gpud's 25 s that gpud does not have); set 2 counts gpud's events: the
    # port seen down at two polls at least flap_down_s apart, then ACTIVE again, within
    # flap_lookback_s.
    flap_cycles: int = 3
    flap_min_spacing_s: float = 25
    flap_window_s: float = 600
    flap_down_s: float = 25
    flap_lookback_s: float = 43200
    # gpud (--infiniband-flap-auto-clear-window, default 0): a flap stays a finding until
    # an operator clears it; above 0, it ends once the port has been up that long.
    flap_auto_clear_s: float = 0
    # gpud (scan_drops.go): a port down 4 minutes or more has dropped.
    drop_after_s: float = 240
    # gpud (component.go, dropStickyWindow): a drop stays a finding for 10 minutes after
    # the link recovered (set 1 held flaps as long).
    hold_down_s: float = 600
    # gpud (check_thresholds.go) and NHC's check_hw_ib: a port up below its expected rate
    # fails. Below this share of the expected rate it is fatal, at or above degraded;
    # 100 makes every downgrade fatal, as they do.
    speed_fatal_below_percent: float = 100
    # RoCE congestion (degraded, never fatal), per second over one poll interval. Ours:
    # set to flag sustained congestion, not a burst, on a 100-400 Gb/s port. PFC pause
    # frames per priority and direction (ethtool rx/tx_prioN_pause): above 1000/s the
    # lossless class is running on PFC, not ECN.
    pfc_pause_per_s: float = 1000
    # ECN-marked RoCE packets received (np_ecn_marked_roce_packets) and CNPs sent
    # (np_cnp_sent) / handled (rp_cnp_handled): DCQCN working hard.
    ecn_marked_per_s: float = 10000
    cnp_sent_per_s: float = 10000
    cnp_handled_per_s: float = 10000
    # Packet loss seen by the RDMA transport (out_of_sequence: go-back-N retransmits),
    # receive-queue exhaustion (out_of_buffer) and the slow-restart of congestion control.
    out_of_sequence_per_s: float = 10
    out_of_buffer_per_s: float = 10
    roce_slow_restart_per_s: float = 1

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"health threshold {item.name} must be a number, not {value!r}")
            if not math.isfinite(value) or value < 0:
                raise ValueError(
                    f"health threshold {item.name} must be a finite number >= 0, not {value!r}"
                )
        if self.flap_cycles < 1 or int(self.flap_cycles) != self.flap_cycles:
            raise ValueError(f"flap_cycles must be a whole number >= 1, not {self.flap_cycles}")
        for name in (
            "symbol_error_window_s",
            "flap_window_s",
            "flap_min_spacing_s",
            "flap_lookback_s",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"health threshold {name} must be greater than 0")
        if self.speed_fatal_below_percent > 100:
            raise ValueError("health threshold speed_fatal_below_percent must be at most 100")

    @classmethod
    def from_terms(cls, mapping: Mapping[str, object] | None) -> HealthThresholds:
        """The defaults with the terms' overrides: ``{"drop_after_s": 120, ...}``. Numbers
        may be JSON numbers or decimal strings; an unknown name, a non-number or a
        negative number is a ValueError whose message says which."""
        known = {item.name: item for item in fields(cls)}
        values: dict[str, int | float] = {}
        for name, raw in (mapping or {}).items():
            if name not in known:
                raise ValueError(
                    f"unknown health threshold {name!r}; known: {', '.join(sorted(known))}"
                )
            number = _number(name, raw)
            if known[name].type in ("int", int):
                if number != int(number):
                    raise ValueError(f"health threshold {name} must be a whole number")
                values[name] = int(number)
            else:
                values[name] = float(number)
        return cls(**values)  # type: ignore[arg-type]

    def congestion_limit(self, counter: str) -> float | None:
        """The per-second limit of a RoCE congestion counter; None for other counters."""
        if _PFC_PAUSE.match(counter):
            return self.pfc_pause_per_s
        return {
            "np_ecn_marked_roce_packets": self.ecn_marked_per_s,
            "np_cnp_sent": self.cnp_sent_per_s,
            "rp_cnp_handled": self.cnp_handled_per_s,
            "out_of_sequence": self.out_of_sequence_per_s,
            "out_of_buffer": self.out_of_buffer_per_s,
            "roce_slow_restart": self.roce_slow_restart_per_s,
        }.get(counter)


# The thresholds only one set reads: a bundle states those of its set (``fields_of``).
ONLY_IN_SET: dict[str, int] = {
    "flap_min_spacing_s": 1,
    "flap_window_s": 1,
    "flap_down_s": 2,
    "flap_lookback_s": 2,
    "flap_auto_clear_s": 2,
    "speed_fatal_below_percent": 2,
}


def rule_set(rules: int) -> dict[str, int]:
    """The rules of set ``rules`` (1 or 2) and their versions."""
    if rules not in RULE_SETS:
        raise ValueError(f"unknown health rule set {rules!r}; known: {sorted(RULE_SETS)}")
    return RULE_SETS[rules]


def fields_of(thresholds: HealthThresholds, rules: int = 1) -> dict[str, int | float]:
    """The thresholds set ``rules`` reads, by name."""
    rule_set(rules)
    return {
        item.name: getattr(thresholds, item.name)
        for item in fields(thresholds)
        if ONLY_IN_SET.get(item.name, rules) == rules
    }


def history_needed(limits: HealthThresholds, rules: int = 1) -> timedelta:
    """How far back ``evaluate`` must read for every rule to see what it counts: the
    symbol-error window, a flap's window or a drop, each with what holds it after."""
    flaps = (
        limits.flap_window_s + limits.hold_down_s
        if rules == 1
        else limits.flap_lookback_s + limits.flap_auto_clear_s
    )
    return timedelta(
        seconds=max(limits.symbol_error_window_s, flaps, limits.drop_after_s + limits.hold_down_s)
    )


# Rules on what each poll found: a finding ends only at a poll that finds otherwise.
STATE_RULES = frozenset({"link_speed_downgrade", "ib_counter_saturated"})


def ends_in_time(rule: str, rules: int, limits: HealthThresholds) -> bool:
    """Whether an open finding of ``rule`` can end with no new interval to show it (a
    hold-down or window running out), so that its port must be judged every cycle."""
    return rule not in STATE_RULES and not sticky(rule, rules, limits)


def sticky(rule: str, rules: int, limits: HealthThresholds) -> bool:
    """Whether a finding of ``rule`` ends only when an operator clears the port (set 2's
    flaps, unless ``flap_auto_clear_s``): its incident is not closed by the rules."""
    return rules == 2 and rule == "link_flap" and limits.flap_auto_clear_s <= 0


def _number(name: str, raw: object) -> Decimal:
    if isinstance(raw, bool) or not isinstance(raw, int | float | Decimal | str):
        raise ValueError(f"health threshold {name} must be a number, not {raw!r}")
    try:
        number = Decimal(str(raw).strip())
    except InvalidOperation:
        raise ValueError(f"health threshold {name} must be a number, not {raw!r}") from None
    if not number.is_finite():
        raise ValueError(f"health threshold {name} must be a finite number, not {raw!r}")
    if number < 0:
        raise ValueError(f"health threshold {name} must not be negative ({raw})")
    return number


@dataclass(frozen=True)
class Finding:
    """A rule that fired on a port: from ``start`` to ``end`` (None while open, hold-down
    included). ``detail`` is one sentence with the numbers."""

    port: str
    rule: str
    version: int
    severity: str
    start: datetime
    end: datetime | None
    detail: str


def evaluate(
    samples: Sequence[PortSample],
    thresholds: HealthThresholds | None = None,
    *,
    now: datetime,
    rules: int = 1,
    cleared: Iterable[datetime] = (),
) -> list[Finding]:
    """Every finding of every rule of set ``rules`` over ``samples`` (one port's or
    several ports', grouped here by port and put in time order), as of ``now``; samples
    after ``now`` are ignored. ``cleared``: the instants an operator cleared the port
    (set 2's flaps and drops start afresh after each, as after gpud's set-healthy).

    Hysteresis: a finding opens at the first interval its rule fires in (``start`` is the
    beginning of that interval) and stays open while the rule keeps firing. Set 1's flap
    and drop close ``hold_down_s`` after the link recovered, if no flap/down came within
    that time; set 2's are described at ``_flaps_v2`` and ``_drops_v2``; the other rules
    close at the end of the first clean interval after it. An interval that cannot tell
    (the first poll, a reset) neither opens nor closes a counter rule. An interval whose
    down the switch disputed is read as one whose state is unknown.
    """
    limits = thresholds or HealthThresholds()
    versions = rule_set(rules)
    tombstones = sorted(when for when in cleared if when <= now)
    found: list[Finding] = []
    for port, series in _by_port(samples, now).items():
        series = [_trusted(sample) for sample in series]
        found += _counter_rule(port, "ib_fatal_counters", series, _fatal_counters)
        found += _counter_rule(
            port,
            "ib_link_error_recovery",
            series,
            lambda s, _i, _ss: _link_error_recovery(s, limits),
        )
        found += _counter_rule(
            port,
            "ib_symbol_errors",
            series,
            lambda s, i, ss: _symbol_errors(s, i, ss, limits),
        )
        found += _counter_rule(
            port, "roce_congestion", series, lambda s, _i, _ss: _congestion(s, limits)
        )
        if versions["link_flap"] == 1:
            found += _flaps(port, series, limits, now)
            found += _drops(port, series, limits, now)
        else:
            found += _flaps_v2(port, series, limits, now, tombstones)
            found += _drops_v2(port, series, limits, now, tombstones)
            found += _state_rule(port, "link_speed_downgrade", series, _slow, limits)
            found += _state_rule(port, "ib_counter_saturated", series, _saturated, limits)
    return sorted(found, key=lambda f: (f.start, f.port, f.rule))


def _trusted(sample: PortSample) -> PortSample:
    """A disputed interval as the rules read it: state unknown, no down counted."""
    if not sample.disputed:
        return sample
    deltas = {k: v for k, v in sample.deltas.items() if k not in DOWN_COUNTERS}
    return replace(sample, up=None, down_cycles=0, deltas=deltas)


# What a stored sample keeps of its counters: those the rules read, the bytes that the
# switch-side witness and utilisation compare, and the error and drop counters an operator
# reads. Packets and the rest of a NIC's hundred counters are left out: a healthy port's
# interval is then a few dozen bytes.
BYTE_COUNTERS = frozenset({"tx_bytes", "rx_bytes", "port_xmit_data", "port_rcv_data"})
ERROR_COUNTERS = frozenset(
    {
        "rx_errors",
        "tx_errors",
        "rx_dropped",
        "tx_dropped",
        "rx_crc_errors",
        "rx_discards_phy",
        "tx_discards_phy",
        "port_rcv_errors",
        "port_xmit_discards",
        "port_rcv_remote_physical_errors",
    }
)

_DEFAULTS = HealthThresholds()


def kept(name: str) -> bool:
    return (
        name in FATAL_COUNTERS
        or name in ("symbol_error", "link_error_recovery")
        or name in BYTE_COUNTERS
        or name in ERROR_COUNTERS
        or _DEFAULTS.congestion_limit(name) is not None
    )


def compact(sample: PortSample) -> PortSample:
    """The sample as stored: only the counters ``kept`` names."""
    return replace(sample, deltas={k: v for k, v in sample.deltas.items() if kept(k)})


def merge(earlier: PortSample, later: PortSample) -> PortSample:
    """Two back-to-back intervals of one port as one: how quiet intervals are stored, a
    row every few minutes rather than every poll. Only calm intervals in the same
    condition are merged (``mergeable``), so no rule reads a merged interval differently
    (their counters are summed, the state and condition are the later one's)."""
    if earlier.port != later.port:
        raise ValueError("only intervals of one port merge")
    deltas = dict(earlier.deltas)
    for name, increase in later.deltas.items():
        deltas[name] = deltas.get(name, 0) + increase
    return PortSample(
        port=later.port,
        at=later.at,
        seconds=earlier.seconds + later.seconds,
        up=later.up,
        down_cycles=earlier.down_cycles + later.down_cycles,
        deltas=deltas,
        reset=earlier.reset or later.reset,
        rate_gbps=later.rate_gbps,
        expected_gbps=later.expected_gbps,
        saturated=later.saturated,
        disputed=earlier.disputed or later.disputed,
    )


def quiet(sample: PortSample, thresholds: HealthThresholds | None = None) -> bool:
    """Whether one interval can open no finding: calm (``calm``), at its expected rate
    and with no saturated counter. A port whose newest interval is quiet and that has no
    finding open needs no evaluation: a telemetry cycle evaluates only the few ports that
    moved."""
    return calm(sample, thresholds) and not sample.slow and not sample.saturated


def mergeable(earlier: PortSample, later: PortSample, thresholds: HealthThresholds | None) -> bool:
    """Whether two back-to-back intervals may be stored as one row: both calm and in the
    same condition (a port steadily at a lower rate, or with the same counters
    saturated, merges like a quiet one, and a change of condition starts a new row)."""
    return (
        calm(earlier, thresholds)
        and calm(later, thresholds)
        and earlier.condition == later.condition
    )


def calm(sample: PortSample, thresholds: HealthThresholds | None = None) -> bool:
    """The link up, no down cycle, no reset, no dispute, no symbol error, recovery or
    fatal counter moved, and every congestion counter under its limit."""
    limits = thresholds or HealthThresholds()
    if sample.up is not True or sample.down_cycles or sample.reset or sample.disputed:
        return False
    for name, increase in sample.deltas.items():
        if name in FATAL_COUNTERS or name in ("symbol_error", "link_error_recovery"):
            return False
        limit = limits.congestion_limit(name)
        if limit is not None and sample.seconds > 0 and increase / sample.seconds > limit:
            return False
    return True


def _by_port(samples: Iterable[PortSample], now: datetime) -> dict[str, list[PortSample]]:
    grouped: dict[str, list[PortSample]] = {}
    for sample in samples:
        if sample.at <= now:
            grouped.setdefault(sample.port, []).append(sample)
    return {port: sorted(series, key=lambda s: s.at) for port, series in grouped.items()}


def _finding(
    port: str,
    rule: str,
    start: datetime,
    end: datetime | None,
    detail: str,
    *,
    version: int = 1,
    severity: str | None = None,
) -> Finding:
    return Finding(port, rule, version, severity or SEVERITY[rule], start, end, detail)


# A check answers for one interval: a detail sentence (fires), CLEAN, or UNKNOWN.
CLEAN = ""
UNKNOWN = None
Check = Callable[[PortSample, int, Sequence[PortSample]], str | None]


def _counter_rule(
    port: str, rule: str, series: Sequence[PortSample], check: Check
) -> list[Finding]:
    found = []
    start: datetime | None = None
    detail = ""
    for index, sample in enumerate(series):
        verdict = UNKNOWN if sample.reset or sample.seconds <= 0 else check(sample, index, series)
        if verdict is UNKNOWN:
            continue
        if verdict and start is None:
            start, detail = sample.start, verdict
        elif not verdict and start is not None:
            found.append(_finding(port, rule, start, sample.at, detail))
            start = None
    if start is not None:
        found.append(_finding(port, rule, start, None, detail))
    return found


def _fatal_counters(sample: PortSample, _index: int, _series: Sequence[PortSample]) -> str:
    moved = [f"{name} +{sample.deltas[name]}" for name in FATAL_COUNTERS if sample.deltas.get(name)]
    if not moved:
        return CLEAN
    return f"{', '.join(moved)} between {_clock(sample.start)} and {_clock(sample.at)}"


def _link_error_recovery(sample: PortSample, limits: HealthThresholds) -> str:
    count = sample.deltas.get("link_error_recovery", 0)
    per_minute = count * 60 / sample.seconds
    if per_minute <= limits.link_error_recovery_per_minute:
        return CLEAN
    return (
        f"{count} link error recoveries in {_seconds(sample.seconds)} s between "
        f"{_clock(sample.start)} and {_clock(sample.at)} ({per_minute:.1f} per minute, "
        f"limit {_seconds(limits.link_error_recovery_per_minute)})"
    )


def _symbol_errors(
    sample: PortSample, index: int, series: Sequence[PortSample], limits: HealthThresholds
) -> str:
    """Symbol errors of the intervals ending within the trailing window, against the
    hourly limit scaled to the window. Counting over a window (not one interval) keeps a
    single error in a 30 s poll (120 an hour) from firing on its own."""
    window = timedelta(seconds=limits.symbol_error_window_s)
    since = sample.at - window
    count = 0
    for earlier in reversed(series[: index + 1]):
        if earlier.at <= since:
            break
        count += 0 if earlier.reset else earlier.deltas.get("symbol_error", 0)
    limit = limits.symbol_errors_per_hour * limits.symbol_error_window_s / 3600
    if count <= limit:
        return CLEAN
    return (
        f"{count} symbol errors in the {_seconds(limits.symbol_error_window_s / 60)} minutes "
        f"ending {_clock(sample.at)} (limit {_seconds(limits.symbol_errors_per_hour)} an hour)"
    )


def _congestion(sample: PortSample, limits: HealthThresholds) -> str:
    over = []
    for name, increase in sorted(sample.deltas.items()):
        limit = limits.congestion_limit(name)
        if limit is None:
            continue
        rate = increase / sample.seconds
        if rate > limit:
            over.append(f"{name} {rate:.1f}/s (limit {_seconds(limit)}/s)")
    if not over:
        return CLEAN
    between = f"between {_clock(sample.start)} and {_clock(sample.at)}"
    return f"RoCE congestion {between}: {', '.join(over)}"


class _HoldDown:
    """An open flap/drop finding and when its link recovered."""

    def __init__(self, start: datetime, detail: str) -> None:
        self.start = start
        self.detail = detail
        self.recovered_at: datetime | None = None

    def expiry(self, hold: timedelta) -> datetime | None:
        return None if self.recovered_at is None else self.recovered_at + hold

    def follow(self, sample: PortSample, unstable: bool) -> None:
        """Recovery is the first poll that finds the link up with no new down since; a
        down or a new cycle while open restarts the wait."""
        if sample.up is False:
            self.recovered_at = None
        elif sample.up is True and (unstable or self.recovered_at is None):
            self.recovered_at = sample.at


def _close_expired(
    port: str,
    rule: str,
    open_: _HoldDown | None,
    hold: timedelta,
    before: datetime,
    version: int = 1,
) -> tuple[_HoldDown | None, list[Finding]]:
    """The finding closed at the end of its hold-down when that passed before ``before``
    (the next interval's start, or ``now``); a flap or down in an interval that began
    within the hold-down keeps it open."""
    expiry = None if open_ is None else open_.expiry(hold)
    if open_ is None or expiry is None or expiry > before:
        return open_, []
    return None, [_finding(port, rule, open_.start, expiry, open_.detail, version=version)]


def _flaps(
    port: str, series: Sequence[PortSample], limits: HealthThresholds, now: datetime
) -> list[Finding]:
    """Down events within the trailing window, each interval's counted at most
    ``ceil(seconds / flap_min_spacing_s)``: cycles closer together than that cannot be
    told apart (the counters give their number, not their times). Cycles in different
    intervals are counted as they are."""
    hold = timedelta(seconds=limits.hold_down_s)
    window = timedelta(seconds=limits.flap_window_s)
    events: deque[tuple[PortSample, int]] = deque()
    open_: _HoldDown | None = None
    found: list[Finding] = []
    for sample in series:
        open_, closed = _close_expired(port, "link_flap", open_, hold, sample.start)
        if closed:
            found += closed
            events.clear()
        cycles = min(sample.down_cycles, math.ceil(sample.seconds / limits.flap_min_spacing_s))
        if cycles:
            events.append((sample, cycles))
        while events and events[0][0].at <= sample.at - window:
            events.popleft()
        total = sum(count for _, count in events)
        if open_ is None and total >= limits.flap_cycles:
            first = events[0][0]
            open_ = _HoldDown(
                first.start,
                f"{total} down-then-up cycles between {_clock(first.start)} and "
                f"{_clock(sample.at)} (limit {limits.flap_cycles} in "
                f"{_seconds(limits.flap_window_s / 60)} minutes, at least "
                f"{_seconds(limits.flap_min_spacing_s)} s apart)",
            )
        if open_ is not None:
            open_.follow(sample, unstable=cycles > 0)
    open_, closed = _close_expired(port, "link_flap", open_, hold, now)
    found += closed
    if open_ is not None:
        found.append(_finding(port, "link_flap", open_.start, None, open_.detail))
    return found


def _drops(
    port: str, series: Sequence[PortSample], limits: HealthThresholds, now: datetime
) -> list[Finding]:
    """A link that polls found down from one poll to a later one at least
    ``drop_after_s`` apart: the polls at both ends prove it down that long. The finding
    starts at the beginning of the first down interval (the earliest it can have gone)."""
    hold = timedelta(seconds=limits.hold_down_s)
    first_down: PortSample | None = None
    open_: _HoldDown | None = None
    found: list[Finding] = []
    for sample in series:
        open_, closed = _close_expired(port, "link_drop", open_, hold, sample.start)
        found += closed
        if sample.up is False:
            first_down = first_down or sample
            down_for = (sample.at - first_down.at).total_seconds()
            if open_ is None and down_for >= limits.drop_after_s:
                open_ = _HoldDown(
                    first_down.start,
                    f"down at every poll from {_clock(first_down.at)} to {_clock(sample.at)} "
                    f"({_seconds(down_for)} s; limit {_seconds(limits.drop_after_s)} s)",
                )
        elif sample.up is True:
            first_down = None
        if open_ is not None:
            open_.follow(sample, unstable=False)
    open_, closed = _close_expired(port, "link_drop", open_, hold, now)
    found += closed
    if open_ is not None:
        found.append(_finding(port, "link_drop", open_.start, None, open_.detail))
    return found


# --- rule set 2: gpud's flaps and drops, a port below its rate, saturated counters ----


class _Tombstones:
    """The instants an operator cleared a port, walked in time order: everything the
    flap and drop rules saw at or before one is forgotten (gpud's set-healthy)."""

    def __init__(self, instants: Sequence[datetime]) -> None:
        self.pending = deque(instants)

    def passed(self, before: datetime) -> list[datetime]:
        """The clearances before ``before`` not yet walked past."""
        passed = []
        while self.pending and self.pending[0] < before:
            passed.append(self.pending.popleft())
        return passed


def _flaps_v2(
    port: str,
    series: Sequence[PortSample],
    limits: HealthThresholds,
    now: datetime,
    cleared: Sequence[datetime],
) -> list[Finding]:
    """gpud's flaps (store/scan_flaps.go): a flap event is a port found down at a poll
    and still down at a later poll at least ``flap_down_s`` after it, with no ACTIVE poll
    between, then found ACTIVE. ``flap_cycles`` events within ``flap_lookback_s`` (counted
    at each event's ACTIVE poll) make the port flapping: the finding starts at the poll
    that ended the last of them and is sticky, as gpud's is, until an operator clears the
    port (``cleared``), or, with ``flap_auto_clear_s``, until the port has been up that
    long. A down seen at one poll only, or only by the counters between polls, is no
    event (availability still counts it). A poll that could not tell the state is
    skipped."""
    lookback = timedelta(seconds=limits.flap_lookback_s)
    held = timedelta(seconds=limits.flap_down_s)
    auto_clear = timedelta(seconds=limits.flap_auto_clear_s)
    tombstones = _Tombstones(cleared)
    events: deque[tuple[datetime, datetime]] = deque()  # (first down poll, ACTIVE poll)
    first_down: datetime | None = None
    held_down = False
    open_: _HoldDown | None = None
    found: list[Finding] = []

    def clear(at: datetime) -> None:
        nonlocal open_, first_down, held_down
        if open_ is not None:
            found.append(_finding(port, "link_flap", open_.start, at, open_.detail, version=2))
        open_, first_down, held_down = None, None, False
        events.clear()

    for sample in series:
        for at in tombstones.passed(sample.at + timedelta(microseconds=1)):
            clear(at)
        if limits.flap_auto_clear_s > 0:
            open_, closed = _close_expired(port, "link_flap", open_, auto_clear, sample.start, 2)
            if closed:
                found += closed
                events.clear()
        if sample.up is False:
            if first_down is None:
                first_down = sample.at
            elif sample.at - first_down >= held:
                held_down = True
        elif sample.up is True:
            if first_down is not None and held_down:
                events.append((first_down, sample.at))
            first_down, held_down = None, False
            while events and events[0][1] <= sample.at - lookback:
                events.popleft()
            if open_ is None and len(events) >= limits.flap_cycles:
                open_ = _HoldDown(sample.at, _flap_detail(events, limits))
                events.clear()
        if open_ is not None:
            open_.follow(sample, unstable=sample.up is False or sample.down_cycles > 0)
    for at in tombstones.passed(now + timedelta(microseconds=1)):
        clear(at)
    if limits.flap_auto_clear_s > 0:
        open_, closed = _close_expired(port, "link_flap", open_, auto_clear, now, 2)
        found += closed
    if open_ is not None:
        found.append(_finding(port, "link_flap", open_.start, None, open_.detail, version=2))
    return found


def _flap_detail(events: Sequence[tuple[datetime, datetime]], limits: HealthThresholds) -> str:
    spans = "; ".join(f"down {_clock(down)}, active {_clock(back)}" for down, back in events)
    return (
        f"{len(events)} flaps (down at two polls at least {_seconds(limits.flap_down_s)} s "
        f"apart, then active) within {_seconds(limits.flap_lookback_s / 3600)} h: {spans}"
    )


def _drops_v2(
    port: str,
    series: Sequence[PortSample],
    limits: HealthThresholds,
    now: datetime,
    cleared: Sequence[datetime],
) -> list[Finding]:
    """gpud's drops (store/scan_drops.go): a port found down at every poll from one to a
    later one at least ``drop_after_s`` after it has dropped, from that first down poll.
    gpud also asks that link_downed did not move between the two (else it may be a flap)
    and discards the run; here a down poll whose interval holds a new down cycle (the
    link came back and went down again) starts the run afresh. The finding lasts while
    the port is down and ``hold_down_s`` after the poll that found it up again (gpud's
    10-minute drop sticky window); a clearance ends it and starts afresh."""
    hold = timedelta(seconds=limits.hold_down_s)
    tombstones = _Tombstones(cleared)
    first_down: PortSample | None = None
    open_: _HoldDown | None = None
    found: list[Finding] = []
    for sample in series:
        for at in tombstones.passed(sample.at + timedelta(microseconds=1)):
            if open_ is not None:
                found.append(_finding(port, "link_drop", open_.start, at, open_.detail, version=2))
            open_, first_down = None, None
        open_, closed = _close_expired(port, "link_drop", open_, hold, sample.start, 2)
        found += closed
        if sample.up is False:
            if first_down is None or sample.down_cycles > 0:
                first_down = sample  # the first down poll, or a bounce: afresh from here
            down_for = (sample.at - first_down.at).total_seconds()
            if open_ is None and down_for >= limits.drop_after_s:
                open_ = _HoldDown(
                    first_down.at,
                    f"down at every poll from {_clock(first_down.at)} to {_clock(sample.at)} "
                    f"({_seconds(down_for)} s; limit {_seconds(limits.drop_after_s)} s)",
                )
        elif sample.up is True:
            first_down = None
        if open_ is not None:
            open_.follow(sample, unstable=False)
    for at in tombstones.passed(now + timedelta(microseconds=1)):
        if open_ is not None:
            found.append(_finding(port, "link_drop", open_.start, at, open_.detail, version=2))
        open_ = None
    open_, closed = _close_expired(port, "link_drop", open_, hold, now, 2)
    found += closed
    if open_ is not None:
        found.append(_finding(port, "link_drop", open_.start, None, open_.detail, version=2))
    return found


StateCheck = Callable[[PortSample, HealthThresholds], tuple[str, str] | str | None]


def _state_rule(
    port: str,
    rule: str,
    series: Sequence[PortSample],
    check: StateCheck,
    limits: HealthThresholds,
) -> list[Finding]:
    """A rule on what a poll found (not on counter increases): every poll can tell, the
    first one included. Opens at the first interval whose poll fires (its start, the
    earliest the condition can have begun), closes at the first clean poll."""
    found = []
    start: datetime | None = None
    detail, severity = "", ""
    for sample in series:
        verdict = check(sample, limits)
        if verdict is UNKNOWN:
            continue
        if verdict and start is None:
            start = sample.start
            detail, severity = verdict if isinstance(verdict, tuple) else (verdict, SEVERITY[rule])
        elif not verdict and start is not None:
            found.append(_finding(port, rule, start, sample.at, detail, severity=severity))
            start = None
    if start is not None:
        found.append(_finding(port, rule, start, None, detail, severity=severity))
    return found


def _slow(sample: PortSample, limits: HealthThresholds) -> tuple[str, str] | str | None:
    """Up below the expected rate: fatal below ``speed_fatal_below_percent`` of it."""
    if sample.up is not True:
        return UNKNOWN  # a port that is down has no rate: the flap and drop rules judge it
    if not sample.slow or sample.rate_gbps is None or sample.expected_gbps is None:
        return CLEAN
    share = sample.rate_gbps / sample.expected_gbps * 100
    severity = FATAL if share < limits.speed_fatal_below_percent else DEGRADED
    detail = (
        f"up at {_seconds(sample.rate_gbps)} Gb/s, below the {_seconds(sample.expected_gbps)} "
        f"Gb/s expected of the port ({share:.0f} %), at the poll of {_clock(sample.at)}"
    )
    return detail, severity


def _saturated(sample: PortSample, _limits: HealthThresholds) -> str | None:
    if not sample.saturated:
        return CLEAN
    stuck = ", ".join(
        f"{name} at {2 ** IB_COUNTER_BITS[name] - 1} ({IB_COUNTER_BITS[name]}-bit maximum)"
        for name in sample.saturated
        if name in IB_COUNTER_BITS
    )
    return (
        f"{stuck} at the poll of {_clock(sample.at)}: a saturated counter counts nothing "
        "more, so no rule can see it move until the port's counters are cleared"
    )


def unavailable_seconds(samples: Sequence[PortSample], *, start: datetime, end: datetime) -> float:
    """Seconds of ``[start, end)`` in which one port was unavailable.

    An interval counts whole when its poll found the port down, and also when it held a
    down-then-up cycle: the link was down at least once in it, and the counters that
    prove the cycle do not say for how long, so the whole interval is charged. This is
    conservative for the customer. An interval whose state is unknown (``up`` None and
    no cycle) is not counted: a gap in the telemetry is not an outage. Overlapping
    intervals are counted once. An interval whose down the switch disputed is not counted.
    """
    if end <= start:
        return 0.0
    ports = {sample.port for sample in samples}
    if len(ports) > 1:
        raise ValueError(f"unavailable_seconds takes one port's samples, got {sorted(ports)}")
    spans = sorted(
        (max(sample.start, start), min(sample.at, end))
        for sample in samples
        if (sample.up is False or sample.down_cycles > 0)
        and sample.seconds > 0
        and not sample.disputed
    )
    total = timedelta(0)
    current_start: datetime | None = None
    current_end: datetime | None = None
    for span_start, span_end in spans:
        if span_end <= span_start:
            continue
        if current_end is None or current_start is None or span_start > current_end:
            if current_end is not None and current_start is not None:
                total += current_end - current_start
            current_start, current_end = span_start, span_end
        else:
            current_end = max(current_end, span_end)
    if current_end is not None and current_start is not None:
        total += current_end - current_start
    return total.total_seconds()


@dataclass(frozen=True)
class WitnessCheck:
    """A host figure against the switch's: ``difference_percent`` is relative to the
    switch's value (inf when the switch saw 0 and the host did not)."""

    agrees: bool
    difference_percent: float
    detail: str


def witness_check(
    *,
    host_value: int | float | Decimal,
    switch_value: int | float | Decimal,
    tolerance_percent: Decimal | float | int | str,
) -> WitnessCheck:
    """Whether the host's figure agrees with the switch's within ``tolerance_percent`` of
    the switch's value. The switch is the provider's and the trusted side, so the
    difference is relative to it; a difference exactly at the tolerance agrees. Both 0
    agree; a switch 0 against a nonzero host figure does not (the host counted traffic
    the fabric never carried). Computed in Decimal, so the edges are exact."""
    host = _decimal(host_value, "host_value")
    switch = _decimal(switch_value, "switch_value")
    tolerance = _decimal(tolerance_percent, "tolerance_percent")
    if switch == 0:
        if host == 0:
            return WitnessCheck(True, 0.0, "host and switch both counted nothing")
        return WitnessCheck(
            False, math.inf, f"the switch counted nothing while the host reported {host}"
        )
    difference = abs(host - switch) / switch * 100
    agrees = difference <= tolerance
    detail = (
        f"host {host} against switch {switch}: {difference:.2f}% apart, "
        f"{'within' if agrees else 'beyond'} the {tolerance}% tolerance"
    )
    return WitnessCheck(agrees, float(difference), detail)


def _decimal(value: object, what: str) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal | str):
        raise ValueError(f"{what} must be a number, not {value!r}")
    try:
        number = Decimal(str(value))
    except InvalidOperation:
        raise ValueError(f"{what} must be a number, not {value!r}") from None
    if not number.is_finite() or number < 0:
        raise ValueError(f"{what} must be a finite number >= 0, not {value!r}")
    return number


def _clock(when: datetime) -> str:
    return when.strftime("%H:%M:%S")


def _seconds(value: float) -> str:
    """A number as people write it: 240, 2.5."""
    return f"{value:g}"


__all__ = [
    "DEGRADED",
    "FATAL",
    "RULES",
    "Finding",
    "HealthThresholds",
    "WitnessCheck",
    "evaluate",
    "unavailable_seconds",
    "witness_check",
]


def unavailable_within(
    ports: Mapping[tuple[str, str], Sequence[PortSample]], *, start: datetime, end: datetime
) -> bool:
    """Whether any port ((node, port) -> its samples) was unavailable in [start, end)
    (``unavailable_seconds``): what a link-check slot's availability hears from telemetry
    (``gpulease_verify.samples.telemetry_slot_outcome``)."""
    return any(unavailable_seconds(samples, start=start, end=end) > 0 for samples in ports.values())


def unavailable_only(samples: Iterable[PortSample]) -> list[PortSample]:
    """The intervals that can make a port unavailable (down at the poll, or a cycle in
    it, not disputed): all ``unavailable_seconds`` counts, so the rest need not be read."""
    return [s for s in samples if (s.up is False or s.down_cycles > 0) and not s.disputed]
