"""nccl-tests (all_reduce_perf, all_gather_perf, alltoall_perf, ...) text output.

algbw and busbw are printed in GB/s with GB = 10^9 bytes: NVIDIA/nccl-tests computes
``baseBw = (double)(count * typesize) / 1.0E9 / sec``. The closing "# Avg bus bandwidth"
line is the mean busbw of the printed rows, in the same unit.

The result table layout changed over the years, so columns are located by their header:

- old:    size count type redop | time algbw busbw error  | time algbw busbw error
- 2.x:    size count type redop root | time algbw busbw #wrong | ... (root -1 when unused)
- newer:  the same plus "#iters", a timestamp, or per-iteration statistics per group
- "error" (old) is the maximum numeric deviation, not a count; "#wrong" is a count and
  reads "N/A" when checking was disabled (-c 0).

Lines may carry launcher prefixes ("[1,0]<stdout>:" from mpirun --tag-output, "0: " from
srun -l, "host: " from pdsh) and NCCL INFO/WARN lines may be interleaved.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import (
    BITS_PER_BYTE,
    GIGA,
    Number,
    ParseError,
    RunFailed,
    decimal,
    exact,
    integer,
    one_line,
)

_GIGABYTES_TO_BITS = GIGA * BITS_PER_BYTE

_PREFIXES = (
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),
    re.compile(r"^\s*\d+:\s"),
    re.compile(r"^[A-Za-z][\w.-]*:\s"),
)
_COLLECTIVE_STARTING = re.compile(r"Collective test starting:\s*(\w+?)_perf")
_BINARY = re.compile(r"\b([a-z][a-z_]*?)_perf(?:_mpi)?\b")
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+\S+\s+device")
_NRANKS = re.compile(r"\bnranks\s+(\d+)")
_AVG_BUSBW = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")
_OUT_OF_BOUNDS = re.compile(r"^#?\s*Out of bounds values\s*:\s*(\d+)")
_FAILURE = re.compile(r"(NCCL failure|Test failure|CUDA failure)")
_COLLECTIVES = {
    "all_reduce",
    "all_gather",
    "alltoall",
    "alltoallv",
    "broadcast",
    "reduce",
    "reduce_scatter",
    "gather",
    "scatter",
    "sendrecv",
    "hypercube",
}
_GROUP_COLUMNS = {
    "time",
    "cputime",
    "algbw",
    "busbw",
    "#wrong",
    "error",
    "#bitdiff",
    "i_min",
    "i_max",
    "i_p99",
    "i_cv%",
    "esttime",
}
_TIME_COLUMNS = ("time", "cputime")


@dataclass(frozen=True)
class NcclMeasurement:
    time_us: float
    algbw_bps: Number
    busbw_bps: Number
    wrong: int | None


@dataclass(frozen=True)
class NcclRow:
    size_bytes: int
    count: int
    type: str | None
    redop: str | None
    out_of_place: NcclMeasurement
    in_place: NcclMeasurement | None


@dataclass(frozen=True)
class NcclTestsResult:
    collective: str | None
    ranks: int | None
    avg_busbw_bps: Number | None
    peak_busbw_bps: Number
    peak_size_bytes: int
    wrong_total: int | None
    rows: tuple[NcclRow, ...]


@dataclass(frozen=True)
class _Layout:
    columns: list[str]
    groups: list[dict[str, int]]

    def matches(self, values: list[str]) -> bool:
        if self.columns[-1] == "timestamp":
            return len(values) >= len(self.columns)
        return len(values) == len(self.columns)


def parse_nccl_tests(text: str) -> NcclTestsResult:
    lines = [_strip_prefix(line) for line in text.splitlines()]
    failure = next((line for line in lines if _FAILURE.search(line)), None)
    if failure is not None:
        raise RunFailed(f"nccl-tests failed: {one_line(failure.lstrip('# .'))}")
    ranks = _ranks(lines)
    rows, uses_error_column = _table(lines)
    if not rows:
        raise ParseError("no nccl-tests result rows found")
    peak = max(rows, key=lambda row: row.out_of_place.busbw_bps)
    return NcclTestsResult(
        collective=_collective(text),
        ranks=ranks,
        avg_busbw_bps=_avg_busbw(lines),
        peak_busbw_bps=peak.out_of_place.busbw_bps,
        peak_size_bytes=peak.size_bytes,
        wrong_total=_out_of_bounds(lines) if uses_error_column else _wrong_total(rows),
        rows=tuple(rows),
    )


def _strip_prefix(line: str) -> str:
    for prefix in _PREFIXES:
        line = prefix.sub("", line, count=1)
    return line


def _is_noise(line: str) -> bool:
    return "NCCL INFO" in line or "NCCL WARN" in line


def _collective(text: str) -> str | None:
    starting = _COLLECTIVE_STARTING.search(text)
    if starting:
        return starting.group(1)
    for match in _BINARY.finditer(text):
        if match.group(1) in _COLLECTIVES:
            return match.group(1)
    return None


def _ranks(lines: list[str]) -> int | None:
    ranks = [int(match.group(1)) for line in lines if (match := _RANK.match(line.strip()))]
    if ranks:
        if len(set(ranks)) != len(ranks):
            raise ParseError(
                "nccl-tests output lists the same rank twice: several independent runs are "
                "interleaved (was nccl-tests built with MPI=1?)"
            )
        # A trimmed listing (say only "Rank 71") does not tell how many ranks ran.
        return len(ranks) if sorted(ranks) == list(range(len(ranks))) else None
    counts = [int(match.group(1)) for line in lines if (match := _NRANKS.search(line))]
    return max(counts) if counts else None


def _avg_busbw(lines: list[str]) -> Number | None:
    for line in lines:
        match = _AVG_BUSBW.match(line.strip())
        if match:
            value = match.group(1)
            if value.lower().lstrip("+-") in ("nan", "inf"):
                return None
            return exact(decimal(value, "nccl-tests Avg bus bandwidth") * _GIGABYTES_TO_BITS)
    return None


def _out_of_bounds(lines: list[str]) -> int | None:
    for line in lines:
        match = _OUT_OF_BOUNDS.match(line.strip())
        if match:
            return int(match.group(1))
    return None


def _wrong_total(rows: list[NcclRow]) -> int | None:
    counts = [
        measurement.wrong
        for row in rows
        for measurement in (row.out_of_place, row.in_place)
        if measurement is not None and measurement.wrong is not None
    ]
    return sum(counts) if counts else None


def _layout(header: str) -> _Layout | None:
    columns = header.lstrip("#").split()
    if not columns or columns[0] != "size" or "count" not in columns:
        return None
    starts = [index for index, name in enumerate(columns) if name in _TIME_COLUMNS]
    if not starts or "busbw" not in columns:
        return None
    groups = []
    for start in starts[:2]:
        group: dict[str, int] = {}
        for index in range(start, len(columns)):
            name = columns[index]
            if name not in _GROUP_COLUMNS or (index > start and name in _TIME_COLUMNS):
                break
            group["time" if name == "cputime" else name] = index
        if not {"time", "algbw", "busbw"} <= group.keys():
            return None
        groups.append(group)
    return _Layout(columns=columns, groups=groups)


def _table(lines: list[str]) -> tuple[list[NcclRow], bool]:
    layout: _Layout | None = None
    rows: list[NcclRow] = []
    for line in lines:
        if _is_noise(line):
            continue
        stripped = line.strip()
        header = _layout(stripped)
        if header is not None:
            layout = header
            continue
        if stripped.startswith("#"):
            continue
        values = stripped.split()
        if layout is None or not values or not values[0].isdigit():
            continue
        if not layout.matches(values):
            raise ParseError(f"nccl-tests result row does not fit the header: {one_line(line)}")
        rows.append(_row(layout, values))
    uses_error_column = layout is not None and "error" in layout.groups[0]
    return rows, uses_error_column


def _row(layout: _Layout, values: list[str]) -> NcclRow:
    cell = dict(zip(layout.columns, values, strict=False))
    measurements = [_measurement(group, values) for group in layout.groups]
    return NcclRow(
        size_bytes=integer(cell["size"], "nccl-tests size"),
        count=integer(cell["count"], "nccl-tests count"),
        type=cell.get("type"),
        redop=cell.get("redop"),
        out_of_place=measurements[0],
        in_place=measurements[1] if len(measurements) > 1 else None,
    )


def _measurement(group: dict[str, int], values: list[str]) -> NcclMeasurement:
    def bandwidth(name: str) -> Number:
        value = exact(decimal(values[group[name]], f"nccl-tests {name}") * _GIGABYTES_TO_BITS)
        if value < 0:
            raise ParseError(f"nccl-tests {name} is negative")
        return value

    wrong = None
    if "#wrong" in group and values[group["#wrong"]] != "N/A":
        wrong = integer(values[group["#wrong"]], "nccl-tests #wrong")
    return NcclMeasurement(
        time_us=float(decimal(values[group["time"]], "nccl-tests time")),
        algbw_bps=bandwidth("algbw"),
        busbw_bps=bandwidth("busbw"),
        wrong=wrong,
    )
