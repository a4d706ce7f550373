import pytest

from gpulease_verify.parsers import ParseError, to_dict
from gpulease_verify.parsers.nccl_tests import parse_nccl_tests

from . import fixture_text

# nccl-tests prints GB/s with GB = 10^9 bytes: 1 GB/s = 8 * 10^9 bits/s.


def test_multi_node_sixteen_ranks():
    result = parse_nccl_tests(fixture_text("nccl-tests", "multinode_2x8_a100_kubeflow.txt"))
    assert result.ranks == 16
    assert result.collective is None  # the log never names the binary
    # "# Avg bus bandwidth    : 175.531" -> 175.531 * 8e9 = 1404248000000 bits/s
    assert result.avg_busbw_bps == 1_404_248_000_000
    # highest out-of-place busbw 180.06 GB/s at 10 GiB: 180.06 * 8e9
    assert result.peak_busbw_bps == 1_440_480_000_000
    assert result.peak_size_bytes == 10737418240
    assert result.wrong_total == 0
    last = result.rows[1]
    assert (last.size_bytes, last.count, last.type, last.redop) == (
        10737418240,
        2684354560,
        "float",
        "sum",
    )
    assert last.out_of_place.time_us == 111812.0
    assert last.out_of_place.algbw_bps == 768_240_000_000  # 96.03 * 8e9
    assert last.in_place is not None
    assert last.in_place.busbw_bps == 1_440_640_000_000  # 180.08 * 8e9


def test_single_node_names_the_collective_from_the_command_line():
    result = parse_nccl_tests(fixture_text("nccl-tests", "single_node_8xv100_oci.txt"))
    assert result.collective == "all_reduce"
    assert result.ranks == 8
    assert result.avg_busbw_bps == 1_083_640_000_000  # 135.455 * 8e9
    assert len(result.rows) == 1


def test_srun_prefixes_and_unchecked_results():
    result = parse_nccl_tests(fixture_text("nccl-tests", "srun_prefixed_a3mega.txt"))
    assert len(result.rows) == 11
    assert result.rows[0].redop == "none"
    assert result.rows[0].out_of_place.wrong is None  # "N/A": not checked
    assert result.wrong_total is None
    assert result.avg_busbw_bps == 1_030_536_000_000  # 128.817 * 8e9
    assert result.peak_busbw_bps == 1_511_040_000_000  # 188.88 * 8e9
    assert result.peak_size_bytes == 8589934592


def test_mpirun_tag_output_prefix():
    text = "".join(
        f"[1,0]<stdout>:{line}\n"
        for line in fixture_text("nccl-tests", "single_node_8xv100_oci.txt").splitlines()
    )
    result = parse_nccl_tests(text)
    assert result.ranks == 8
    assert result.avg_busbw_bps == 1_083_640_000_000


def test_old_layout_error_column_is_not_a_wrong_count():
    result = parse_nccl_tests(fixture_text("nccl-tests", "old_layout_error_column_128gpu.txt"))
    assert len(result.rows) == 6
    assert result.rows[0].type == "float"
    assert result.rows[0].redop == "sum"
    assert result.rows[0].out_of_place.wrong is None
    assert result.wrong_total is None
    assert result.avg_busbw_bps is None
    assert result.peak_busbw_bps == 17_200_000_000  # 2.15 * 8e9
    assert result.peak_size_bytes == 131072


def test_trimmed_rank_list_does_not_invent_a_rank_count():
    result = parse_nccl_tests(fixture_text("nccl-tests", "gb200_nvl72_trimmed.txt"))
    assert result.ranks is None  # only "Rank 71" was kept
    assert result.avg_busbw_bps == 5_964_240_000_000  # 745.53 * 8e9


def test_fragment_starting_mid_header():
    result = parse_nccl_tests(fixture_text("nccl-tests", "ring_algo_table_fragment.txt"))
    assert len(result.rows) == 5
    assert result.avg_busbw_bps == 762_407_200_000  # 95.3009 * 8e9


def test_avg_bus_bandwidth_example_from_the_brief():
    text = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong\n"
        "     1048576        262144     float     sum      -1    101.2   10.36    9.06      0"
        "    100.8   10.40    9.10      0\n"
        "# Avg bus bandwidth : 23.4567\n"
    )
    # 23.4567 GB/s * 10^9 bytes * 8 bits = 187653600000 bits/s
    assert parse_nccl_tests(text).avg_busbw_bps == 187_653_600_000


def test_broadcast_with_root_and_no_in_place_column():
    text = (
        "# Collective test starting: broadcast_perf\n"
        "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
        "     8388608       2097152     float    none       0    91.10   92.08   92.08      0\n"
    )
    result = parse_nccl_tests(text)
    assert result.collective == "broadcast"
    assert result.rows[0].in_place is None
    assert result.peak_busbw_bps == 736_640_000_000  # 92.08 * 8e9


@pytest.mark.parametrize(
    "name", ["failure_unhandled_cuda_error.txt", "failure_with_nccl_info_noise.txt"]
)
def test_nccl_failure(name):
    with pytest.raises(ParseError) as error:
        parse_nccl_tests(fixture_text("nccl-tests", name))
    assert str(error.value) == (
        "nccl-tests failed: Test NCCL failure all_reduce.cu:44 'unhandled cuda error / '"
    )


def test_interleaved_independent_runs():
    with pytest.raises(ParseError, match="same rank twice"):
        parse_nccl_tests(fixture_text("nccl-tests", "two_independent_runs_same_rank.txt"))


def test_garbled_row():
    with pytest.raises(ParseError, match="does not fit the header"):
        parse_nccl_tests(fixture_text("nccl-tests", "derived_garbled_row.txt"))


@pytest.mark.parametrize("garbage", ["", "# nThread 1 nGpus 8", "size count\n1 2 3"])
def test_garbage(garbage):
    with pytest.raises(ParseError):
        parse_nccl_tests(garbage)


def test_to_dict_shape():
    result = to_dict(parse_nccl_tests(fixture_text("nccl-tests", "single_node_8xv100_oci.txt")))
    assert set(result) == {
        "collective",
        "ranks",
        "avg_busbw_bps",
        "peak_busbw_bps",
        "peak_size_bytes",
        "wrong_total",
        "rows",
    }
    assert set(result["rows"][0]["out_of_place"]) == {"time_us", "algbw_bps", "busbw_bps", "wrong"}


# Layouts across nccl-tests' history (see the module docstring and fixtures/SOURCES.md).


def test_2017_layout_times_are_milliseconds():
    result = parse_nccl_tests(fixture_text("nccl-tests", "ms_timing_nccl1_style_table.txt"))
    assert len(result.rows) == 10
    first = result.rows[0]
    assert (first.size_bytes, first.count, first.type, first.redop) == (
        10000000,
        10000000,
        "char",
        "sum",
    )
    assert first.out_of_place.time_us == 63.0  # printed 0.063 ms
    assert first.out_of_place.algbw_bps == 1_270_480_000_000  # 158.81 * 8e9
    assert first.in_place is not None
    assert first.in_place.time_us == 5.0  # 0.005 ms
    assert first.in_place.algbw_bps == 16_099_840_000_000  # 2012.48 * 8e9
    assert result.rows[4].type == "int"
    assert result.rows[4].count == 2500000
    # "res" is the largest deviation, as the later "error" column, not a count
    assert first.out_of_place.wrong is None
    assert result.wrong_total is None
    assert result.peak_busbw_bps == 0  # one process: busbw 0.00 on every row


def test_alltoall_rows_with_an_empty_redop_cell():
    result = parse_nccl_tests(fixture_text("nccl-tests", "old_alltoall_empty_redop_tagged.txt"))
    assert len(result.rows) == 7
    assert [row.redop for row in result.rows] == [None] * 7
    assert result.rows[0].type == "float"
    assert result.rows[0].count == 32
    assert result.rows[0].out_of_place.time_us == 28.52
    assert result.peak_busbw_bps == 15_360_000_000  # 1.92 * 8e9
    assert result.peak_size_bytes == 65536
    assert result.rows[-1].in_place is not None
    assert result.rows[-1].in_place.busbw_bps == 15_600_000_000  # 1.95 * 8e9


def test_empty_redop_cell_before_the_root():
    result = parse_nccl_tests(
        fixture_text("nccl-tests", "derived_alltoall_empty_redop_with_root.txt")
    )
    row = result.rows[0]
    assert row.redop is None
    assert row.out_of_place.algbw_bps == 13_723_520_000_000  # 1715.44 * 8e9
    assert row.out_of_place.wrong == 0


def test_a_row_missing_its_last_value_is_not_taken_for_an_empty_redop():
    text = fixture_text("nccl-tests", "version_2_20_header_gb10.txt")
    last = next(line for line in text.splitlines() if line.split()[:1] == ["65536"])
    # "65536 16384 float sum -1 67.93 ... 1.01" is one value short, like an alltoall row,
    # but "sum" sits where the empty redop cell would be
    with pytest.raises(ParseError, match="does not fit the header"):
        parse_nccl_tests(text.replace(last, last.rsplit(maxsplit=1)[0]))


def test_old_all_gather_pasted_without_hash_marks():
    result = parse_nccl_tests(fixture_text("nccl-tests", "old_all_gather_markdown_stripped.txt"))
    assert result.collective == "all_gather"
    row = result.rows[0]
    assert (row.size_bytes, row.count, row.type, row.redop) == (
        4294967296,
        134217728,
        "float",
        None,
    )
    assert row.out_of_place.time_us == 29122.0
    assert result.peak_busbw_bps == 1_032_400_000_000  # 129.05 * 8e9
    assert result.avg_busbw_bps == 1_031_536_000_000  # 128.942 * 8e9
    # the "error" column is a deviation: the count comes from "Out of bounds values : 2"
    assert result.wrong_total == 2


def test_old_layout_run_without_checking():
    result = parse_nccl_tests(fixture_text("nccl-tests", "old_layout_unchecked_256gpu.txt"))
    assert result.collective == "all_reduce"
    assert len(result.rows) == 6
    assert all(row.out_of_place.wrong is None for row in result.rows)
    assert result.wrong_total is None
    assert result.avg_busbw_bps is None
    assert result.peak_busbw_bps == 572_400_000_000  # 71.55 * 8e9
    assert result.peak_size_bytes == 1073741824


def test_alltoall_in_place_is_not_checked_and_zero_average_is_kept():
    result = parse_nccl_tests(fixture_text("nccl-tests", "alltoall_single_gpu_inplace_na.txt"))
    assert result.collective == "alltoall"
    assert result.ranks == 1
    row = result.rows[0]
    assert row.redop == "none"
    assert row.out_of_place.wrong == 0
    assert row.in_place is not None
    assert row.in_place.wrong is None  # "N/A": alltoall has no in-place check
    assert row.in_place.algbw_bps == 344_368_800_000_000  # 43046.10 * 8e9
    assert result.wrong_total == 0
    # "# Avg bus bandwidth : 0" is a measured zero, not a missing average
    assert result.avg_busbw_bps == 0
    assert result.peak_busbw_bps == 0


def test_version_header_and_wider_wrong_column():
    result = parse_nccl_tests(fixture_text("nccl-tests", "version_2_20_header_gb10.txt"))
    assert result.collective == "all_reduce"
    assert result.ranks == 2
    assert [row.size_bytes for row in result.rows] == [8192, 16384, 32768, 65536]
    assert result.peak_busbw_bps == 7_680_000_000  # 0.96 * 8e9
    assert result.wrong_total == 0


def test_zero_byte_rows_are_rows():
    result = parse_nccl_tests(fixture_text("nccl-tests", "size_zero_rows_4gpu.txt"))
    assert len(result.rows) == 8
    assert result.rows[0].size_bytes == 0
    assert result.rows[0].out_of_place.time_us == 5.58
    assert result.rows[0].out_of_place.busbw_bps == 0
    assert result.peak_busbw_bps == 160_000_000  # 0.02 * 8e9 at 512 bytes
    assert result.peak_size_bytes == 512


def test_rows_whose_figures_read_not_available_are_left_out():
    result = parse_nccl_tests(fixture_text("nccl-tests", "derived_size_zero_not_measured.txt"))
    assert [row.size_bytes for row in result.rows] == [128, 256, 512]
    assert result.peak_busbw_bps == 160_000_000


def test_wrong_count_in_exponent_notation():
    result = parse_nccl_tests(fixture_text("nccl-tests", "derived_wrong_count_exponent.txt"))
    first = result.rows[0]
    # %g keeps six significant digits: 1048576 wrong elements print as 1.04858e+06
    assert first.out_of_place.wrong == 1_048_580
    assert first.in_place is not None
    assert first.in_place.wrong == 2_097_150
    assert result.wrong_total == 3_145_730
    assert result.peak_busbw_bps == 6_713_280_000_000  # 839.16 * 8e9, unchanged by the check


def test_per_iteration_columns_and_timestamps():
    result = parse_nccl_tests(fixture_text("nccl-tests", "derived_per_iteration_timestamp.txt"))
    assert len(result.rows) == 4
    first = result.rows[0]
    assert first.out_of_place.time_us == 35.15
    assert first.out_of_place.busbw_bps == 1_840_000_000  # 0.23 * 8e9, not i_min
    assert first.in_place is not None
    assert first.in_place.time_us == 30.33  # not the out-of-place i_cv%
    assert first.in_place.busbw_bps == 2_160_000_000  # 0.27 * 8e9
    assert result.avg_busbw_bps == 5_230_000_000  # 0.65375 * 8e9


def test_copybw_column_is_not_the_wrong_count():
    result = parse_nccl_tests(fixture_text("nccl-tests", "derived_copybw_columns.txt"))
    row = result.rows[0]
    assert row.out_of_place.busbw_bps == 1_084_000_000_000  # 135.50 * 8e9
    assert row.out_of_place.wrong == 0
    assert row.in_place is not None
    assert row.in_place.wrong == 0
    assert result.wrong_total == 0


def test_2017_rank_lines_without_pid():
    # the device listing format of nccl-tests' first release (commit b188a15)
    text = (
        "#   Rank  0 on  dgx-work01 device  0 [0x07] Tesla V100-SXM2-16GB\n"
        "#   Rank  1 on  dgx-work01 device  1 [0x0a] Tesla V100-SXM2-16GB\n"
        + fixture_text("nccl-tests", "ms_timing_nccl1_style_table.txt")
    )
    assert parse_nccl_tests(text).ranks == 2


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
def test_absurd_bus_bandwidth_is_refused(figure, reason):
    text = fixture_text("nccl-tests", "single_node_8xv100_oci.txt").replace("135.50", figure)
    with pytest.raises(ParseError, match=reason):
        parse_nccl_tests(text)
