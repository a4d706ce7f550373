from decimal import Decimal

from gpulease_verify import verdicts

TERMS = verdicts.TermsView(
    version=2,
    contracted_gbps=Decimal("100"),
    threshold_percent=Decimal("95"),
    busbw_floor_gbps=Decimal("90"),
    latency_ceiling_us=Decimal("5"),
)


def test_throughput_at_the_threshold_passes_and_below_fails_with_the_figure():
    # 95% of 100 Gbps = 95 Gbit/s exactly.
    at = verdicts.throughput(measured_bps=95_000_000_000, terms=TERMS)
    assert at.verdict == "pass"
    assert at.rule == "throughput >= 95% of 100 Gbps contracted (terms v2)"
    below = verdicts.throughput(measured_bps=38_250_000_000, terms=TERMS)
    assert below.verdict == "fail"
    assert below.reason == "measured 38.3 Gbit/s (38.3% of contracted), below 95 Gbit/s"


def test_link_flap_and_slow_port_are_named():
    ports = [
        verdicts.PortState("ens1f0", True, 100e9, 100e9, 3, 1),
        verdicts.PortState("ens2f0", True, 25e9, 100e9, 0, 0),
    ]
    judged = verdicts.link(ports=ports, terms=TERMS)
    assert judged.verdict == "fail"
    assert judged.reason == (
        "ens1f0 went down 2 time(s) since the last check; "
        "ens2f0 runs at 25 Gbit/s, below its 100 Gbit/s"
    )
    healthy = [verdicts.PortState("ens1f0", True, 100e9, 100e9, 3, 3)]
    assert verdicts.link(ports=healthy, terms=TERMS).verdict == "pass"


def test_latency_and_collective_without_a_contracted_figure_give_no_verdict():
    loose = verdicts.TermsView(1, Decimal("100"), Decimal("95"), None, None)
    assert verdicts.latency(measured_us=3.2, terms=loose).verdict == "none"
    assert verdicts.collective(busbw_bps=1e9, terms=loose).verdict == "none"
    assert verdicts.latency(measured_us=5.0, terms=TERMS).verdict == "pass"
    assert verdicts.latency(measured_us=5.1, terms=TERMS).verdict == "fail"
    # 90 Gbps floor: 11.25 GB/s busbw = 90 Gbit/s passes.
    assert verdicts.collective(busbw_bps=90e9, terms=TERMS).verdict == "pass"
    assert verdicts.collective(busbw_bps=89.9e9, terms=TERMS).verdict == "fail"
