"""perftest (ib_write_bw, ib_read_bw, ib_send_bw, ib_*_lat, ...) text output.

Units, from linux-rdma/perftest src/perftest_parameters.c (print_report_bw):
``format_factor = (report_fmt == MBS) ? 0x100000 : 125000000`` -- the "MB/sec" column (renamed
"MiB/sec" in later releases) is 2^20 bytes per second, while --report_gbits prints "Gb/sec",
10^9 bits per second. Latencies are microseconds unless -C asked for CPU cycles.

The peak is computed as ``!(noPeak) * ...``: perftest prints 0.00 when it did not measure a
peak (duration mode -D, --run_infinitely, -N, or the passive server side). That 0.00 becomes
None here, never a zero bandwidth.

Layouts over the releases (perftest_parameters.h RESULT_FMT*): the bandwidth table may add
"#sl" (raw QoS), per-port "BW Port1[...] MsgRate Port1[Mpps] ..." columns or "CPU_Util[%]";
the latency table was "t_min t_max t_typical" until 2016, then gained t_avg, t_stdev and the
99% / 99.9% percentiles; duration mode (-D) prints only "t_avg[usec] tps average".
--run_infinitely prints one row per interval and never a closing line: the last row is the
latest interval.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import (
    BITS_PER_BYTE,
    GIGA,
    MEBIBYTE,
    Number,
    ParseError,
    count,
    decimal,
    exact,
    one_line,
    storable,
)


@dataclass(frozen=True)
class PerftestBandwidthRow:
    msg_size_bytes: int
    iterations: int
    bw_peak_bps: Number | None
    bw_avg_bps: Number
    msg_rate_mpps: float | None


@dataclass(frozen=True)
class PerftestLatencyRow:
    msg_size_bytes: int
    iterations: int
    t_min_us: float | None
    t_max_us: float | None
    t_typical_us: float | None
    t_avg_us: float | None
    t_stdev_us: float | None
    p99_us: float | None
    p999_us: float | None


@dataclass(frozen=True)
class PerftestBandwidthResult:
    test: str | None
    kind: str
    msg_size_bytes: int
    iterations: int
    bw_peak_bps: Number | None
    bw_avg_bps: Number
    msg_rate_mpps: float | None
    rows: tuple[PerftestBandwidthRow, ...]


@dataclass(frozen=True)
class PerftestLatencyResult:
    test: str | None
    kind: str
    msg_size_bytes: int
    iterations: int
    t_min_us: float | None
    t_max_us: float | None
    t_typical_us: float | None
    t_avg_us: float | None
    t_stdev_us: float | None
    p99_us: float | None
    p999_us: float | None
    rows: tuple[PerftestLatencyRow, ...]


PerftestResult = PerftestBandwidthResult | PerftestLatencyResult

_VERBS = {
    "Send": "send",
    "Send_imm": "send",
    "RDMA_Write": "write",
    "RDMA_Write_imm": "write",
    "RDMA_Read": "read",
    "Atomic": "atomic",
}
_TITLE = re.compile(
    r"^\s*(Send_imm|Send|RDMA_Write_imm|RDMA_Write|RDMA_Read|Atomic)\b.*\b(BW|Latency)\b.*Test\s*$"
)
_RAW_ETHERNET = re.compile(r"Connection type\s*:\s*RawEth\b")
_COLUMN = re.compile(
    r"#\w+|BW \w+\[[^\]]*\]|MsgRate(?: \w+)?\[[^\]]*\]|CPU_Util\[[^\]]*\]"
    r"|t_\w+\[[^\]]*\]|99(?:\.9)?% percentile\[[^\]]*\]|tps average"
)
_ROW_START = re.compile(r"^\s*\d+\s+\d+\s")
_FAILURE = re.compile(
    r"(error|fail|couldn't|could not|unable|can't|cannot|no such|not supported|timeout)",
    re.IGNORECASE,
)
_LATENCY_COLUMNS = {
    "t_min": "t_min_us",
    "t_max": "t_max_us",
    "t_typical": "t_typical_us",
    "t_avg": "t_avg_us",
    "t_stdev": "t_stdev_us",
    "99% percentile": "p99_us",
    "99.9% percentile": "p999_us",
}


def parse_perftest(text: str) -> PerftestResult:
    lines = text.splitlines()
    test = _test_name(text)
    header_at = _header_index(lines)
    columns = _COLUMN.findall(lines[header_at])
    table = _table_lines(lines[header_at + 1 :])
    if not table:
        raise ParseError(f"perftest printed its result header but no result{_failure_hint(lines)}")
    if any(column.startswith("BW peak") for column in columns):
        bandwidth_rows = [_bandwidth_row(columns, line) for line in table]
        return _bandwidth_result(test, bandwidth_rows)
    if any(column.startswith("t_") for column in columns):
        latency_rows = [_latency_row(columns, line) for line in table]
        return _latency_result(test, latency_rows)
    raise ParseError(f"perftest result header not understood: {one_line(lines[header_at])}")


def _test_name(text: str) -> str | None:
    for line in text.splitlines():
        match = _TITLE.match(line)
        if match:
            kind = "bw" if match.group(2) == "BW" else "lat"
            if _RAW_ETHERNET.search(text):
                return f"raw_ethernet_{kind}"
            return f"ib_{_VERBS[match.group(1)]}_{kind}"
    return None


def _header_index(lines: list[str]) -> int:
    for index, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("#bytes") and "#iterations" in stripped:
            return index
    raise ParseError(f"no perftest result table (no '#bytes' header){_failure_hint(lines)}")


def _failure_hint(lines: list[str]) -> str:
    for line in lines:
        if _FAILURE.search(line) and "WARNING" not in line:
            return f": {one_line(line)}"
    return ""


def _table_lines(after_header: list[str]) -> list[str]:
    """Result rows: they follow the header until the closing dashed line.

    Other text may be interleaved (perftest's own "Conflicting CPU frequency" notice, a
    repeated header); it is skipped, a row is only a line that starts with two integers.
    """
    rows: list[str] = []
    for line in after_header:
        if line.strip().startswith("-----") and rows:
            break
        if _ROW_START.match(line):
            rows.append(line)
    return rows


def _bits_per_second_factor(column: str) -> int:
    unit = column[column.index("[") + 1 : column.index("]")]
    if unit in ("MB/sec", "MiB/sec"):
        return BITS_PER_BYTE * MEBIBYTE
    if unit == "Gb/sec":
        return GIGA
    raise ParseError(f"perftest bandwidth unit {unit!r} is not MB/sec, MiB/sec or Gb/sec")


def _cells(columns: list[str], line: str) -> dict[str, str]:
    values = line.split()
    if len(values) != len(columns):
        raise ParseError(
            f"perftest row has {len(values)} values for {len(columns)} columns: {one_line(line)}"
        )
    missing = {"#bytes", "#iterations"} - set(columns)
    if missing:
        raise ParseError(f"perftest result header lacks {', '.join(sorted(missing))}")
    return dict(zip(columns, values, strict=True))


def _column(columns: list[str], prefix: str) -> str:
    found = next((column for column in columns if column.startswith(prefix)), None)
    if found is None:
        raise ParseError(f"perftest result header has no {prefix.rstrip('[')!r} column")
    return found


def _bandwidth_row(columns: list[str], line: str) -> PerftestBandwidthRow:
    cells = _cells(columns, line)
    peak_column = _column(columns, "BW peak")
    average_column = _column(columns, "BW average")
    rate_column = next((c for c in columns if c.startswith("MsgRate[")), None)
    peak = _bandwidth(cells[peak_column], _bits_per_second_factor(peak_column), "BW peak")
    average = _bandwidth(cells[average_column], _bits_per_second_factor(average_column), "BW avg")
    return PerftestBandwidthRow(
        msg_size_bytes=count(cells["#bytes"], "perftest #bytes"),
        iterations=count(cells["#iterations"], "perftest #iterations"),
        bw_peak_bps=peak or None,
        bw_avg_bps=average,
        msg_rate_mpps=_float(cells[rate_column], "MsgRate") if rate_column else None,
    )


def _bandwidth(text: str, factor: int, what: str) -> Number:
    name = f"perftest {what}"
    return storable(exact(decimal(text, name) * factor), name)


def _float(text: str, what: str) -> float:
    name = f"perftest {what}"
    return float(storable(float(decimal(text, name)), name))


def _latency_row(columns: list[str], line: str) -> PerftestLatencyRow:
    cells = _cells(columns, line)
    times: dict[str, float | None] = dict.fromkeys(_LATENCY_COLUMNS.values())
    for column, value in cells.items():
        name, _, unit = column.partition("[")
        if name not in _LATENCY_COLUMNS:
            continue
        if unit.rstrip("]") != "usec":
            unit_name = unit.rstrip("]")
            raise ParseError(f"perftest latency is in {unit_name!r}, not usec (run without -C)")
        times[_LATENCY_COLUMNS[name]] = _float(value, name)
    return PerftestLatencyRow(
        msg_size_bytes=count(cells["#bytes"], "perftest #bytes"),
        iterations=count(cells["#iterations"], "perftest #iterations"),
        **times,
    )


def _largest(rows: list[PerftestBandwidthRow] | list[PerftestLatencyRow]) -> int:
    """Index of the row with the largest message size (the last one on a tie)."""
    sizes = [row.msg_size_bytes for row in rows]
    return len(sizes) - 1 - sizes[::-1].index(max(sizes))


def _bandwidth_result(
    test: str | None, rows: list[PerftestBandwidthRow]
) -> PerftestBandwidthResult:
    top = rows[_largest(rows)]
    return PerftestBandwidthResult(
        test=test,
        kind="bw",
        msg_size_bytes=top.msg_size_bytes,
        iterations=top.iterations,
        bw_peak_bps=top.bw_peak_bps,
        bw_avg_bps=top.bw_avg_bps,
        msg_rate_mpps=top.msg_rate_mpps,
        rows=tuple(rows),
    )


def _latency_result(test: str | None, rows: list[PerftestLatencyRow]) -> PerftestLatencyResult:
    top = rows[_largest(rows)]
    return PerftestLatencyResult(
        test=test,
        kind="lat",
        msg_size_bytes=top.msg_size_bytes,
        iterations=top.iterations,
        t_min_us=top.t_min_us,
        t_max_us=top.t_max_us,
        t_typical_us=top.t_typical_us,
        t_avg_us=top.t_avg_us,
        t_stdev_us=top.t_stdev_us,
        p99_us=top.p99_us,
        p999_us=top.p999_us,
        rows=tuple(rows),
    )
