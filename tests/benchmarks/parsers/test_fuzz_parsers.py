"""Property: whatever text reaches a parser, it returns sane figures or refuses.

"Sane": every number in the result is finite, non-negative and fits a bigint column, every
string is storable text (no NUL, valid UTF-8), and the whole result serialises as strict
JSON. "Refuses": ParseError (RunFailed included) with a one-line reason. Any other
exception, or a result that breaks the rule, fails the test.

Inputs: random text; every real fixture cut after each of its lines and at random byte
offsets; byte-level mutations; absurd figures (inf, nan, 1e300, 9e999, negatives, NUL
bytes, 64-bit overflows) put in place of the numbers of real outputs; and inputs of about
1 MiB, the evidence upload limit. Runs are derandomized, with a fixed budget of examples
for each parser and each kind of input (EXAMPLES).
"""

import dataclasses
import json
import math
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpulease_verify.parsers import PARSERS as ALL_PARSERS
from gpulease_verify.parsers import ParseError, to_dict
from gpulease_verify.parsers.base import MAX_FIGURE

from . import FIXTURES
from .fuzzing import NUMBER, budget, mutated, random_text, with_absurd_figures

TOOLS = ("iperf3", "ibstatus", "ibstat", "rdma-link", "ethtool", "counters", "ping")
PARSERS = {tool: ALL_PARSERS[tool] for tool in TOOLS}
# Each parser's own fixtures, read once; every parser is also fed the others' (cross-feed).
SEEDS: dict[str, list[str]] = {
    tool: [
        path.read_text(encoding="utf-8")
        for path in sorted((FIXTURES / tool).iterdir())
        if path.name != "SOURCES.md"
    ]
    for tool in PARSERS
}
ALL_SEEDS = [(tool, text) for tool, texts in SEEDS.items() for text in texts]
EXAMPLES = {"random": 60, "cut": 60, "mutate": 60, "absurd": 80, "nul": 30}


def assert_sane(tool: str, text: str) -> None:
    try:
        result = PARSERS[tool](text)
    except ParseError as error:
        reason = str(error)
        assert reason and "\n" not in reason and len(reason) <= 300, reason
        return
    assert dataclasses.is_dataclass(result)
    values = to_dict(result)
    json.dumps(values, allow_nan=False)
    for value in _leaves(values):
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            assert math.isfinite(value) and 0 <= value <= MAX_FIGURE, (tool, value)
        else:
            assert isinstance(value, str), (tool, value)
            assert "\x00" not in value, (tool, value)
            value.encode("utf-8")


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [*value.keys(), *(leaf for item in value.values() for leaf in _leaves(item))]
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize("tool", sorted(PARSERS))
@budget(EXAMPLES["random"])
@given(text=random_text())
def test_random_text(tool, text):
    assert_sane(tool, text)


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_every_fixture_cut_after_each_line(tool):
    for text in SEEDS[tool]:
        lines = text.splitlines(keepends=True)
        for end in range(len(lines) + 1):
            assert_sane(tool, "".join(lines[:end]))


@pytest.mark.parametrize("tool", sorted(PARSERS))
@budget(EXAMPLES["cut"])
@given(seed=st.sampled_from(ALL_SEEDS), data=st.data())
def test_any_fixture_cut_at_a_random_byte(tool, seed, data):
    raw = seed[1].encode()
    offset = data.draw(st.integers(0, len(raw)))
    assert_sane(tool, raw[:offset].decode("utf-8", errors="replace"))
    assert_sane(tool, raw[:offset].decode("utf-8", errors="surrogateescape"))


def own_seeds(tool: str):  # type: ignore[no-untyped-def]
    return st.sampled_from(SEEDS[tool])


@pytest.mark.parametrize("tool", sorted(PARSERS))
@budget(EXAMPLES["mutate"])
@given(data=st.data())
def test_byte_mutations_of_real_outputs(tool, data):
    raw = mutated(data, data.draw(own_seeds(tool)))
    assert_sane(tool, raw.decode("utf-8", errors="surrogateescape"))
    assert_sane(tool, raw.decode("utf-8", errors="replace"))


@pytest.mark.parametrize("tool", sorted(PARSERS))
@budget(EXAMPLES["absurd"])
@given(data=st.data())
def test_absurd_figures_in_real_outputs(tool, data):
    assert_sane(tool, with_absurd_figures(data, data.draw(own_seeds(tool))))


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_each_figure_of_each_fixture_made_absurd(tool):
    """Exhaustive where the random draw is thin: every number a parser reads (from a JSON
    document's "end" section, from a text summary's last separator) replaced in turn."""
    for text in SEEDS[tool]:
        start = max(text.find('"end"'), text.rfind("- - - - "), 0)
        for match in NUMBER.finditer(text, start):
            for absurd in ("1e300", "-1", "9" * 30, "9" * 400):
                assert_sane(tool, text[: match.start()] + absurd + text[match.end() :])


@pytest.mark.parametrize("tool", sorted(PARSERS))
@budget(EXAMPLES["nul"])
@given(data=st.data())
def test_nul_bytes_anywhere_are_refused(tool, data):
    text = data.draw(own_seeds(tool))
    position = data.draw(st.integers(0, len(text)))
    with pytest.raises(ParseError, match="NUL"):
        PARSERS[tool](text[:position] + "\x00" + text[position:])


HUGE = 1024 * 1024
HUGE_INPUTS = {
    "digits": "9" * HUGE,
    "blanks": " " * HUGE,
    "newlines": "\n" * HUGE,
    "brackets": "[" * HUGE,
    "braces": "{" * HUGE,
    "deep json": '{"end": ' + "[" * (HUGE // 2),
    "counter header then blanks": "NIC statistics:\n" + " " * HUGE,
}


@pytest.mark.parametrize("tool", sorted(PARSERS))
def test_inputs_of_a_mebibyte_are_answered_promptly(tool):
    own = SEEDS[tool][0]
    inputs = {**HUGE_INPUTS, "own output repeated": own * (HUGE // max(len(own), 1))}
    for name, text in inputs.items():
        started = time.monotonic()
        assert_sane(tool, text)
        assert time.monotonic() - started < 3, f"{tool} took too long on {name}"
