"""Shared pieces of the probe parsers: the error type and exact unit arithmetic.

Numbers are read from the tool's text as Decimal and scaled exactly, so that a printed
"23.4567" GB/s becomes 187653600000 bits/s and not 187653600000.00003.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

Number = int | float

BITS_PER_BYTE = 8
# perftest's "MB/sec" and "MiB/sec" both divide by 0x100000 (2^20) bytes.
MEBIBYTE = 2**20
GIGA = 10**9
MEGA = 10**6


class ParseError(ValueError):
    """The text is not a usable output of the tool; the message is one human line."""

    def __init__(self, reason: str) -> None:
        super().__init__(one_line(reason))


class RunFailed(ParseError):
    """The output is readable and says the run itself failed (iperf3's error JSON, an NCCL
    failure with no result table): a failed measurement, not a garbled one."""


def one_line(text: str, limit: int = 300) -> str:
    """Collapse whitespace so a reason always fits on one line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# No tool prints a figure with more than 24 integer digits (a bigint has 19); longer
# numbers would overflow Decimal contexts or int() limits before any sanity check.
MAX_DIGITS = 24

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def decimal(text: str, what: str) -> Decimal:
    """A finite decimal from `text`, or ParseError naming `what`."""
    candidate = text.strip()
    if not _NUMBER.fullmatch(candidate):
        raise ParseError(f"{what}: {candidate!r} is not a number")
    try:
        value = Decimal(candidate)
    except InvalidOperation as error:  # pragma: no cover - the regex already guards
        raise ParseError(f"{what}: {candidate!r} is not a number") from error
    if value.adjusted() > MAX_DIGITS:
        raise ParseError(f"{what}: {candidate!r} is too large to be a real measurement")
    return value


def integer(text: str, what: str) -> int:
    candidate = text.strip()
    if not re.fullmatch(r"[+-]?\d+", candidate):
        raise ParseError(f"{what}: {candidate!r} is not an integer")
    if len(candidate.lstrip("+-")) > MAX_DIGITS:
        raise ParseError(f"{what}: {candidate[:30]!r}... is too large to be a real measurement")
    return int(candidate)


def exact(value: Decimal) -> Number:
    """An int when the value is whole, otherwise the nearest float."""
    if value == value.to_integral_value():
        return int(value)
    return float(value)


def scaled(text: str, factor: int | Decimal, what: str) -> Number:
    """`text` read as a number and multiplied by `factor`, exactly."""
    return exact(decimal(text, what) * factor)


def non_negative(value: Number, what: str) -> Number:
    if value < 0:
        raise ParseError(f"{what} is negative ({value}); the tool's own arithmetic failed")
    return value


# The largest figure a run row can hold (a signed 64-bit column, as PostgreSQL's bigint).
# Anything beyond it (1e300 bits/s, 9e999) cannot be a real measurement.
MAX_FIGURE = 2**63 - 1


def storable(value: Number, what: str) -> Number:
    """`value` if it is a finite, non-negative figure that a run row can store, else
    ParseError: the output is then kept raw and marked unparsable, never a crash."""
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        raise ParseError(f"{what} is not a finite number ({value})")
    if value < 0:
        raise ParseError(f"{what} is negative ({value}); the tool's own arithmetic failed")
    if value > MAX_FIGURE:
        # An int past a float's range cannot take float formatting: show it as a Decimal.
        shown = f"{value:.3g}" if isinstance(value, float) else f"{Decimal(value):.3g}"
        raise ParseError(f"{what} ({shown}) is too large to be a real measurement")
    return value


def count(text: str, what: str) -> int:
    """A whole, non-negative, storable count (sizes, iterations, ranks)."""
    return int(storable(integer(text, what), what))
