"""Which slot, and so which billing period, the bytes of a counter interval belong to.

Pure (no Django, no database), so an auditor can rebuild the traffic samples with it.

**The rule.** A node's counter interval runs from its previous reading to this one,
``[a, b)``, both readings taken at their slot. Its bytes are spread over the slots it
covers, cut on the slot grid of the earlier reading's cadence, aligned on the scheduler's
fixed epoch (``SLOT_EPOCH``): ``[a, g)``, ``[g, g + step)``, ..., the last piece ending at
``b``, where ``g`` is the first grid instant after ``a``; each piece gets the bytes of its
share of the interval's time (whole bytes, the pieces adding up exactly). A piece is
stamped with its slot, the START of its time, and belongs to the billing period that
instant lies in, on the tenant's clock (``period_of``).

So the 5-minute interval ``[23:55, 24:00)`` of 31 October is October's last sample, and
an interval a missing reading stretched across midnight, ``[23:50, 00:05)``, gives two of
its three 5-minute shares to October and one to November. A 30-day month read every
5 minutes has exactly 8,640 samples. Month boundaries fall on that grid whenever the
cadence divides the zone's UTC offset (5 minutes divides every zone offset in use), so
the grid's reading at a month's first instant is the reading at the period boundary, and
an interval that straddles it is split there by the rule above.

**The edges of a lease.** The dispatcher reads a lease's counters at its start and at its
end (``benchmarks.services.dispatch_due``): a lease that starts mid-slot is read at its
start instant (its first piece runs from there to the next grid instant), and every lease
is read once more at its end instant, with the nodes it held then, so its last interval,
and a month's last interval when the lease ends at the month's end, is metered. Such a
reading's cadence is its slot's, like any other's.

**Gaps.** A node's rate is its own interval's: a node whose reading of a slot is missing
gives each slot of its longer interval its average rate over that interval, however long
the interval is. Two readings of a node more than ``READING_REACH`` (three days, a long
weekend) apart are a metering gap (``gaps``): the counters prove the bytes were sent, so
they are billed by time like any interval, and ingest opens a metering-gap incident for
the node that issuing an invoice of the period reports (the rate over days is an average,
not a measurement of each slot). A node contributes nothing before its first reading or
after its latest one (no interval covers those slots).

**The probe tax.** The bytes gpulease's own heavy probes sent (``gpulease_verify.probe_tax``)
are taken away from the sending node's share of each slot their run's time covers, pro
rata by time, never below zero: they are kept out of per-GB and 95th-percentile metering.

**A node's reading** (``reading_of``) is a node read ``ok`` in a scheduled counters sweep
(or, stored before sweeps, a counters run of the node that ended ``ok``): its switch
port's octets received where the run read the witness (as IDCs meter at their switches),
else the node's own bytes sent per port.

**Both directions.** The same reading gives what the node received: its switch port's
octets transmitted to it (IF-MIB ``ifHCOutOctets``, the witness block's ``out_octets``)
where the run read the witness, else the node's own bytes received per port
(``rx_bytes`` of its counters). Received bytes go through the same rules as sent ones:
``counter_deltas`` (a reset, a 64-bit wrap), spread over the slots by ``slot_shares``,
each sample keeping both (``rx_bytes``). The probe tax takes away from a node's received
bytes what gpulease's own probes sent to it (``probe_tax.received``).

``billing.ingest`` builds the stored samples with these rules, and ``rebuild`` rebuilds
them from an audit bundle's chained runs so that the verifier recomputes per-GB and
95th-percentile lines from evidence, in either direction, not from the samples the bundle
states. The readings that close a period's edge intervals (however
far outside it they lie) are in the bundle's stretch of the chain.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from gpulease_verify import probe_tax, sweep, witness
from gpulease_verify.canonical import parse_instant
from gpulease_verify.counters import DeltaKind, counter_deltas
from gpulease_verify.parsers import ParseError
from gpulease_verify.periods import Period
from gpulease_verify.probe_tax import ProbeSend, take_away

_MICRO = timedelta(microseconds=1)
# A reading's port read at the node's switch (the witness), not on the node: where the
# fabric has one, a node is metered by what its switch port received from it.
SWITCH_PORT = "switch:"
# The kernel's netdev statistics, ethtool -S, the extended InfiniBand counters and
# IF-MIB's ifHC counters are all 64 bits wide.
COUNTER_BITS = 64
COUNTERS, SCHEDULE = "counters", "schedule"  # the run kind and trigger of a reading
# Two readings of a node further apart than this are a metering gap (module docstring).
READING_REACH = timedelta(days=3)
# Slots are aligned on this instant: the scheduler's, so every dispatcher and the verifier
# cut the same grid (``benchmarks.services.slot_start``).
SLOT_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
# The fastest port a lease's nodes have, in Gbit/s, when none states its rate: what tells
# a counter reset from a wrap (``counter_deltas``).
DEFAULT_RATE_GBPS = 400


@dataclass(frozen=True)
class SlotShare:
    """The part of one counter interval that lies in one slot."""

    slot_at: datetime
    seconds: int
    bytes: int


@dataclass(frozen=True)
class Reading:
    """One node's counters at a slot: port -> bytes sent so far; ``step_s``, the cadence
    of its slot."""

    at: datetime
    step_s: int
    ports: Mapping[str, int]
    rx_ports: Mapping[str, int] = field(default_factory=dict)  # port -> bytes received


@dataclass(frozen=True)
class SlotTraffic:
    """What a traffic sample stores: every node's share of the slot ``[slot_at, slot_at +
    seconds)``. ``resets`` and ``wraps`` are counted on the slot where their interval
    starts."""

    slot_at: datetime
    seconds: int
    bytes: int
    nodes: int
    resets: int
    wraps: int
    switch_nodes: int = 0  # of ``nodes``, those metered at their switch port
    rx_bytes: int = 0  # every node's share of the bytes received in the slot


def reading_of(
    parsed: Mapping[str, Any] | None, *, slot_at: datetime, deadline_at: datetime
) -> Reading:
    """A scheduled counters run's reading (module docstring), from its parsed result: its
    cadence is its slot's, ``deadline_at - slot_at``."""
    parsed = parsed or {}
    switch = parsed.get(witness.KEY)
    if isinstance(switch, Mapping) and switch.get("in_octets") is not None:
        name = f"{SWITCH_PORT}{switch['switch']}/{switch['port']}"
        ports = {name: int(switch["in_octets"])}
        received = {name: int(switch["out_octets"])} if switch.get("out_octets") is not None else {}
    else:
        ports = {
            f"{port.get('section')}/{port.get('name')}": int(port["tx_bytes"])
            for port in parsed.get("ports", [])
            if port.get("tx_bytes") is not None
        }
        received = {
            f"{port.get('section')}/{port.get('name')}": int(port["rx_bytes"])
            for port in parsed.get("ports", [])
            if port.get("rx_bytes") is not None
        }
    return Reading(
        at=slot_at,
        step_s=int((deadline_at - slot_at).total_seconds()),
        ports=ports,
        rx_ports=received,
    )


def max_rate_bps(rates_gbps: Iterable[int | None]) -> int:
    """The fastest of the lease's node ports, in bit/s (``DEFAULT_RATE_GBPS`` when none
    states a rate)."""
    return (max((rate or 0 for rate in rates_gbps), default=0) or DEFAULT_RATE_GBPS) * 10**9


def period_of(slot_at: datetime, zone_name: str) -> Period:
    """The billing period a sample belongs to: the month its slot (its start) lies in, on
    the tenant's clock."""
    return Period.containing(slot_at, zone_name)


def slot_shares(
    *, start: datetime, end: datetime, total_bytes: int, step_s: int
) -> list[SlotShare]:
    """Spread the bytes of ``[start, end)`` over its slots of ``step_s`` seconds on the grid
    aligned on ``SLOT_EPOCH``, pro rata by time (module docstring). Piece ``k`` gets
    ``floor(B t_k / T) - floor(B t_(k-1) / T)`` bytes, where ``t_k`` is the time from
    ``start`` to the piece's end and ``T`` the whole interval, so the pieces add up to
    ``B`` exactly. A ``start`` between grid instants (a lease's first reading) makes a
    first piece that is shorter than a slot."""
    if end <= start:
        raise ValueError(f"An interval must end after it starts: {start} to {end}.")
    if step_s <= 0:
        raise ValueError("The slot length must be positive.")
    whole = (end - start) // _MICRO
    step = step_s * 10**6
    into = ((start - SLOT_EPOCH) // _MICRO) % step  # how far into its slot ``start`` lies
    cuts = [0, *range(step - into, whole, step), whole]
    shares: list[SlotShare] = []
    for offset, upto in pairwise(cuts):
        given = total_bytes * upto // whole - total_bytes * offset // whole
        slot_at = start + timedelta(microseconds=offset)
        shares.append(SlotShare(slot_at, (upto - offset) // 10**6, given))
    return shares


@dataclass(frozen=True)
class Interval:
    """The bytes a node's ports both readings have sent between them (``counter_deltas``:
    wraps and resets); ``counted``: False when the two readings share no port.
    ``rx_bytes``: what they received, by the same rules (``resets`` and ``wraps`` count
    the sent bytes' counters, as they did before received bytes were metered)."""

    before: Reading
    after: Reading
    bytes: int
    resets: int
    wraps: int
    counted: bool
    rx_bytes: int = 0

    @property
    def gap(self) -> bool:
        """Whether the readings are further apart than ``READING_REACH``."""
        return self.after.at - self.before.at > READING_REACH


def intervals(
    readings: Sequence[Reading], *, counter_bits: int, max_rate_bps: int | None
) -> list[Interval]:
    """Each pair of consecutive readings of one node (in time order), with its bytes."""
    found = []
    for before, after in pairwise(readings):
        total, resets, wraps, counted, received = 0, 0, 0, False, 0
        for port, value in after.ports.items():
            if port not in before.ports:
                continue
            (delta,) = counter_deltas(
                [(before.at, before.ports[port]), (after.at, value)],
                counter_bits=counter_bits,
                max_rate_bps=max_rate_bps,
            )
            total += delta.bytes
            resets += delta.kind == DeltaKind.RESET
            wraps += delta.kind == DeltaKind.WRAP
            counted = True
        for port, value in after.rx_ports.items():
            if port not in before.rx_ports:
                continue
            (delta,) = counter_deltas(
                [(before.at, before.rx_ports[port]), (after.at, value)],
                counter_bits=counter_bits,
                max_rate_bps=max_rate_bps,
            )
            received += delta.bytes
        found.append(Interval(before, after, total, resets, wraps, counted, received))
    return found


@dataclass(frozen=True)
class Gap:
    """A metering gap (module docstring): a node not read for longer than the reach, from
    ``start`` to ``end``; ``bytes``, its counters' difference, billed by time."""

    node: str
    start: datetime
    end: datetime
    bytes: int


def gaps(
    readings_by_node: Mapping[str, Sequence[Reading]],
    *,
    counter_bits: int,
    max_rate_bps: int | None,
) -> list[Gap]:
    """The metering gaps among each node's readings (in time order), by node and start."""
    return sorted(
        (
            Gap(node, interval.before.at, interval.after.at, interval.bytes)
            for node, readings in readings_by_node.items()
            for interval in intervals(
                readings, counter_bits=counter_bits, max_rate_bps=max_rate_bps
            )
            if interval.counted and interval.gap
        ),
        key=lambda gap: (gap.node, gap.start),
    )


def slot_traffic(
    readings_by_node: Mapping[str, Sequence[Reading]],
    *,
    start: datetime,
    end: datetime,
    counter_bits: int,
    max_rate_bps: int | None,
    probes: Mapping[str, Sequence[ProbeSend]] | None = None,
    receipts: Mapping[str, Sequence[ProbeSend]] | None = None,
) -> list[SlotTraffic]:
    """The samples of the slots in ``[start, end)``, from each node's readings in time
    order. Each pair of consecutive readings of a node is one interval (``intervals``),
    however far apart (a gap over the reach too), spread by ``slot_shares``. A slot's
    sample adds up its nodes' shares; its seconds are its longest share's (shares of one
    slot differ only where a cadence changed mid-interval). A slot no interval covers has
    no sample. ``probes``: node -> the probe sends (``gpulease_verify.probe_tax``) taken
    away from that node's shares; ``receipts``: node -> the probe bytes sent to it
    (``probe_tax.received``), taken away from its received shares alike."""
    totals: dict[datetime, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for node, readings in readings_by_node.items():
        sent = (probes or {}).get(node, ())
        got = (receipts or {}).get(node, ())
        for interval in intervals(readings, counter_bits=counter_bits, max_rate_bps=max_rate_bps):
            if not interval.counted:
                continue
            before, after = interval.before, interval.after
            at_switch = all(port.startswith(SWITCH_PORT) for port in after.ports)
            shares = slot_shares(
                start=before.at, end=after.at, total_bytes=interval.bytes, step_s=before.step_s
            )
            rx_shares = slot_shares(
                start=before.at, end=after.at, total_bytes=interval.rx_bytes, step_s=before.step_s
            )
            for index, share in enumerate(shares):
                if not start <= share.slot_at < end:
                    continue
                until = shares[index + 1].slot_at if index + 1 < len(shares) else after.at
                slot = totals[share.slot_at]
                given = take_away(share.bytes, sent, share.slot_at, until) if sent else share.bytes
                slot["bytes"] += given
                rx = rx_shares[index].bytes
                slot["rx_bytes"] += take_away(rx, got, share.slot_at, until) if got else rx
                slot["seconds"] = max(slot["seconds"], share.seconds)
                slot["nodes"] += 1
                slot["switch_nodes"] += at_switch
                if index == 0:
                    slot["resets"] += interval.resets
                    slot["wraps"] += interval.wraps
    return [
        SlotTraffic(
            slot_at=slot_at,
            seconds=slot["seconds"],
            bytes=slot["bytes"],
            nodes=slot["nodes"],
            resets=slot["resets"],
            wraps=slot["wraps"],
            switch_nodes=slot["switch_nodes"],
            rx_bytes=slot["rx_bytes"],
        )
        for slot_at, slot in sorted(totals.items())
    ]


# --- rebuilt from an audit bundle -----------------------------------------------------------


@dataclass
class Rebuilt:
    """The traffic samples of a bundle's period rebuilt from its chained runs.
    ``problems``: what makes the rebuild differ from the server's (mismatches);
    ``taken_as_stated``: heavy runs whose probe bytes come from the bundle's
    ``sent_bytes`` because their tool's bytes need raw output the bundle does not carry;
    ``gaps``: the metering gaps that reach into the period, billed by time."""

    samples: list[SlotTraffic]
    problems: list[str]
    taken_as_stated: int = 0
    gaps: list[Gap] = field(default_factory=list)  # those that reach into the period


def _sends(entry: Mapping[str, Any], parsed: Any, rebuilt: Rebuilt) -> list[ProbeSend]:
    """What a finished heavy run of the bundle sent: re-read from its output (its raw
    output where the tool needs it, ``raw=1``), else as the bundle states it; a re-read
    that differs from the stated figure is named."""
    content = entry["content"]
    stated = entry.get("sent_bytes")
    name = f"run {entry.get('id')} (chain link {entry.get('chain_index')})"
    raw = entry.get("raw_output")
    if content["tool"] in probe_tax.NEEDS_RAW and raw is None:
        if not isinstance(stated, Mapping):
            rebuilt.problems.append(
                f"{name}: its probe bytes need its raw output (raw=1) or a stated sent_bytes"
            )
            return []
        rebuilt.taken_as_stated += 1
        found = {str(node): int(count) for node, count in stated.items()}
    else:
        try:
            found = probe_tax.bytes_sent(
                tool=content["tool"],
                state=content["state"],
                parsed=parsed,
                raw_output=raw,
                command=content["command"],
                target=content["target"],
                nodes=list(entry.get("nodes", [])),
            )
        except ParseError:
            found = {}  # as the server does: an output it cannot read counts nothing
        if isinstance(stated, Mapping) and dict(stated) != found:
            rebuilt.problems.append(
                f"{name}: the bundle says its probe sent {dict(stated)} B, "
                f"re-read from its output {found} B"
            )
    started, finished = parse_instant(content["started_at"]), parse_instant(content["finished_at"])
    return [
        ProbeSend(node, count, started, max(finished, started))
        for node, count in sorted(found.items())
        if count > 0
    ]


def rebuild(bundle: Mapping[str, Any]) -> Rebuilt:
    """The samples of the bundle's period from its runs alone: each node's scheduled
    counters readings read ``ok`` (with its readings just outside the period, which
    the bundle's stretch of the chain takes in), less the bytes of its finished heavy
    probes, at the fastest port rate of the lease's assigned nodes."""
    start, end = (parse_instant(bundle["period"][key]) for key in ("start", "end"))
    rebuilt = Rebuilt(samples=[], problems=[])
    readings: dict[str, list[Reading]] = defaultdict(list)
    sends: list[ProbeSend] = []
    receipts: list[ProbeSend] = []
    for entry in bundle.get("runs", []):
        content = entry["content"]
        if content["kind"] == COUNTERS and content["trigger"] == SCHEDULE:
            for result in sweep.results_of(content):
                if result.ok:
                    readings[result.node].append(
                        reading_of(
                            result.parsed,
                            slot_at=parse_instant(content["slot_at"]),
                            deadline_at=parse_instant(content["deadline_at"]),
                        )
                    )
            continue
        if content["state"] != probe_tax.OK:
            continue
        parsed = json.loads(content["parsed"]) if content["parsed"] else None
        if (
            content["kind"] in probe_tax.HEAVY_KINDS
            and content["started_at"]
            and content["finished_at"]
        ):
            sent = _sends(entry, parsed, rebuilt)
            sends += sent
            receipts += probe_tax.received(sent, target=content["target"])
    assigned = {item["node"] for item in bundle.get("assignments", [])}
    nodes = bundle.get("nodes", {})
    rates = [
        port.get("rate_gbps") for name in assigned for port in nodes.get(name, {}).get("ports", [])
    ]
    by_node = {node: sorted(found, key=lambda r: r.at) for node, found in readings.items()}
    rate = max_rate_bps(rates)
    rebuilt.samples = slot_traffic(
        by_node,
        start=start,
        end=end,
        counter_bits=COUNTER_BITS,
        max_rate_bps=rate,
        probes=probe_tax.by_node(sends),
        receipts=probe_tax.by_node(receipts),
    )
    rebuilt.gaps = [
        gap
        for gap in gaps(by_node, counter_bits=COUNTER_BITS, max_rate_bps=rate)
        if gap.start < end and gap.end > start
    ]
    return rebuilt
