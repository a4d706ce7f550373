"""Shared inputs of the fuzz tests: budgets, mutations of real outputs, absurd figures."""

import re

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# What an absurd figure looks like in a tool's output; "" deletes the number.
ABSURD = [
    "inf",
    "-inf",
    "nan",
    "-nan",
    "NaN",
    "Infinity",
    "1e300",
    "9e999",
    "-1",
    "-0.5",
    "18446744073709551615",
    "9223372036854775808",
    "1" + "0" * 40,
    "9" * 400,
    "9" * 5000,
    "\x00",
    "1\x002",
    "0x7f",
    "1e-400",
    "",
]
NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")


def budget(examples: int):  # type: ignore[no-untyped-def]
    """A fixed, derandomized number of examples, so a run takes the same time every time."""
    return settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


def mutated(data: st.DataObject, text: str) -> bytes:
    """`text` with one to eight bytes flipped, inserted or deleted."""
    raw = bytearray(text.encode())
    for _ in range(data.draw(st.integers(1, 8))):
        position = data.draw(st.integers(0, len(raw) - 1)) if raw else 0
        operation = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        byte = data.draw(st.integers(0, 255))
        if operation == "flip" and raw:
            raw[position] ^= byte or 1
        elif operation == "insert":
            raw.insert(position, byte)
        elif raw:
            del raw[position]
    return bytes(raw)


def with_absurd_figures(data: st.DataObject, text: str) -> str:
    """`text` with one to four of its numbers replaced by absurd ones."""
    numbers = list(NUMBER.finditer(text))
    if not numbers:
        return text
    chosen = data.draw(st.lists(st.sampled_from(numbers), min_size=1, max_size=4, unique=True))
    pieces, last = [], 0
    for match in sorted(chosen, key=lambda match: match.start()):
        pieces += [text[last : match.start()], data.draw(st.sampled_from(ABSURD))]
        last = match.end()
    return "".join(pieces) + text[last:]


def random_text():  # type: ignore[no-untyped-def]
    """Any text, lone surrogates included (what a JSON body can carry)."""
    return st.one_of(
        st.text(max_size=400),
        st.binary(max_size=400).map(lambda raw: raw.decode("utf-8", "surrogateescape")),
    )
