import pytest

from benchmarks.parsers import ParseError, to_dict
from benchmarks.parsers.nccl_tests import parse_nccl_tests

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
