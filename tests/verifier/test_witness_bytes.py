"""The throughput witness by bytes (v2): the switch's octets against the bytes the tool
says its client sent, its omitted first second included, whatever the rate did within
the run. Figures by hand: a 1+3-second run whose first (omitted) second carried more than
the three it reports, as concurrent flows do while they settle their shares."""

from decimal import Decimal

from gpulease_verify import witness
from gpulease_verify.verdicts import Judgement, Verdict

PASSED = Judgement(Verdict.FAIL, "throughput >= 95% of 1 Gbps contracted (terms v1)", "short")
# The switch port counted 2,000,000,000 octets over the 4 seconds (4 Gbit/s on average);
# the tool's figure leaves the first second out: 1,275,000,000 bytes in 3 s = 3.4 Gbit/s.
SWITCH = {"in_octets_before": 10_000, "in_octets_after": 10_000 + 2_000_000_000}
MEASURED = 3_400_000_000


def block(host_bytes: int | None):  # type: ignore[no-untyped-def]
    return witness.throughput_block(
        switch="leaf1",
        port="h1-data",
        in_octets_before=SWITCH["in_octets_before"],
        in_octets_after=SWITCH["in_octets_after"],
        seconds=4,
        measured_bps=MEASURED,
        tolerance_percent=Decimal("10"),
        host_bytes=host_bytes,
    )


def test_a_run_whose_first_second_carried_more_agrees_by_bytes_not_by_rates():
    by_rates = block(None)  # v1: 4.0 Gbit/s at the switch against 3.4 reported, 15 % apart
    assert "host_bytes" not in by_rates and by_rates["agrees"] is False
    by_bytes = block(2_000_000_000)  # v2: the same 2,000,000,000 bytes on both sides
    assert by_bytes["host_bytes"] == 2_000_000_000 and by_bytes["agrees"] is True
    judged = witness.judge(PASSED, {witness.KEY: by_bytes}, MEASURED)
    assert judged == PASSED


def test_a_node_that_reports_half_of_what_it_sent_is_disputed_by_bytes():
    forged = block(1_000_000_000)
    assert forged["agrees"] is False
    judged = witness.judge(PASSED, {witness.KEY: forged}, MEASURED)
    assert judged.verdict == Verdict.NONE
    assert judged.rule == "witness_disagreement v2"
    assert judged.reason == (
        "disputed: the node reported sending 1,000,000,000 bytes (3.4 Gbit/s), its switch "
        "port leaf1 h1-data counted 2,000,000,000 (tolerance 10%); neither pass nor credit "
        "until resolved"
    )


def test_a_switch_that_restarted_counts_nothing_and_disputes_a_v2_block():
    restarted = witness.throughput_block(
        switch="leaf1",
        port="h1-data",
        in_octets_before=5_000_000_000,
        in_octets_after=1_000,
        seconds=4,
        measured_bps=MEASURED,
        tolerance_percent=Decimal("10"),
        host_bytes=2_000_000_000,
    )
    assert restarted["agrees"] is False
