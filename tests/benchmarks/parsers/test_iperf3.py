"""iperf3 in all three output forms. Figures are the ones printed in the fixture; a text
rate is exact to the digits iperf3 printed ("22.2 Gbits/sec" is 22_200_000_000)."""

import pytest

from gpulease_verify.parsers import ParseError, RunFailed, parse, to_dict
from gpulease_verify.parsers.iperf3 import parse_iperf3

from . import fixture_text


def parsed(name):  # type: ignore[no-untyped-def]
    return parse_iperf3(fixture_text("iperf3", name))


# --- JSON (-J) -------------------------------------------------------------------------


def test_tcp_3_14_uses_sum_received_as_the_figure():
    result = parsed("tcp_3.14_macos.json")
    assert (result.protocol, result.streams, result.reverse, result.role) == (
        "tcp",
        1,
        False,
        "client",
    )
    assert result.duration_s == 10.000371
    # end.sum_received.bits_per_second, already bits/s
    assert result.received_bps == 204737447.4407
    assert result.sent_bps == 204765977.5822317
    # macOS has no TCP_INFO retransmit count: not reported, not zero
    assert result.retransmits is None
    assert (result.jitter_ms, result.lost_percent) == (None, None)


def test_parallel_streams_report_the_sum_not_one_stream():
    result = parsed("tcp_3.12_P4_loopback.json")
    assert result.streams == 4
    # end.sum_received: 2154299392 bytes in 2.003206 s; one stream alone is about a quarter
    assert result.received_bps == 8603406307.688774
    assert result.sent_bps == 8615758736.29104
    assert result.retransmits == 45


def test_reverse_mode_reads_what_the_client_received():
    result = parsed("tcp_3.12_reverse_loopback.json")
    assert result.reverse is True
    assert result.received_bps == 5895452865.89159
    # the server sent and its retransmits travel back in the results exchange
    assert (result.sent_bps, result.retransmits) == (5887302341.3101, 11)


def test_bidir_keeps_both_directions_apart():
    result = parsed("tcp_3.12_bidir_loopback.json")
    assert result.bidir is True
    # client to server (end.sum_received) and server to client (sum_received_bidir_reverse)
    assert result.received_bps == 3483543868.909383
    assert result.reverse_received_bps == 3546050880.680897
    assert result.reverse_sent_bps == 3565299336.6492553


def test_bidir_before_3_11_repeated_keys_are_read_as_the_reverse_direction():
    old = parsed("derived_bidir_3.10_duplicate_keys.json")
    new = parsed("tcp_3.12_bidir_loopback.json")
    # a plain JSON reader keeps the second "sum_received" and reports 3546050880 as forward
    assert old.received_bps == new.received_bps == 3483543868.909383
    assert old.reverse_received_bps == new.reverse_received_bps == 3546050880.680897


def test_server_side_json_agrees_with_the_client_and_leaves_its_unmeasured_side_empty():
    client = parsed("tcp_3.12_P4_loopback.json")
    server = parsed("server_tcp_3.12_P4_loopback.json")
    assert server.role == "server"
    assert server.received_bps == client.received_bps == 8603406307.688774
    # the server writes sum_sent as 0 bytes: not measured there, not a zero rate
    assert server.sent_bps is None


def test_server_side_of_a_reverse_test_has_no_received_rate():
    with pytest.raises(ParseError, match="0 bytes although 1479802880 were sent"):
        parsed("server_tcp_3.12_reverse_loopback.json")


def test_server_side_of_bidir_measured_what_it_received_and_sent():
    server = parsed("server_tcp_3.12_bidir_loopback.json")
    assert server.received_bps == 3483543868.909383
    assert server.reverse_sent_bps == 3562536979.6174946
    assert server.reverse_received_bps is None


def test_udp_3_12_has_both_sides_and_the_receivers_loss():
    result = parsed("udp_3.12_loopback.json")
    assert result.protocol == "udp"
    assert (result.sent_bps, result.received_bps) == (99866877.3122688, 99700493.82642107)
    assert (result.jitter_ms, result.lost_percent) == (0.00842642177850472, 0.0)
    server = parsed("server_udp_3.12_loopback.json")
    assert (server.sent_bps, server.received_bps) == (None, 99700493.82642107)


def test_udp_reverse_3_14_reads_sum_sent_and_sum_received():
    result = parsed("udp_reverse_3.14_macos.json")
    assert (result.protocol, result.reverse) == ("udp", True)
    assert result.sent_bps == 32305625.765055776
    assert result.received_bps == 32034981.770479407
    assert result.jitter_ms == 0.068292653230841
    assert result.lost_percent == 0.0032872029190361921
    assert result.duration_s == 11.000015


def test_udp_3_1_has_no_received_rate():
    result = parsed("udp_3.1.3_blocks.json")
    # before 3.10 end.sum.bits_per_second is the sending side only
    assert result.sent_bps == 834711189.017002
    assert result.received_bps is None
    assert (result.jitter_ms, result.lost_percent, result.duration_s) == (0.092, 0.690276, 0.785134)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("error_no_route_3.0.11.json", "error - unable to connect to server: No route to host"),
        ("error_3.12_connection_refused.json", "unable to connect to server: Connection refused"),
        (
            "derived_error_connection_refused.json",
            "unable to connect to server: Connection refused",
        ),
        (
            "text_error_3.12_connection_refused.txt",
            "unable to connect to server: Connection refused",
        ),
    ],
)
def test_a_failed_run_is_run_failed_with_iperf3s_message(name, message):
    with pytest.raises(RunFailed) as error:
        parsed(name)
    assert str(error.value) == f"iperf3 reported an error: {message}"


def test_tcp_receiver_zero_bytes_is_not_a_zero_rate():
    with pytest.raises(ParseError, match="0 bytes although 56320 were sent"):
        parsed("tcp_3.9_receiver_zero.json")


def test_truncated_json_is_rejected():
    with pytest.raises(ParseError, match="truncated or invalid"):
        parsed("tcp_3.9_stored_truncated.json")


def test_minus_nan_is_rejected():
    with pytest.raises(ParseError, match="truncated or invalid"):
        parsed("derived_udp_minus_nan.json")


def test_nan_constant_is_rejected():
    text = fixture_text("iperf3", "udp_3.1.3_blocks.json").replace("0.690276", "NaN")
    with pytest.raises(ParseError, match="NaN"):
        parse_iperf3(text)


def test_two_json_documents_are_two_runs():
    text = fixture_text("iperf3", "tcp_3.14_macos.json")
    with pytest.raises(ParseError, match="more than one iperf3 JSON document"):
        parse_iperf3(text + text)


def test_a_rate_beyond_a_bigint_column_is_refused():
    text = fixture_text("iperf3", "tcp_3.14_macos.json").replace("204737447.4407", "1e300")
    with pytest.raises(ParseError, match="too large to be a real measurement"):
        parse_iperf3(text)


# --- --json-stream (3.17+) -----------------------------------------------------------------


def test_json_stream_gives_the_same_result_as_the_document():
    stream = parsed("derived_json_stream_from_tcp_3.12_P4.jsonl")
    document = parsed("tcp_3.12_P4_loopback.json")
    assert stream.output == "json-stream"
    assert to_dict(stream) | {"output": "json"} == to_dict(document)


def test_json_stream_without_an_end_event_did_not_finish():
    with pytest.raises(ParseError, match="no 'end' event"):
        parsed("json_stream_interval_only_omnt.jsonl")


# --- text ----------------------------------------------------------------------------------


def test_text_client_reads_the_receiver_line():
    result = parsed("text_tcp_client_moler.txt")
    assert (result.output, result.role, result.reverse) == ("text", "client", False)
    # "29.1 GBytes  24.9 Gbits/sec  receiver" and "25.0 Gbits/sec    0  sender"
    assert (result.received_bps, result.sent_bps) == (24_900_000_000, 25_000_000_000)
    assert (result.retransmits, result.duration_s) == (0, 10.05)


def test_text_parallel_run_reads_the_sum_lines():
    result = parsed("text_tcp_P3_client_moler.txt")
    assert result.streams == 3
    # [SUM] receiver 22.2 Gbits/sec, not one stream's 7.41 Gbits/sec
    assert (result.received_bps, result.sent_bps) == (22_200_000_000, 22_300_000_000)


def test_text_server_in_kbits_reports_only_what_it_received():
    result = parsed("text_tcp_P3_server_moler.txt")
    assert (result.role, result.streams) == ("server", 3)
    # "-f k": [SUM] 41720300 Kbits/sec receiver
    assert result.received_bps == 41_720_300_000
    assert result.sent_bps is None


def test_text_udp_client_and_server():
    client = parsed("text_udp_client_moler.txt")
    assert client.protocol == "udp"
    # 5020 Kbits/sec sent, 4984 Kbits/sec received, jitter 0.046 ms, 0/171 lost
    assert (client.sent_bps, client.received_bps) == (5_020_000, 4_984_000)
    assert (client.jitter_ms, client.lost_percent) == (0.046, 0.0)
    server = parsed("text_udp_server_moler.txt")
    assert (server.role, server.received_bps, server.jitter_ms) == ("server", 1_050_000, 0.022)
    parallel = parsed("text_udp_P2_client_moler.txt")
    assert (parallel.streams, parallel.received_bps, parallel.jitter_ms) == (2, 2_084_000, 0.018)


def test_text_bidir_splits_tx_c_and_rx_c():
    result = parsed("text_tcp_bidir_P4_3.9_wsl.txt")
    assert (result.bidir, result.streams, result.retransmits) == (True, 4, 1)
    # [SUM][TX-C] receiver 52.8 Gbits/sec; [SUM][RX-C] receiver 20.8, sender 22.0
    assert (result.sent_bps, result.received_bps) == (55_900_000_000, 52_800_000_000)
    assert (result.reverse_sent_bps, result.reverse_received_bps) == (
        22_000_000_000,
        20_800_000_000,
    )


def test_text_reverse_verbose_run():
    result = parsed("text_tcp_reverse_verbose_3.9_wsl.txt")
    assert result.reverse is True
    # the client received 97.3 Gbits/sec; the server sent 92.8 with 840 retransmits
    assert (result.received_bps, result.sent_bps, result.retransmits) == (
        97_300_000_000,
        92_800_000_000,
        840,
    )


def test_text_udp_3_0_untagged_line_is_the_senders_rate_with_the_receivers_loss():
    result = parsed("text_udp_3.0_untagged_issue252.txt")
    assert (result.protocol, result.sent_bps, result.received_bps) == ("udp", 504_000, None)
    assert (result.jitter_ms, result.lost_percent, result.duration_s) == (0.079, 0.0, 13.0)


def test_text_with_two_runs_is_refused():
    with pytest.raises(ParseError, match="holds 2 iperf3 summaries"):
        parsed("text_two_runs_bandwitch.txt")


def test_text_loss_is_counted_not_read_from_the_rounded_percentage():
    # A hand-written summary in iperf_locale.c's format: "%.2g%%" prints 100 % as 1e+02.
    text = (
        "- - - - - - - - - - - - - - - - - - - - - - - - -\n"
        "[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams\n"
        "[  5]   0.00-10.00  sec  1.25 MBytes  1.05 Mbits/sec  0.000 ms  0/906 (0%)  sender\n"
        "[  5]   0.00-10.04  sec  1.25 MBytes  1.04 Mbits/sec  0.034 ms  906/906 (1e+02%)"
        "  receiver\n"
    )
    assert parse_iperf3(text).lost_percent == 100.0


def test_text_rates_in_bytes_use_binary_prefixes():
    # "-f M": 1 MByte is 2^20 bytes (src/units.c), so 117 MBytes/sec is 981467136 bits/s.
    text = (
        "- - - - - - - - - - - - - - - - - - - - - - - - -\n"
        "[ ID] Interval           Transfer     Bitrate         Retr\n"
        "[  5]   0.00-10.00  sec  1170 MBytes   117 MBytes/sec    0             sender\n"
        "[  5]   0.00-10.04  sec  1169 MBytes   116 MBytes/sec                  receiver\n"
    )
    assert parse_iperf3(text).received_bps == 116 * 2**20 * 8


def test_text_without_a_summary_did_not_finish():
    head = fixture_text("iperf3", "text_tcp_client_moler.txt").split("- - - -")[0]
    with pytest.raises(ParseError, match="no iperf3 summary"):
        parse_iperf3(head)


# --- shared --------------------------------------------------------------------------------


@pytest.mark.parametrize("garbage", ["", "hello", "[1, 2]", '{"start": {}}', "{" * 3, "\x00{}"])
def test_garbage_raises_parse_error(garbage):
    with pytest.raises(ParseError):
        parse_iperf3(garbage)


def test_to_dict_has_the_agreed_keys():
    result = parse("iperf3", fixture_text("iperf3", "tcp_3.14_macos.json"))
    assert set(to_dict(result)) == {
        "protocol",
        "streams",
        "reverse",
        "bidir",
        "role",
        "output",
        "duration_s",
        "sent_bps",
        "received_bps",
        "retransmits",
        "jitter_ms",
        "lost_percent",
        "reverse_sent_bps",
        "reverse_received_bps",
    }


def test_text_with_timestamps_reads_like_without():
    # --timestamps puts the time ("%c ") before every line; here before each line of a real run
    plain = fixture_text("iperf3", "text_tcp_P3_client_moler.txt")
    stamped = "".join(f"Mon Mar 10 18:47:06 2025 {line}" for line in plain.splitlines(True))
    assert parse_iperf3(stamped) == parse_iperf3(plain)
