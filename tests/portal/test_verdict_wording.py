"""A measurement's verdict in the page's language: worded again from the stored figures, in
English exactly the verifier's own rule and reason (for every kind of verdict and a grid of
figures around each threshold), in Chinese with the same figures."""

from decimal import Decimal

import pytest
from django.utils import translation

from billing.models import Evidence, EvidenceTool
from gpulease_verify import verdicts
from leases.models import LeaseTerms
from portal.verdict_wording import wording


def _terms(**fields) -> LeaseTerms:  # type: ignore[no-untyped-def]
    values = {
        "version": 3,
        "contracted_bandwidth_gbps": Decimal("100"),
        "sla_threshold_percent": Decimal("95"),
        "collective_busbw_floor_gbps": Decimal("180"),
        "latency_ceiling_us": Decimal("5.5"),
    }
    values.update(fields)
    return LeaseTerms(**values)


def _view(terms: LeaseTerms) -> verdicts.TermsView:
    return verdicts.TermsView(
        version=terms.version,
        contracted_gbps=terms.contracted_bandwidth_gbps,
        threshold_percent=terms.sla_threshold_percent,
        busbw_floor_gbps=terms.collective_busbw_floor_gbps,
        latency_ceiling_us=terms.latency_ceiling_us,
    )


def _evidence(tool: str, terms: LeaseTerms, judgement: verdicts.Judgement, **figures) -> Evidence:  # type: ignore[no-untyped-def]
    evidence = Evidence(
        tool=tool,
        verdict=judgement.verdict,
        rule=judgement.rule,
        verdict_reason=judgement.reason,
        **figures,
    )
    evidence.terms = terms
    return evidence


THROUGHPUTS = [0, 204_737_447, 94_999_999_999, 95_000_000_000, 95_000_000_001, 99_950_000_000]
TERMS = [
    _terms(),
    _terms(contracted_bandwidth_gbps=Decimal("0.2"), sla_threshold_percent=Decimal("97.5")),
    _terms(collective_busbw_floor_gbps=None, latency_ceiling_us=None, version=1),
]


@pytest.mark.parametrize("terms", TERMS)
@pytest.mark.parametrize("tool", [EvidenceTool.IPERF3, EvidenceTool.PERFTEST])
def test_throughput_in_english_is_the_verifiers_own_words(terms, tool):
    for measured in THROUGHPUTS:
        judged = verdicts.throughput(measured_bps=measured, terms=_view(terms))
        with translation.override("en"):
            said = wording(_evidence(tool, terms, judged, measured_bps=measured))
        assert (said.rule, said.reason) == (judged.rule, judged.reason)


@pytest.mark.parametrize("terms", TERMS)
def test_latency_and_collective_in_english_are_the_verifiers_own_words(terms):
    for measured_us in (1.04, 5.5, 5.56, 120.0):
        judged = verdicts.latency(measured_us=measured_us, terms=_view(terms))
        evidence = _evidence(EvidenceTool.PING, terms, judged, latency_us=measured_us)
        with translation.override("en"):
            said = wording(evidence)
        assert (said.rule, said.reason) == (judged.rule, judged.reason)
    for busbw in (0.0, 179_999_999_999.5, 180_000_000_000, 361_234_567_890):
        judged = verdicts.collective(busbw_bps=busbw, terms=_view(terms))
        parsed = {"avg_busbw_bps": busbw, "peak_busbw_bps": busbw * 1.1}
        evidence = _evidence(
            EvidenceTool.NCCL_TESTS, terms, judged, measured_bps=int(busbw), parsed=parsed
        )
        with translation.override("en"):
            said = wording(evidence)
        assert (said.rule, said.reason) == (judged.rule, judged.reason)


def test_chinese_words_carry_the_same_figures():
    terms = _terms()
    judged = verdicts.throughput(measured_bps=204_737_447, terms=_view(terms))
    with translation.override("zh-hans"):
        said = wording(_evidence(EvidenceTool.IPERF3, terms, judged, measured_bps=204_737_447))
    # 204.7 Mbit/s is 0.2 % of 100 Gbit/s, under 95 % of it (95 Gbit/s).
    assert said.reason == "实测 204.7 Mbit/s（合同带宽的 0.2%），低于 95 Gbit/s"  # noqa: RUF001
    assert said.rule == "吞吐量 >= 合同 100 Gbps 的 95%（条款第 3 版）"  # noqa: RUF001
    judged = verdicts.collective(busbw_bps=180_000_000_000, terms=_view(terms))
    evidence = _evidence(
        EvidenceTool.NCCL_TESTS,
        terms,
        judged,
        parsed={"avg_busbw_bps": None, "peak_busbw_bps": 180_000_000_000},
    )
    with translation.override("zh-hans"):
        assert wording(evidence).reason == "总线带宽 180 Gbit/s，不低于 180 Gbit/s"  # noqa: RUF001
