import pytest

from gpulease_verify.parsers import ParseError, to_dict
from gpulease_verify.parsers.perftest import parse_perftest

from . import fixture_text

# perftest divides by 0x100000 for "MB/sec" and "MiB/sec": 1 MiB/s = 2^20 * 8 = 8388608 bits/s.
MIB_PER_SECOND = 8388608


def test_write_bw_report_gbits():
    result = parse_perftest(fixture_text("perftest", "write_bw_gbits_cx7_ndr.txt"))
    assert result.test == "ib_write_bw"
    assert result.kind == "bw"
    assert result.msg_size_bytes == 65536
    assert result.iterations == 5000
    # 392.34 Gb/sec * 10^9
    assert result.bw_avg_bps == 392_340_000_000
    assert result.bw_peak_bps == 392_380_000_000
    assert result.msg_rate_mpps == 0.748336


def test_read_bw_report_gbits():
    result = parse_perftest(fixture_text("perftest", "read_bw_gbits_cx7_ndr.txt"))
    assert result.test == "ib_read_bw"
    # 328.61 Gb/sec * 10^9
    assert result.bw_avg_bps == 328_610_000_000


def test_send_bw_mib_per_second_is_two_to_the_twenty_bytes():
    result = parse_perftest(fixture_text("perftest", "send_bw_mib_cx7_ndr.txt"))
    assert result.test == "ib_send_bw"
    # 46557.03 MiB/s * 8388608 = 390548674314.24 bits/s (~390.5 Gb/s on a 400G NDR port,
    # in line with the 392.34 Gb/sec ib_write_bw of the same pair)
    assert result.bw_avg_bps == pytest.approx(390_548_674_314.24, abs=0.01)
    assert result.bw_avg_bps == pytest.approx(46557.03 * MIB_PER_SECOND)
    assert result.bw_peak_bps == pytest.approx(46567.34 * MIB_PER_SECOND)


def test_all_sizes_reports_largest_size_and_every_row():
    result = parse_perftest(fixture_text("perftest", "send_bw_all_sizes_efa_srd.txt"))
    assert len(result.rows) == 13
    assert [row.msg_size_bytes for row in result.rows][:3] == [2, 4, 8]
    assert result.msg_size_bytes == 8192
    # 8909.75 MiB/s * 8388608 = 74740400128 bits/s exactly
    assert result.bw_avg_bps == 74_740_400_128
    assert result.bw_peak_bps == pytest.approx(10987.64 * MIB_PER_SECOND)
    assert result.rows[0].bw_avg_bps == pytest.approx(1.09 * MIB_PER_SECOND)
    assert result.rows[0].msg_rate_mpps == 0.570447


def test_latency_with_percentiles():
    result = parse_perftest(fixture_text("perftest", "send_lat_cx7_ndr.txt"))
    assert result.test == "ib_send_lat"
    assert result.kind == "lat"
    assert (result.msg_size_bytes, result.iterations) == (2, 1000)
    assert result.t_min_us == 1.24
    assert result.t_max_us == 5.19
    assert result.t_typical_us == 1.27
    assert result.t_avg_us == 1.27
    assert result.t_stdev_us == 0.0
    assert result.p99_us == 1.37
    assert result.p999_us == 5.19


def test_latency_all_sizes():
    result = parse_perftest(fixture_text("perftest", "send_lat_all_sizes_efa_srd.txt"))
    assert len(result.rows) == 13
    assert result.msg_size_bytes == 8192
    assert result.t_typical_us == 19.51
    assert result.rows[0].t_max_us == 1210.34


def test_duration_mode_peak_is_not_measured():
    result = parse_perftest(fixture_text("perftest", "write_post_list_duration_gbits.txt"))
    assert result.test == "ib_write_bw"
    assert result.iterations == 224958464
    assert result.bw_peak_bps is None  # printed 0.00: perftest did not measure it
    assert result.bw_avg_bps == 480_000_000  # 0.48 Gb/sec


def test_server_side_table_without_banner():
    result = parse_perftest(fixture_text("perftest", "send_bw_mb_server_side_table.txt"))
    assert result.test is None
    assert result.bw_peak_bps is None
    # 920.13 MB/sec * 8388608 = 7718609879.04 bits/s
    assert result.bw_avg_bps == pytest.approx(7_718_609_879.04, abs=0.01)


def test_latency_duration_format():
    text = (
        "                    RDMA_Write Latency Test\n"
        " #bytes        #iterations       t_avg[usec]    tps average\n"
        " 2             1235921            2.02           494357.70\n"
    )
    result = parse_perftest(text)
    assert result.test == "ib_write_lat"
    assert result.t_avg_us == 2.02
    assert result.t_min_us is None
    assert result.p99_us is None


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("derived_negative_average.txt", "negative"),
        ("derived_latency_in_cycles.txt", "not usec"),
        ("derived_garbled_row.txt", "3 values for 5 columns"),
        ("derived_connection_refused.txt", "Couldn't connect to 10.0.0.2:18515"),
    ],
)
def test_unusable_outputs(name, reason):
    with pytest.raises(ParseError, match=reason):
        parse_perftest(fixture_text("perftest", name))


@pytest.mark.parametrize("garbage", ["", "#bytes #iterations", "\x00\x01", "random text"])
def test_garbage(garbage):
    with pytest.raises(ParseError):
        parse_perftest(garbage)


def test_rows_serialise_as_lists():
    result = to_dict(parse_perftest(fixture_text("perftest", "send_lat_cx7_ndr.txt")))
    assert isinstance(result["rows"], list)
    assert set(result["rows"][0]) == {
        "msg_size_bytes",
        "iterations",
        "t_min_us",
        "t_max_us",
        "t_typical_us",
        "t_avg_us",
        "t_stdev_us",
        "p99_us",
        "p999_us",
    }


# Tools, layouts and modes across perftest's history (see fixtures/SOURCES.md).


def test_write_latency_all_sizes_with_percentiles():
    result = parse_perftest(fixture_text("perftest", "write_lat_all_sizes_mlx4_qdr.txt"))
    assert result.test == "ib_write_lat"
    assert len(result.rows) == 23
    assert [row.msg_size_bytes for row in result.rows][:3] == [2, 4, 8]
    assert (result.msg_size_bytes, result.iterations) == (8388608, 20000)
    assert result.t_typical_us == 2302.01
    assert result.t_avg_us == 2304.98
    assert result.t_stdev_us == 6.43
    assert result.p99_us == 2327.01
    assert result.p999_us == 2335.48
    assert result.rows[0].t_min_us == 0.88
    assert result.rows[0].p999_us == 5.42


def test_atomic_bandwidth_with_a_cpu_frequency_notice_inside_the_table():
    result = parse_perftest(fixture_text("perftest", "atomic_bw_mlx4_cpu_frequency_notice.txt"))
    assert result.test == "ib_atomic_bw"
    assert (result.msg_size_bytes, result.iterations) == (8, 20000)
    # 18.67 MB/sec * 8388608 = 156615311.36 bits/s
    assert result.bw_avg_bps == pytest.approx(156_615_311.36, abs=0.01)
    assert result.bw_peak_bps == pytest.approx(18.79 * MIB_PER_SECOND)
    assert result.msg_rate_mpps == 2.446776


def test_atomic_latency():
    result = parse_perftest(fixture_text("perftest", "atomic_lat_mlx4.txt"))
    assert result.test == "ib_atomic_lat"
    assert result.kind == "lat"
    assert (result.msg_size_bytes, result.iterations) == (8, 20000)
    assert result.t_typical_us == 2.34
    assert result.p999_us == 10.2


def test_bidirectional_duration_run():
    result = parse_perftest(fixture_text("perftest", "write_bw_bidirectional_duration_gbits.txt"))
    assert result.test == "ib_write_bw"
    assert result.iterations == 560845
    assert result.bw_peak_bps is None  # "WARNING: BW peak won't be measured in this run."
    assert result.bw_avg_bps == 98_020_000_000  # 98.02 Gb/sec
    assert result.msg_rate_mpps == 0.18695


def test_run_infinitely_reports_the_latest_interval():
    result = parse_perftest(fixture_text("perftest", "derived_run_infinitely_rows.txt"))
    assert [row.bw_avg_bps for row in result.rows] == [
        98_020_000_000,
        97_890_000_000,
        97_850_000_000,
    ]
    assert result.bw_avg_bps == 97_850_000_000
    assert result.iterations == 559872
    assert result.bw_peak_bps is None


def test_server_and_client_interleaved_in_one_terminal():
    result = parse_perftest(fixture_text("perftest", "atomic_bw_server_client_interleaved.txt"))
    assert result.test == "ib_atomic_bw"
    assert len(result.rows) == 1  # the repeated row after the closing line is not counted
    # 72.43 MB/sec * 8388608 = 607586877.44 bits/s
    assert result.bw_avg_bps == pytest.approx(607_586_877.44, abs=0.01)


def test_two_rows_printed_on_one_line_are_refused():
    with pytest.raises(ParseError, match="10 values for 5 columns"):
        parse_perftest(fixture_text("perftest", "send_bw_ud_rows_merged_on_one_line.txt"))


def test_latency_table_before_percentiles_existed():
    result = parse_perftest(fixture_text("perftest", "derived_latency_three_columns.txt"))
    assert result.test == "ib_write_lat"
    assert (result.msg_size_bytes, result.t_min_us, result.t_max_us) == (8, 0.89, 9.06)
    assert result.t_typical_us == 0.99
    assert (result.t_avg_us, result.t_stdev_us, result.p99_us, result.p999_us) == (
        None,
        None,
        None,
        None,
    )


# Layouts printed with the formats of perftest_parameters.h (RESULT_FMT* / REPORT_FMT*).
_RULE = "-" * 87 + "\n"


def test_send_with_immediate_title():
    text = (
        "                    Send_imm BW Test\n"
        + _RULE
        + " #bytes     #iterations    BW peak[Gb/sec]"
        "    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 65536      5000             392.38             392.34   \t\t     0.748336\n" + _RULE
    )
    assert parse_perftest(text).test == "ib_send_bw"


def test_per_port_columns():
    text = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
        "   BW Port1[Gb/sec]   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]\n"
        " 65536      1000000        0.00               190.52\t\t   0.363388        95.27"
        "            0.181713              95.25            0.181675\n"
    )
    result = parse_perftest(text)
    assert result.bw_avg_bps == 190_520_000_000  # the sum of both ports, not port 1
    assert result.msg_rate_mpps == 0.363388


def test_cpu_utilisation_column():
    text = (
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]"
        "    CPU_Util[%]\n"
        " 65536      5000             46567.34            46557.03\t\t     0.744912\t    99.61\n"
    )
    result = parse_perftest(text)
    assert result.bw_avg_bps == pytest.approx(390_548_674_314.24, abs=0.01)
    assert result.msg_rate_mpps == 0.744912


def test_six_decimals_below_a_tenth_of_a_gigabit():
    # REPORT_FMT_EXT: perftest switches to %.6f when the average is under 0.1 Gb/sec
    text = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 2          5000           0.062381            0.052418            3.276125\n"
    )
    result = parse_perftest(text)
    assert result.bw_avg_bps == 52_418_000  # 0.052418 * 10^9
    assert result.bw_peak_bps == 62_381_000


def test_header_without_an_average_column_is_refused():
    text = (
        " #bytes     #iterations    BW peak[Gb/sec]    BW averagX[Gb/sec]   MsgRate[Mpps]\n"
        " 65536      5000             392.38             392.34             0.748336\n"
    )
    with pytest.raises(ParseError, match="no 'BW average' column"):
        parse_perftest(text)


@pytest.mark.parametrize(
    ("figure", "reason"),
    [
        ("inf", "not a number"),
        ("nan", "not a number"),
        ("-5", "negative"),
        ("1e300", "too large"),
        ("9e999999999", "too large"),
    ],
)
def test_absurd_average_is_refused(figure, reason):
    text = fixture_text("perftest", "write_bw_gbits_cx7_ndr.txt").replace("392.34", figure)
    with pytest.raises(ParseError, match=reason):
        parse_perftest(text)
