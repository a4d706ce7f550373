"""The nccl-tests and perftest parsers never crash.

Whatever the text (random, a real output cut at any line or byte, bytes or words changed,
absurd figures written into real rows), each parser either returns sane figures (finite,
non-negative, storable in a bigint column) or raises ParseError (RunFailed included).
Anything else (IndexError, decimal.Overflow, a NaN in the result) fails the test.

Every property runs EXAMPLES examples per parser, derandomized and without an example
database, so CI replays exactly the same cases.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpulease_verify.parsers import ParseError
from gpulease_verify.parsers.base import MAX_FIGURE
from gpulease_verify.parsers.nccl_tests import parse_nccl_tests
from gpulease_verify.parsers.perftest import parse_perftest

from . import FIXTURES

EXAMPLES = 200

Parser = Callable[[str], Any]
PARSERS: dict[str, Parser] = {"nccl-tests": parse_nccl_tests, "perftest": parse_perftest}
FIXTURE_TEXTS = {
    tool: [path.read_text(encoding="utf-8") for path in sorted((FIXTURES / tool).glob("*.txt"))]
    for tool in PARSERS
}
ABSURD = (
    "inf",
    "-inf",
    "nan",
    "-nan",
    "1e300",
    "9e999",
    "-5",
    "1.04858e+06",
    "-0.00",
    "N/A",
    "9" * 40,
    "1e999999999",
    "0x1p4",
    "",
)
# Result headers and rows, with or without a launcher prefix.
_TABLE_LINE = re.compile(r"^(?:\S*:)?\s*(?:#\s*(?:bytes|size)\b|#bytes|\d)")
_HEADER = re.compile(r"#\s*(?:bytes|size)\s")
_NUMBER = re.compile(r"(?<![\w.+-])[+-]?\d+(?:\.\d+)?(?:e[+-]\d+)?(?![\w.])")

fuzz_settings = settings(
    max_examples=EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
tools = pytest.mark.parametrize("tool", list(PARSERS))


def assert_parses_sanely_or_refuses(parse: Parser, text: str) -> None:
    try:
        result = parse(text)
    except ParseError:
        return
    _assert_sane(result, type(result).__name__)


def _assert_sane(value: Any, where: str) -> None:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        assert type(value).__dataclass_params__.frozen, f"{where} is not frozen"
        for field in dataclasses.fields(value):
            _assert_sane(getattr(value, field.name), f"{where}.{field.name}")
    elif isinstance(value, tuple):
        for index, item in enumerate(value):
            _assert_sane(item, f"{where}[{index}]")
    elif isinstance(value, bool) or value is None or isinstance(value, str):
        return
    elif isinstance(value, int | float):
        assert math.isfinite(value), f"{where} = {value!r} is not finite"
        assert 0 <= value <= MAX_FIGURE, f"{where} = {value!r} cannot be stored"
    else:
        pytest.fail(f"{where} has an unexpected type {type(value).__name__}")


def _vocabulary(tool: str) -> list[str]:
    words = {word for text in FIXTURE_TEXTS[tool] for word in text.split()}
    return sorted(words | set(ABSURD) - {""})


@tools
def test_every_fixture_cut_after_every_line(tool):
    parse = PARSERS[tool]
    for text in FIXTURE_TEXTS[tool]:
        lines = text.splitlines(keepends=True)
        for end in range(len(lines) + 1):
            assert_parses_sanely_or_refuses(parse, "".join(lines[:end]))
            # the same cut, with the last line half printed
            if end < len(lines):
                half = lines[end][: len(lines[end]) // 2]
                assert_parses_sanely_or_refuses(parse, "".join(lines[:end]) + half)


@tools
@fuzz_settings
@given(data=st.data())
def test_random_text(tool, data):
    text = data.draw(
        st.one_of(
            st.text(max_size=400),
            # words of real outputs in random order reach the table code far more often
            st.lists(
                st.tuples(st.sampled_from(_vocabulary(tool)), st.sampled_from(" \n\t")),
                max_size=120,
            ).map(lambda pairs: "".join(word + gap for word, gap in pairs)),
        )
    )
    assert_parses_sanely_or_refuses(PARSERS[tool], text)


@tools
@fuzz_settings
@given(data=st.data())
def test_fixture_cut_at_a_random_byte(tool, data):
    raw = data.draw(st.sampled_from(FIXTURE_TEXTS[tool])).encode()
    end = data.draw(st.integers(min_value=0, max_value=len(raw)))
    assert_parses_sanely_or_refuses(PARSERS[tool], raw[:end].decode(errors="replace"))


@tools
@fuzz_settings
@given(data=st.data())
def test_fixture_with_bytes_changed(tool, data):
    raw = bytearray(data.draw(st.sampled_from(FIXTURE_TEXTS[tool])).encode())
    changes = data.draw(
        st.lists(
            st.tuples(
                st.integers(min_value=0, max_value=len(raw) - 1),
                st.one_of(st.integers(0, 255), st.sampled_from(b"0123456789.-+eE#N/A \n\t[]%")),
            ),
            min_size=1,
            max_size=8,
        )
    )
    for position, byte in changes:
        raw[position] = byte
    assert_parses_sanely_or_refuses(PARSERS[tool], raw.decode(errors="replace"))


@tools
@fuzz_settings
@given(data=st.data())
def test_fixture_with_words_changed(tool, data):
    """Words dropped, doubled or replaced in a real output's lines: headers and rows that
    no longer agree, a column name bent out of shape, a row that gained a value."""
    lines = data.draw(st.sampled_from(FIXTURE_TEXTS[tool])).splitlines()
    table = [index for index, line in enumerate(lines) if _TABLE_LINE.match(line)]
    headers = [index for index in table if _HEADER.search(lines[index])]
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        # half the changes go to a header line: there are few of them and much hangs on them
        index = data.draw(
            st.one_of(
                st.sampled_from(headers or table or range(len(lines))),
                st.sampled_from(table or range(len(lines))),
            )
        )
        words = lines[index].split()
        if not words:
            continue
        at = data.draw(st.integers(min_value=0, max_value=len(words) - 1))
        change = data.draw(st.sampled_from(["drop", "double", "replace", "bend"]))
        if change == "drop":
            del words[at]
        elif change == "double":
            words.insert(at, words[at])
        elif change == "replace":
            words[at] = data.draw(st.sampled_from(_vocabulary(tool)))
        else:
            word = words[at]
            spot = data.draw(st.integers(min_value=0, max_value=len(word) - 1))
            words[at] = word[:spot] + data.draw(st.sampled_from("X]0/%[ ")) + word[spot + 1 :]
        lines[index] = " ".join(words)
    assert_parses_sanely_or_refuses(PARSERS[tool], "\n".join(lines))


@tools
@fuzz_settings
@given(data=st.data())
def test_fixture_with_absurd_figures(tool, data):
    text = data.draw(st.sampled_from(FIXTURE_TEXTS[tool]))
    numbers = list(_NUMBER.finditer(text))
    picks = data.draw(
        st.lists(
            st.tuples(st.sampled_from(numbers), st.sampled_from(ABSURD)),
            min_size=1,
            max_size=4,
            unique_by=lambda pick: pick[0].start(),
        )
    )
    for match, figure in sorted(picks, key=lambda pick: pick[0].start(), reverse=True):
        text = text[: match.start()] + figure + text[match.end() :]
    assert_parses_sanely_or_refuses(PARSERS[tool], text)
