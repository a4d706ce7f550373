import pytest

from benchmarks.parsers import ParseError, to_dict
from benchmarks.parsers.ibstatus import IbPort, parse_ibstat, parse_ibstatus

from . import fixture_text


def test_ibstatus_edr_infiniband():
    result = parse_ibstatus(fixture_text("ibstatus", "edr_infiniband_three_ports.txt"))
    assert [port.device for port in result.ports] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    # "rate: 100 Gb/sec (4X EDR)" -> 100 * 10^9
    assert result.ports[0] == IbPort("mlx5_0", 1, "ACTIVE", "LINKUP", 100_000_000_000, "InfiniBand")


def test_ibstatus_down_port_has_no_rate():
    result = parse_ibstatus(fixture_text("ibstatus", "roce_one_down_one_active.txt"))
    down, up = result.ports
    assert (down.state, down.phys_state, down.rate_bps) == ("DOWN", "DISABLED", None)
    assert (up.state, up.phys_state, up.rate_bps, up.link_layer) == (
        "ACTIVE",
        "LINKUP",
        100_000_000_000,
        "Ethernet",
    )


def test_ibstatus_one_lane_edr_and_indented_hdr():
    roce = parse_ibstatus(fixture_text("ibstatus", "roce_25g_1x_edr.txt")).ports[0]
    assert roce.rate_bps == 25_000_000_000
    hdr = parse_ibstatus(fixture_text("ibstatus", "hdr_200g_infiniband.txt")).ports[0]
    assert hdr.rate_bps == 200_000_000_000
    both_down = parse_ibstatus(fixture_text("ibstatus", "hdr_ethernet_both_down.txt"))
    assert [port.rate_bps for port in both_down.ports] == [None, None]


def test_ibstat_states_use_the_ibstatus_vocabulary():
    port = parse_ibstat(fixture_text("ibstat", "edr_initializing_no_sm.txt")).ports[0]
    # "State: Initializing" without a subnet manager; the link itself trained at 100
    assert port == IbPort("mlx5_0", 1, "INIT", "LINKUP", 100_000_000_000, "InfiniBand")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("mlx4_qdr_40g_singularity.txt", ("mlx4_0", "ACTIVE", 40_000_000_000, "InfiniBand")),
        ("hdr_200g_active.txt", ("mlx5_0", "ACTIVE", 200_000_000_000, "InfiniBand")),
        ("roce_100g_renamed_rdma0.txt", ("rdma0", "ACTIVE", 100_000_000_000, "Ethernet")),
        ("hdr_ethernet_down_disabled.txt", ("mlx5_1", "DOWN", None, "Ethernet")),
    ],
)
def test_ibstat_outputs(name, expected):
    port = parse_ibstat(fixture_text("ibstat", name)).ports[0]
    assert (port.device, port.state, port.rate_bps, port.link_layer) == expected


def test_ibstat_rate_2_5_and_fdr10():
    text = "CA 'rxe0'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 2.5\n"
    assert parse_ibstat(text).ports[0].rate_bps == 2_500_000_000
    fdr10 = text.replace("Rate: 2.5", "Rate: 40 (FDR10)")
    assert parse_ibstat(fdr10).ports[0].rate_bps == 40_000_000_000


def test_same_host_gives_the_same_ports_from_both_tools():
    ibstat = parse_ibstat(fixture_text("ibstat", "hdr_200g_active.txt"))
    ibstatus = parse_ibstatus(fixture_text("ibstatus", "hdr_200g_infiniband.txt"))
    assert to_dict(ibstat) == to_dict(ibstatus)


def test_ibpanic_is_a_parse_error():
    with pytest.raises(ParseError, match="ibpanic"):
        parse_ibstat(fixture_text("ibstat", "no_device_ibpanic.txt"))


def test_state_without_sysfs_number():
    with pytest.raises(ParseError, match="is not 'N: NAME'"):
        parse_ibstatus(fixture_text("ibstatus", "derived_state_without_number.txt"))


@pytest.mark.parametrize("garbage", ["", "CA", "Infiniband device", "\t\trate: fast"])
def test_garbage(garbage):
    with pytest.raises(ParseError):
        parse_ibstatus(garbage)
    with pytest.raises(ParseError):
        parse_ibstat(garbage)
