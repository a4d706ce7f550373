import pytest

from gpulease_verify.parsers import ParseError
from gpulease_verify.parsers.rdma_link import RdmaLink, parse_rdma_link

from . import fixture_text


def test_text_output():
    result = parse_rdma_link(fixture_text("rdma-link", "roce_two_up_two_down.txt"))
    assert result.links == (
        RdmaLink("mlx5_0", 1, "DOWN", "DISABLED", "ens7f0np0"),
        RdmaLink("mlx5_1", 1, "ACTIVE", "LINKUP", "ens7f1np1"),
        RdmaLink("mlx5_2", 1, "DOWN", "DISABLED", "ens10f0np0"),
        RdmaLink("mlx5_3", 1, "ACTIVE", "LINKUP", "ens10f1np1"),
    )


@pytest.mark.parametrize(
    ("name", "first"),
    [
        (
            "bluefield3_bond_ifindex_prefix.txt",
            RdmaLink("mlx5_bond_0", 1, "ACTIVE", "LINKUP", "reth0"),
        ),
        ("mlnx_iproute2_colon.txt", RdmaLink("mlx5_0", 1, "ACTIVE", "LINKUP", "ens21f0")),
        ("soft_roce_rxe.txt", RdmaLink("rxe_server", 1, "ACTIVE", "LINKUP", "veth-server")),
    ],
)
def test_text_variants(name, first):
    assert parse_rdma_link(fixture_text("rdma-link", name)).links[0] == first


def test_json_output():
    result = parse_rdma_link(fixture_text("rdma-link", "json_one_up_one_down.json"))
    assert result.links == (
        RdmaLink("mlx5_0", 1, "ACTIVE", "LINKUP", "ens1f0np0"),
        RdmaLink("mlx5_1", 1, "DOWN", "DISABLED", "ens1f1np1"),
    )
    ipoib = parse_rdma_link(fixture_text("rdma-link", "json_infiniband_ipoib.json"))
    assert ipoib.links[0].netdev == "ib0"


def test_infiniband_port_without_netdev():
    text = (
        "link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 5 sm_lid 1 lmc 0"
        " state ACTIVE physical_state LINK_UP\n"
    )
    assert parse_rdma_link(text).links[0] == RdmaLink("mlx5_0", 1, "ACTIVE", "LINKUP", None)


@pytest.mark.parametrize("garbage", ["", "link", "[]", "{}", '[{"ifname": 1}]', "state ACTIVE"])
def test_garbage(garbage):
    with pytest.raises(ParseError):
        parse_rdma_link(garbage)


def test_truncated_json():
    with pytest.raises(ParseError, match="truncated"):
        parse_rdma_link(fixture_text("rdma-link", "derived_truncated.json"))


def test_infiniband_ports_with_the_index_prefix_and_an_unknown_state():
    result = parse_rdma_link(fixture_text("rdma-link", "ib_ifindex_prefix_unknown_port_leonro.txt"))
    assert result.links == (
        RdmaLink("ibp0s9", 1, "ACTIVE", "LINKUP", None),
        RdmaLink("ibp0s9", 2, "UNKNOWN", "UNKNOWN", None),
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "roce_up_ib_down_sample_codes.txt",
            (
                RdmaLink("mlx5_0", 1, "ACTIVE", "LINKUP", "ens3f0np0"),
                RdmaLink("mlx5_1", 1, "DOWN", "DISABLED", None),
            ),
        ),
        (
            # a shell prompt "[root@node75 ~]#" before the output is text, not a JSON array
            "cx6dx_trailing_space_3fs283.txt",
            (
                RdmaLink("mlx5_0", 1, "ACTIVE", "LINKUP", "p1p1"),
                RdmaLink("mlx5_1", 1, "ACTIVE", "LINKUP", "p1p2"),
            ),
        ),
        ("ib_down_polling_rccl.txt", (RdmaLink("mlx5_7", 1, "DOWN", "POLLING", None),)),
    ],
)
def test_more_text_variants(name, expected):
    assert parse_rdma_link(fixture_text("rdma-link", name)).links == expected


def test_pretty_json_reads_like_compact_json():
    pretty = parse_rdma_link(fixture_text("rdma-link", "derived_pretty_json_one_up_one_down.json"))
    compact = parse_rdma_link(fixture_text("rdma-link", "json_one_up_one_down.json"))
    assert pretty == compact


@pytest.mark.parametrize(
    "entry",
    [
        '{"ifname": "mlx5\\u0000", "port": 1}',
        '{"ifname": "a b", "port": 1}',
        '{"ifname": "mlx5_0", "port": -1}',
        '{"ifname": "mlx5_0", "port": 1, "state": {"x": 1}}',
        '{"ifname": "mlx5_0", "port": 1, "netdev": "\\ud800"}',
        '{"ifname": "mlx5_0", "port": NaN}',
        '{"ifname": "mlx5_0", "port": 1' + "0" * 5000 + "}",
    ],
)
def test_json_values_rdma_never_prints_are_refused(entry):
    with pytest.raises(ParseError):
        parse_rdma_link(f"[{entry}]")
