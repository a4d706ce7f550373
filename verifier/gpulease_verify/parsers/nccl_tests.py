"""nccl-tests (all_reduce_perf, all_gather_perf, alltoall_perf, ...) text output.

algbw and busbw are printed in GB/s with GB = 10^9 bytes: NVIDIA/nccl-tests computes
``baseBw = (double)(count * typesize) / 1.0E9 / sec``. The closing "# Avg bus bandwidth"
line is the mean busbw of the printed rows, in the same unit.

The result table layout changed over the years, so columns are located by their header:

- 2017:   bytes N type op [root] | time algbw busbw res | ...   (time in ms, as NCCL 1's tests)
- 2019:   size count type [redop] [root] | time algbw busbw error | ...   (time in us)
- 2.13+:  size count type redop root | time algbw busbw #wrong | ...  (root -1 when unused)
- newer:  the same plus "copybw", per-iteration statistics (i_min ...) or a timestamp
- "error"/"res" is the maximum numeric deviation, not a count; "#wrong" is a count printed
  with %g (so 1048576 wrong elements read "1.04858e+06") and "N/A" when unchecked (-c 0).
- alltoall and other tests without a reduction printed an empty redop cell for years, so
  their rows hold one value fewer than the header names; hypercube still does.
- a row whose out-of-place time/algbw/busbw read "N/A" measured nothing and is left out; an
  in-place group that reads so is None.

Lines may carry launcher prefixes ("[1,0]<stdout>:" from mpirun --tag-output, "0: " from
srun -l, "host: " from pdsh), NCCL INFO/WARN lines may be interleaved, and outputs pasted
into Markdown often lost their leading "#".
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
    count,
    decimal,
    exact,
    one_line,
    storable,
)

_GIGABYTES_TO_BITS = GIGA * BITS_PER_BYTE
_PREFIXES = (
    re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:\s?"),
    re.compile(r"^\s*\d+:\s"),
    re.compile(r"^[A-Za-z][\w.-]*:\s"),
)
_COLLECTIVE_STARTING = re.compile(r"Collective test starting:\s*(\w+?)_perf")
_BINARY = re.compile(r"\b([a-z][a-z_]*?)_perf(?:_mpi)?\b")
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?(?:Pid\s+\d+\s+)?on\s+\S+\s+device")
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
# The 2017 header named its columns after NCCL 1's tests.
_ALIASES = {"bytes": "size", "N": "count", "op": "redop", "res": "error"}
_GROUP_COLUMNS = {
    "time",
    "cputime",
    "algbw",
    "busbw",
    "copybw",
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
# Cells a row may leave empty: the redop of a test without a reduction, and the root with
# it (tolerated, though no upstream release prints an empty root).
_OPTIONAL_CELLS = (("redop",), ("redop", "root"))
_NOT_MEASURED = "N/A"


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
    columns: tuple[str, ...]
    groups: tuple[dict[str, int], ...]
    us_per_time_unit: int

    @property
    def has_timestamp(self) -> bool:
        return self.columns[-1] == "timestamp"

    def fits(self, values: list[str]) -> bool:
        # The timestamp ("%Y-%m-%d %H:%M:%S") is one column and two words.
        expected = len(self.columns) + (1 if self.has_timestamp else 0)
        return len(values) == expected


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
    wrong_total = _out_of_bounds(lines) if uses_error_column else _wrong_total(rows)
    return NcclTestsResult(
        collective=_collective(text),
        ranks=ranks,
        avg_busbw_bps=_avg_busbw(lines),
        peak_busbw_bps=peak.out_of_place.busbw_bps,
        peak_size_bytes=peak.size_bytes,
        wrong_total=None if wrong_total is None else int(storable(wrong_total, "#wrong total")),
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
    ranks = [
        count(m.group(1), "nccl-tests rank") for line in lines if (m := _RANK.match(line.strip()))
    ]
    if ranks:
        if len(set(ranks)) != len(ranks):
            raise ParseError(
                "nccl-tests output lists the same rank twice: several independent runs are "
                "interleaved (was nccl-tests built with MPI=1?)"
            )
        # A trimmed listing (say only "Rank 71") does not tell how many ranks ran.
        return len(ranks) if sorted(ranks) == list(range(len(ranks))) else None
    counts = [
        count(m.group(1), "nccl-tests nranks") for line in lines if (m := _NRANKS.search(line))
    ]
    return max(counts) if counts else None


def _avg_busbw(lines: list[str]) -> Number | None:
    for line in lines:
        match = _AVG_BUSBW.match(line.strip())
        if match:
            value = match.group(1)
            # nccl-tests prints -nan when no row was timed: there is no average.
            if value.lower().lstrip("+-") in ("nan", "inf"):
                return None
            return _bandwidth(value, "Avg bus bandwidth")
    return None


def _out_of_bounds(lines: list[str]) -> int | None:
    for line in lines:
        match = _OUT_OF_BOUNDS.match(line.strip())
        if match:
            return count(match.group(1), "nccl-tests Out of bounds values")
    return None


def _wrong_total(rows: list[NcclRow]) -> int | None:
    counts = [
        measurement.wrong
        for row in rows
        for measurement in (row.out_of_place, row.in_place)
        if measurement is not None and measurement.wrong is not None
    ]
    return sum(counts) if counts else None


def _layouts(header: str) -> list[_Layout]:
    """The header's layout, then the same without the cells rows may leave empty."""
    columns = [_ALIASES.get(name, name) for name in header.lstrip("#").split()]
    if not columns or columns[0] != "size" or "count" not in columns:
        return []
    us_per_time_unit = 1000 if header.lstrip("#").split()[0] == "bytes" else 1
    full = _layout(columns, us_per_time_unit)
    if full is None:
        return []
    layouts = [full]
    for dropped in _OPTIONAL_CELLS:
        if all(name in columns for name in dropped):
            reduced = _layout([c for c in columns if c not in dropped], us_per_time_unit)
            if reduced is not None:
                layouts.append(reduced)
    return layouts


def _layout(columns: list[str], us_per_time_unit: int) -> _Layout | None:
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
    return _Layout(columns=tuple(columns), groups=tuple(groups), us_per_time_unit=us_per_time_unit)


def _fit(layouts: list[_Layout], values: list[str]) -> _Layout | None:
    full, *reduced = layouts
    if full.fits(values):
        return full
    for layout in reduced:
        # The row must hold a number where the header puts the empty cell: a row cut short
        # ("... float sum -1 10052") is garbled, not a test without a reduction.
        first_dropped = next(i for i, name in enumerate(full.columns) if name not in layout.columns)
        if layout.fits(values) and _is_number(values[first_dropped]):
            return layout
    return None


def _is_number(text: str) -> bool:
    try:
        decimal(text, "cell")
    except ParseError:
        return False
    return True


def _table(lines: list[str]) -> tuple[list[NcclRow], bool]:
    layouts: list[_Layout] = []
    rows: list[NcclRow] = []
    for line in lines:
        if _is_noise(line):
            continue
        stripped = line.strip()
        header = _layouts(stripped)
        if header:
            layouts = header
            continue
        if stripped.startswith("#"):
            continue
        values = stripped.split()
        if not layouts or not values or not values[0].isdigit():
            continue
        layout = _fit(layouts, values)
        if layout is None:
            raise ParseError(f"nccl-tests result row does not fit the header: {one_line(line)}")
        row = _row(layout, values)
        if row is not None:
            rows.append(row)
    uses_error_column = bool(layouts) and "error" in layouts[0].groups[0]
    return rows, uses_error_column


def _row(layout: _Layout, values: list[str]) -> NcclRow | None:
    """The row, or None when its out-of-place figures read N/A (nothing was measured)."""
    cell = dict(zip(layout.columns, values, strict=False))
    measurements = [_measurement(layout, group, values) for group in layout.groups]
    if measurements[0] is None:
        return None
    return NcclRow(
        size_bytes=count(cell["size"], "nccl-tests size"),
        count=count(cell["count"], "nccl-tests count"),
        type=cell.get("type"),
        redop=cell.get("redop"),
        out_of_place=measurements[0],
        in_place=measurements[1] if len(measurements) > 1 else None,
    )


def _measurement(
    layout: _Layout, group: dict[str, int], values: list[str]
) -> NcclMeasurement | None:
    cells = {name: values[index] for name, index in group.items()}
    if _NOT_MEASURED in (cells["time"], cells["algbw"], cells["busbw"]):
        return None
    time_us = decimal(cells["time"], "nccl-tests time") * layout.us_per_time_unit
    return NcclMeasurement(
        time_us=float(storable(float(time_us), "nccl-tests time")),
        algbw_bps=_bandwidth(cells["algbw"], "algbw"),
        busbw_bps=_bandwidth(cells["busbw"], "busbw"),
        wrong=_wrong(cells["#wrong"]) if "#wrong" in cells else None,
    )


def _wrong(text: str) -> int | None:
    """The #wrong count; %g prints large counts in exponent notation, rounded to 6 digits."""
    if text == _NOT_MEASURED:
        return None
    value = decimal(text, "nccl-tests #wrong")
    if value != value.to_integral_value():
        raise ParseError(f"nccl-tests #wrong {text!r} is not a count")
    return int(storable(int(value), "nccl-tests #wrong"))


def _bandwidth(text: str, what: str) -> Number:
    name = f"nccl-tests {what}"
    return storable(exact(decimal(text, name) * _GIGABYTES_TO_BITS), name)
