"""What the demo's probes print: each tool's own output format, filled with the demo's
figures, so that the probes' parsers read it as they read a real run and an auditor
re-parses it from a bundle fetched with ``raw=1``.

Every layout follows a published real output kept in tests/benchmarks/fixtures (sources
in each SOURCES.md):

- iperf3 3.12 ``-J`` client JSON: ``iperf3/tcp_3.12_P4_loopback.json`` (``start`` with
  ``connected`` and ``test_start``, per-second ``intervals`` of every stream, the omitted
  first second marked ``"omitted": true``, ``end.sum_sent`` / ``end.sum_received``,
  ``cpu_utilization_percent``);
- perftest ``ib_write_bw --report_gbits -D``: ``perftest/write_bw_gbits_cx7_ndr.txt`` and
  ``write_bw_bidirectional_duration_gbits.txt`` (a duration run prints peak 0.00);
- perftest ``ib_write_lat -n``: ``perftest/send_lat_cx7_ndr.txt``;
- nccl-tests ``all_reduce_perf`` under mpirun: ``nccl-tests/multinode_2x8_a100_kubeflow.txt``
  (nccl-tests 2.13+ table, root -1, "#wrong" columns, "# Avg bus bandwidth").

The figures hang together the way the tools make them: iperf3's rates are its bytes over
its seconds and its bytes whole send blocks; perftest's iterations are the bytes its
average moved over the duration; nccl-tests' algbw is size over time, busbw algbw x
2(n-1)/n, and its average the mean busbw of every row, out of place and in place. So the
probe tax read from an output (``gpulease_verify.probe_tax``) is what the tool sent.

Each text opens with a line saying it is synthetic; the parsers skip it as they skip a
login banner.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

GIGA = 10**9
IPERF3_BLOCK = 131072  # iperf3's default TCP block: what a sender writes at a time
PERFTEST_MESSAGE = 65536  # ib_write_bw's default message size
PERFTEST_LAT_MESSAGE = 2  # ib_write_lat's default message size
PERFTEST_RULE = "-" * 87


def synthetic(tool: str, text: str) -> str:
    """The output with the line that says it is the demo's, not a measurement."""
    return f"gpulease demo: synthetic {tool} result, not a measurement\n{text}\n"


# --- iperf3 -J -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Iperf3Run:
    """One iperf3 client run as ``benchmarks.probes.commands.iperf3_pair`` starts it."""

    client: str  # hostname
    client_address: str
    server_address: str
    port: int
    seconds: int  # -t
    omit: int  # -O
    streams: int  # -P
    started: datetime


def _cookie(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(36))


def _blocks(rng: random.Random, share: float) -> int:
    """A stream's bytes in one second near ``share`` (+-2 %), in whole send blocks."""
    return max(1, round(share * rng.uniform(0.98, 1.02) / IPERF3_BLOCK)) * IPERF3_BLOCK


def iperf3_client(rng: random.Random, run: Iperf3Run, rate_bps: float) -> str:
    """The client's JSON of a TCP test whose receiver measured about ``rate_bps``, its first
    ``omit`` second(s) ramping up and left out of ``end``, as iperf3 leaves them."""
    per_stream = rate_bps / 8 / run.streams
    sockets = [5 + 2 * k for k in range(run.streams)]
    local_ports = [rng.randrange(32768, 60999) for _ in sockets]
    stamp = run.started.astimezone(UTC)
    start = {
        "connected": [
            {
                "socket": socket,
                "local_host": run.client_address,
                "local_port": local,
                "remote_host": run.server_address,
                "remote_port": run.port,
            }
            for socket, local in zip(sockets, local_ports, strict=True)
        ],
        "version": "iperf 3.12",
        "system_info": f"Linux {run.client} 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 "
        "09:52:04 UTC 2024 x86_64",
        "timestamp": {
            "time": stamp.strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "timesecs": int(stamp.timestamp()),
        },
        "connecting_to": {"host": run.server_address, "port": run.port},
        "cookie": _cookie(rng),
        "tcp_mss_default": 8948,
        "target_bitrate": 0,
        "sock_bufsize": 0,
        "sndbuf_actual": 16384,
        "rcvbuf_actual": 131072,
        "test_start": {
            "protocol": "TCP",
            "num_streams": run.streams,
            "blksize": IPERF3_BLOCK,
            "omit": run.omit,
            "duration": run.seconds,
            "bytes": 0,
            "blocks": 0,
            "reverse": 0,
            "tos": 0,
            "target_bitrate": 0,
        },
    }
    rtts = [rng.randrange(40, 90) for _ in sockets]
    totals = dict.fromkeys(sockets, 0)
    retransmits = dict.fromkeys(sockets, 0)
    intervals: list[dict[str, Any]] = []

    def interval(begin: float, end: float, ramp: float, omitted: bool) -> dict[str, Any]:
        streams = []
        for socket, rtt in zip(sockets, rtts, strict=True):
            sent = _blocks(rng, per_stream * ramp * (end - begin))
            again = rng.choice((0, 0, 0, 1, 2))
            if not omitted:
                totals[socket] += sent
                retransmits[socket] += again
            streams.append(
                {
                    "socket": socket,
                    "start": round(begin, 6),
                    "end": round(end, 6),
                    "seconds": end - begin,
                    "bytes": sent,
                    "bits_per_second": sent * 8 / (end - begin),
                    "retransmits": again,
                    "snd_cwnd": rng.randrange(1_800_000, 3_200_000),
                    "snd_wnd": 3_145_728,
                    "rtt": rtt + rng.randrange(0, 25),
                    "rttvar": rng.randrange(5, 30),
                    "pmtu": 9000,
                    "omitted": omitted,
                    "sender": True,
                }
            )
        moved = sum(stream["bytes"] for stream in streams)
        return {
            "streams": streams,
            "sum": {
                "start": round(begin, 6),
                "end": round(end, 6),
                "seconds": end - begin,
                "bytes": moved,
                "bits_per_second": moved * 8 / (end - begin),
                "retransmits": sum(stream["retransmits"] for stream in streams),
                "omitted": omitted,
                "sender": True,
            },
        }

    # The omitted second(s): TCP ramping up. iperf3 then restarts its clock at zero.
    clock = 0.0
    for second in range(run.omit):
        end = second + 1 + rng.uniform(0.00001, 0.00005)
        intervals.append(interval(clock, end, rng.uniform(0.75, 0.9), omitted=True))
        clock = end
    clock = 0.0
    for second in range(run.seconds):
        end = second + 1 + rng.uniform(0.00001, 0.00005)
        intervals.append(interval(clock, end, 1.0, omitted=False))
        clock = end
    sender_seconds = clock
    receiver_seconds = clock + rng.uniform(0.0002, 0.002)
    sent_total = sum(totals.values())
    streams_end = [
        {
            "sender": {
                "socket": socket,
                "start": 0,
                "end": round(sender_seconds, 6),
                "seconds": sender_seconds,
                "bytes": totals[socket],
                "bits_per_second": totals[socket] * 8 / sender_seconds,
                "retransmits": retransmits[socket],
                "max_snd_cwnd": rng.randrange(3_200_000, 4_500_000),
                "max_snd_wnd": 3_145_728,
                "max_rtt": rtt + 60,
                "min_rtt": max(10, rtt - 20),
                "mean_rtt": rtt + 8,
                "sender": True,
            },
            "receiver": {
                "socket": socket,
                "start": 0,
                "end": round(receiver_seconds, 6),
                "seconds": sender_seconds,
                "bytes": totals[socket],
                "bits_per_second": totals[socket] * 8 / receiver_seconds,
                "sender": True,
            },
        }
        for socket, rtt in zip(sockets, rtts, strict=True)
    ]
    host_user = rng.uniform(0.2, 0.9)
    host_system = rng.uniform(12, 35) * run.streams / 4
    remote_system = rng.uniform(18, 45) * run.streams / 4
    end_section = {
        "streams": streams_end,
        "sum_sent": {
            "start": 0,
            "end": round(sender_seconds, 6),
            "seconds": sender_seconds,
            "bytes": sent_total,
            "bits_per_second": sent_total * 8 / sender_seconds,
            "retransmits": sum(retransmits.values()),
            "sender": True,
        },
        "sum_received": {
            "start": 0,
            "end": round(receiver_seconds, 6),
            "seconds": receiver_seconds,
            "bytes": sent_total,
            "bits_per_second": sent_total * 8 / receiver_seconds,
            "sender": True,
        },
        "cpu_utilization_percent": {
            "host_total": host_user + host_system,
            "host_user": host_user,
            "host_system": host_system,
            "remote_total": remote_system + 0.1,
            "remote_user": 0.1,
            "remote_system": remote_system,
        },
        "sender_tcp_congestion": "cubic",
        "receiver_tcp_congestion": "cubic",
    }
    document = {"start": start, "intervals": intervals, "end": end_section}
    return synthetic("iperf3", cjson(document))


def cjson(value: Any, depth: int = 0) -> str:
    """JSON in the layout iperf3 prints it (cJSON_Print): an object's members one a line,
    indented by tabs, a tab after each colon; an array of objects as ``[{...}, {...}]``.
    Written out by hand: the standard library's indenting encoder is pure Python and
    several times slower on the thousands of documents the demo prints. An object of
    scalars only (most of them: every stream of every interval) is one call of the
    standard library's C encoder, its separators set to this layout (``_flat``)."""
    if isinstance(value, dict):
        if not any(map(_NESTED.__contains__, map(type, value.values()))):
            return _flat(depth)(value)
        inner = TABS[depth + 1]
        members = ",\n".join(
            f'{inner}"{key}":\t{cjson(item, depth + 1)}' for key, item in value.items()
        )
        return "{\n" + members + "\n" + TABS[depth] + "}"
    if isinstance(value, list):
        return "[" + ", ".join([cjson(item, depth + 1) for item in value]) + "]"
    return _SCALAR(value)


TABS = ["\t" * depth for depth in range(16)]
_NESTED = frozenset({dict, list})
# A scalar as json.dumps prints it: finite floats as their repr, strings escaped to ASCII.
_SCALAR = json.JSONEncoder(check_circular=False).encode
_FLAT_ENCODERS: dict[int, Any] = {}


def _flat(depth: int) -> Any:
    """The encoder of an object of scalars at ``depth``: the C encoder with a member
    separator of a comma, a newline and the members' tabs, a tab after each colon; only
    its opening and closing braces are then laid out by hand."""
    encode = _FLAT_ENCODERS.get(depth)
    if encode is None:
        inner, outer = TABS[depth + 1], TABS[depth]
        encoder = json.JSONEncoder(check_circular=False, separators=(",\n" + inner, ":\t"))

        def encode(value: dict[str, Any]) -> str:
            if not value:
                return "{\n\n" + outer + "}"
            return "{\n" + inner + encoder.encode(value)[1:-1] + "\n" + outer + "}"

        _FLAT_ENCODERS[depth] = encode
    return encode


# --- perftest ------------------------------------------------------------------------------


def _perftest_header(title: str, device: str, tx_depth: int, inline: int, extra: str) -> str:
    return (
        f"{PERFTEST_RULE}\n"
        f"                    {title}\n"
        f" Dual-port       : OFF\t\tDevice         : {device}\n"
        " Number of qps   : 1\t\tTransport type : IB\n"
        " Connection type : RC\t\tUsing SRQ      : OFF\n"
        " PCIe relax order: ON\t\tLock-free      : OFF\n"
        " ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF\n"
        f" TX depth        : {tx_depth}\n"
        f"{extra}"
        " Mtu             : 4096[B]\n"
        " Link type       : IB\n"
        f" Max inline data : {inline}[B]\n"
        " rdma_cm QPs\t : OFF\n"
        " Data ex. method : Ethernet\n"
        f"{PERFTEST_RULE}\n"
    )


def _addresses(rng: random.Random, rkey: bool) -> str:
    def side(name: str, lid: int) -> str:
        line = (
            f" {name} address: LID {lid:#04x} QPN {rng.randrange(0x40, 0x2000):#06x} "
            f"PSN {rng.randrange(0, 0xFFFFFF):#08x}"
        )
        if rkey:
            page = rng.randrange(0x7000_0000_0000, 0x7FFF_0000_0000) & ~0xFFF
            line += f" RKey 0x1fff00 VAddr {page:#016x}"
        return line + "\n"

    local, remote = rng.sample(range(1, 0x40), 2)
    return side("local", local) + side("remote", remote)


def ib_write_bw(rng: random.Random, *, device: str, seconds: int, rate_bps: float) -> str:
    """``ib_write_bw -d DEV -i 1 -p PORT --report_gbits -D SECONDS SERVER`` on the client:
    the iterations its average moved in the duration (peak not measured: 0.00)."""
    iterations = round(rate_bps * seconds / 8 / PERFTEST_MESSAGE)
    average = iterations * PERFTEST_MESSAGE * 8 / seconds / GIGA
    rate = iterations / seconds / 10**6
    table = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        f" {PERFTEST_MESSAGE:<10d} {iterations:<14d}   0.00               {average:.2f}"
        f" \t\t     {rate:.6f}\n"
    )
    return synthetic(
        "ib_write_bw",
        "WARNING: BW peak won't be measured in this run.\n"
        + _perftest_header(
            "RDMA_Write BW Test",
            device,
            128,
            0,
            " CQ Moderation   : 1\n CQE Poll Batch  : Dynamic\n",
        )
        + _addresses(rng, rkey=True)
        + f"{PERFTEST_RULE}\n"
        + table
        + PERFTEST_RULE,
    )


def ib_write_lat(rng: random.Random, *, device: str, iterations: int, typical_us: float) -> str:
    """``ib_write_lat -d DEV -i 1 -p PORT -n ITERATIONS SERVER`` on the client: one row of
    2-byte messages whose typical latency is ``typical_us`` (to 0.01 us, as printed)."""
    t_min = typical_us - rng.uniform(0.02, 0.08)
    t_avg = typical_us + rng.uniform(0.0, 0.04)
    t_max = typical_us + rng.uniform(2.5, 6.0)
    p99 = typical_us + rng.uniform(0.08, 0.2)
    p999 = typical_us + rng.uniform(1.0, 3.5)
    columns = (
        " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    "
        "t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n"
    )
    row = (
        f" {PERFTEST_LAT_MESSAGE:<7d} {iterations:<10d}     {t_min:.2f}           {t_max:.2f}"
        f"         {typical_us:.2f}     \t       {t_avg:.2f}        \t{rng.uniform(0.02, 0.12):.2f}"
        f"   \t\t{p99:.2f}    \t\t{p999:.2f}   \n"
    )
    return synthetic(
        "ib_write_lat",
        _perftest_header("RDMA_Write Latency Test", device, 1, 220, "")
        + _addresses(rng, rkey=True)
        + f"{PERFTEST_RULE}\n"
        + columns
        + row
        + PERFTEST_RULE,
    )


# --- nccl-tests all_reduce_perf ------------------------------------------------------------

NCCL_WARMUP = 5
NCCL_ITERATIONS = 20
GPU_NAMES = {
    "A100": "NVIDIA A100-SXM4-80GB",
    "A800": "NVIDIA A800-SXM4-80GB",
    "H800": "NVIDIA H800",
    "H100": "NVIDIA H100 80GB HBM3",
    "H200": "NVIDIA H200",
}
PCI_BUSES = ("0x07", "0x0f", "0x47", "0x4e", "0x87", "0x90", "0xb7", "0xbd")


def nccl_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """The sizes ``-b MIN -e MAX -f 2`` runs: MIN, 2 MIN, ... up to MAX."""
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def _nccl_time(microseconds: float) -> str:
    """nccl-tests' time column: more digits the shorter the time."""
    if microseconds >= 10000:
        return f"{microseconds:7.0f}"
    if microseconds >= 100:
        return f"{microseconds:7.1f}"
    return f"{microseconds:7.2f}"


def all_reduce_perf(
    rng: random.Random,
    *,
    hosts: list[str],
    gpus: int,
    gpu_model: str,
    sizes: list[int],
    busbw_bps: float,
) -> str:
    """``mpirun ... all_reduce_perf -b MIN -e MAX -f 2 -g 1`` over ``hosts`` with ``gpus``
    ranks each, whose large messages run near ``busbw_bps``: each size's time is a
    latency plus its bytes at that bus bandwidth, and the closing average is the mean
    busbw of every row (about ``busbw_bps`` when every size is large)."""
    ranks = len(hosts) * gpus
    factor = 2 * (ranks - 1) / ranks
    peak = busbw_bps / 8 / GIGA  # GB/s
    lines = [
        f"# nThread 1 nGpus 1 minBytes {sizes[0]} maxBytes {sizes[-1]} step: 2(factor) "
        f"warmup iters: {NCCL_WARMUP} iters: {NCCL_ITERATIONS} agg iters: 1 validation: 1 "
        "graph: 0",
        "#",
        "# Using devices",
    ]
    rank = 0
    for host in hosts:
        pid = rng.randrange(20000, 60000)
        for gpu in range(gpus):
            lines.append(
                f"#  Rank {rank:2d} Group  0 Pid {pid + gpu:6d} on {host:>12} device {gpu:2d} "
                f"[{PCI_BUSES[gpu % len(PCI_BUSES)]}] {GPU_NAMES.get(gpu_model, gpu_model)}"
            )
            rank += 1
    lines += [
        "NCCL version 2.18.5+cuda12.2",
        "#",
        "#                                                              out-of-place          "
        "             in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)      "
        "      (us)  (GB/s)  (GB/s)       ",
    ]
    busbws: list[float] = []
    latency_us = rng.uniform(35, 60)

    def measured(size: int) -> tuple[str, float, float]:
        # Each run of a size varies a little around the fabric's bus bandwidth.
        at = peak * rng.uniform(0.985, 1.015)
        microseconds = latency_us + size * factor / (at * 1e3)
        algbw = size / microseconds / 1e3
        busbw = algbw * factor
        busbws.append(busbw)
        return _nccl_time(microseconds), algbw, busbw

    for size in sizes:
        out_time, out_alg, out_bus = measured(size)
        in_time, in_alg, in_bus = measured(size)
        lines.append(
            f"{size:12d}  {size // 4:12d}     float     sum      -1  {out_time}  {out_alg:6.2f}"
            f"  {out_bus:6.2f}      0  {in_time}  {in_alg:6.2f}  {in_bus:6.2f}      0"
        )
    lines += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {sum(busbws) / len(busbws):g} ",
        "#",
    ]
    return synthetic("all_reduce_perf", "\n".join(lines))
