"""Whatever a tenant admin uploads as evidence, submit_evidence stores it (raw output kept
as posted) or refuses with a ValidationError whose message says why; never another
exception, and never a database error (a NUL byte, a non-finite or out-of-range figure).

The same property as tests/benchmarks/parsers/test_fuzz_parsers.py, one level up, through
the tool choice (perftest decides between the bandwidth and latency rules, nccl-tests uses
the all_reduce rule) and the database. Seeds are the published outputs under
tests/benchmarks/fixtures/ (sources in each folder's SOURCES.md)."""

import hashlib
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from billing import evidence
from tests.benchmarks.parsers.fuzzing import budget, mutated, random_text, with_absurd_figures
from tests.billing.test_evidence import MEASURED, leased, member
from tests.factories import at

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).parent.parent / "benchmarks" / "fixtures"
NODES = ("gz-h800-01", "gz-h800-02")
TOOLS = {"iperf3": "iperf3", "perftest": "perftest", "nccl-tests": "nccl-tests", "ping": "ping"}
SEEDS = [
    (tool, path.read_text(encoding="utf-8"))
    for tool, folder in TOOLS.items()
    for path in sorted((FIXTURES / folder).iterdir())
    if path.name != "SOURCES.md"
]
EXAMPLES = {"random": 40, "mutated": 60, "absurd": 80}


@pytest.fixture
def lease_and_admin():  # type: ignore[no-untyped-def]
    lease = leased()
    return lease, member(lease)


def outcome(lease, user, tool: str, raw: str, note: str = "") -> str:  # type: ignore[no-untyped-def]
    try:
        item = evidence.submit_evidence(
            lease=lease,
            user=user,
            tool=tool,
            raw_output=raw,
            nodes=list(NODES),
            measured_at=MEASURED,
            note=note,
            now=at("2026-11-10 10:00"),
        )
    except ValidationError as error:
        messages = [m for ms in error.message_dict.values() for m in ms]
        assert messages and all(m.strip() and "\n" not in m for m in messages), messages
        return messages[0]
    item.refresh_from_db()
    assert item.raw_output == raw
    assert item.raw_sha256 == hashlib.sha256(raw.encode()).hexdigest()
    return "stored"


def test_every_published_output_is_stored_or_refused_with_a_reason(lease_and_admin):
    lease, user = lease_and_admin
    answers = {tool: set() for tool in TOOLS}
    for tool, raw in SEEDS:
        answers[tool].add(outcome(lease, user, tool, raw) == "stored")
    # each tool has fixtures that store and fixtures that are refused
    assert all(answers[tool] == {True, False} for tool in ("iperf3", "ping")), answers


def test_random_text(lease_and_admin):
    lease, user = lease_and_admin

    @budget(EXAMPLES["random"])
    @given(tool=st.sampled_from(sorted(TOOLS)), raw=random_text())
    def check(tool, raw):  # type: ignore[no-untyped-def]
        outcome(lease, user, tool, raw)

    check()


def test_mutated_real_outputs(lease_and_admin):
    lease, user = lease_and_admin

    @budget(EXAMPLES["mutated"])
    @given(seed=st.sampled_from(SEEDS), data=st.data())
    def check(seed, data):  # type: ignore[no-untyped-def]
        tool, text = seed
        outcome(lease, user, tool, mutated(data, text).decode("utf-8", errors="replace"))

    check()


def test_absurd_figures_in_real_outputs(lease_and_admin):
    lease, user = lease_and_admin

    @budget(EXAMPLES["absurd"])
    @given(seed=st.sampled_from(SEEDS), data=st.data())
    def check(seed, data):  # type: ignore[no-untyped-def]
        tool, text = seed
        outcome(lease, user, tool, with_absurd_figures(data, text))

    check()


def test_a_figure_no_row_can_hold_is_refused_not_stored(lease_and_admin):
    lease, user = lease_and_admin
    raw = (FIXTURES / "iperf3" / "tcp_3.14_macos.json").read_text()
    answer = outcome(lease, user, "iperf3", raw.replace("204737447.4407", "1e300"))
    assert answer.startswith("Unparsable iperf3 output: iperf3 received rate (1e+300) is too large")
    assert not lease.evidence.exists()


def test_nul_bytes_are_refused_before_parsing_with_the_reason(lease_and_admin):
    lease, user = lease_and_admin
    raw = (FIXTURES / "iperf3" / "tcp_3.14_macos.json").read_text()
    nul = "The text contains NUL bytes (\\0): no tool prints them and the database cannot keep"
    assert outcome(lease, user, "iperf3", raw + "\x00").startswith(nul)
    assert outcome(lease, user, "iperf3", raw, note="fine\x00").startswith(nul)
    assert outcome(lease, user, "ping", "\x00" * 10).startswith(nul)
    assert not lease.evidence.exists()


def test_text_that_is_not_utf8_is_refused(lease_and_admin):
    lease, user = lease_and_admin
    raw = (FIXTURES / "ping" / "iputils_20221126_loopback.txt").read_text()
    assert outcome(lease, user, "ping", raw + "\udcff") == "The text is not valid UTF-8."
    assert outcome(lease, user, "ping", raw) == "stored"


def test_the_size_limit_is_in_bytes(lease_and_admin):
    lease, user = lease_and_admin
    raw = (FIXTURES / "iperf3" / "tcp_3.14_macos.json").read_text()
    limit = evidence.EVIDENCE_MAX_BYTES
    # padded with blank lines to exactly the limit: stored, and the padding is kept
    exact = raw + "\n" * (limit - len(raw.encode()))
    assert outcome(lease, user, "iperf3", exact) == "stored"
    # one three-byte character over: refused by size, not by a database error
    assert outcome(lease, user, "iperf3", exact[:-1] + "速") == (
        f"The raw output is over {limit} bytes."
    )
    huge = "{" * (limit // 2)
    assert outcome(lease, user, "iperf3", huge).startswith("Unparsable iperf3 output:")
