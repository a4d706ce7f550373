import pytest

from benchmarks.parsers import ParseError, to_dict
from benchmarks.parsers.perftest import parse_perftest

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
