import pytest

from gpulease_verify.parsers import ParseError, parse_ping
from tests.benchmarks.parsers import fixture_text as fixture


def test_iputils_loopback_capture_in_microseconds():
    result = parse_ping(fixture("ping", "iputils_20221126_loopback.txt"))
    # rtt min/avg/max/mdev = 0.020/0.071/0.230/0.079 ms
    assert (result.transmitted, result.received, result.lost_percent) == (5, 5, 0.0)
    assert (result.rtt_min_us, result.rtt_avg_us, result.rtt_max_us, result.rtt_mdev_us) == (
        20.0,
        71.0,
        230.0,
        79.0,
    )


def test_interrupted_iputils_run_from_an_issue():
    result = parse_ping(fixture("ping", "iputils_centos_cisco_don_14.txt"))
    assert result.rtt_avg_us == 207.0
    assert result.rtt_mdev_us == 10.0


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("bsd_mininet_168.txt", "no round-trip measured"),
        ("derived_total_loss.txt", "20 sent, 0 received"),
    ],
)
def test_no_round_trip_is_not_a_zero(name, reason):
    with pytest.raises(ParseError, match=reason):
        parse_ping(fixture("ping", name))


def test_garbage_is_refused_with_its_first_line():
    with pytest.raises(ParseError, match="no ping statistics in the output: ping: unknown host"):
        parse_ping("ping: unknown host gpu-01\n")


def test_busybox_has_no_deviation():
    result = parse_ping(fixture("ping", "busybox_docker_alpine.txt"))
    # round-trip min/avg/max = 0.088/0.106/0.122 ms
    assert (result.rtt_min_us, result.rtt_avg_us, result.rtt_max_us) == (88.0, 106.0, 122.0)
    assert result.rtt_mdev_us is None


@pytest.mark.parametrize("rtt", ["9" * 400 + "/1/1/1", "1..2/1/1/1", "1/1/1/1/1"])
def test_an_absurd_round_trip_is_refused(rtt):
    text = fixture("ping", "iputils_20221126_loopback.txt").replace("0.020/0.071/0.230/0.079", rtt)
    with pytest.raises(ParseError):
        parse_ping(text)
