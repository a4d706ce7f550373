import pytest

from benchmarks.parsers import ParseError, parse, to_dict
from benchmarks.parsers.iperf3 import parse_iperf3

from . import fixture_text


def test_tcp_3_14_uses_sum_received_as_the_figure():
    result = parse_iperf3(fixture_text("iperf3", "tcp_3.14_macos.json"))
    assert result.protocol == "tcp"
    assert result.streams == 1
    assert result.reverse is False
    assert result.duration_s == 10.000371
    # end.sum_received.bits_per_second, already bits/s
    assert result.received_bps == 204737447.4407
    assert result.sent_bps == 204765977.5822317
    # macOS has no TCP_INFO retransmit count: not reported, not zero
    assert result.retransmits is None
    assert result.jitter_ms is None
    assert result.lost_percent is None


def test_udp_reverse_3_14_reads_sum_sent_and_sum_received():
    result = parse_iperf3(fixture_text("iperf3", "udp_reverse_3.14_macos.json"))
    assert result.protocol == "udp"
    assert result.reverse is True
    assert result.sent_bps == 32305625.765055776
    assert result.received_bps == 32034981.770479407
    assert result.jitter_ms == 0.068292653230841
    assert result.lost_percent == 0.0032872029190361921
    assert result.duration_s == 11.000015
    assert result.retransmits is None


def test_udp_3_1_has_no_received_rate():
    result = parse_iperf3(fixture_text("iperf3", "udp_3.1.3_blocks.json"))
    assert result.protocol == "udp"
    # before 3.10 end.sum.bits_per_second is the sending side only
    assert result.sent_bps == 834711189.017002
    assert result.received_bps is None
    assert result.jitter_ms == 0.092
    assert result.lost_percent == 0.690276
    assert result.duration_s == 0.785134


def test_error_json_reports_iperf3_message():
    with pytest.raises(ParseError) as error:
        parse_iperf3(fixture_text("iperf3", "error_no_route_3.0.11.json"))
    assert str(error.value) == (
        "iperf3 reported an error: error - unable to connect to server: No route to host"
    )


def test_connection_refused_message_is_passed_through():
    with pytest.raises(ParseError) as error:
        parse("iperf3", fixture_text("iperf3", "derived_error_connection_refused.json"))
    assert str(error.value) == (
        "iperf3 reported an error: unable to connect to server: Connection refused"
    )


def test_tcp_receiver_zero_bytes_is_not_a_zero_rate():
    with pytest.raises(ParseError, match="0 bytes although 56320 were sent"):
        parse_iperf3(fixture_text("iperf3", "tcp_3.9_receiver_zero.json"))


def test_truncated_json_is_rejected():
    with pytest.raises(ParseError, match="truncated or invalid"):
        parse_iperf3(fixture_text("iperf3", "tcp_3.9_stored_truncated.json"))


def test_minus_nan_is_rejected():
    with pytest.raises(ParseError, match="truncated or invalid"):
        parse_iperf3(fixture_text("iperf3", "derived_udp_minus_nan.json"))


def test_nan_constant_is_rejected():
    text = fixture_text("iperf3", "udp_3.1.3_blocks.json").replace("0.690276", "NaN")
    with pytest.raises(ParseError, match="NaN"):
        parse_iperf3(text)


@pytest.mark.parametrize("garbage", ["", "hello", "[1, 2]", '{"start": {}}', "{" * 3])
def test_garbage_raises_parse_error(garbage):
    with pytest.raises(ParseError):
        parse_iperf3(garbage)


def test_to_dict_has_the_agreed_keys():
    result = parse("iperf3", fixture_text("iperf3", "tcp_3.14_macos.json"))
    assert set(to_dict(result)) == {
        "protocol",
        "streams",
        "reverse",
        "duration_s",
        "sent_bps",
        "received_bps",
        "retransmits",
        "jitter_ms",
        "lost_percent",
    }
