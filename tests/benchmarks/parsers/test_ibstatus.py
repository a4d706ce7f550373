import pytest

from gpulease_verify.parsers import ParseError, to_dict
from gpulease_verify.parsers.ibstatus import IbPort, parse_ibstat, parse_ibstatus

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


@pytest.mark.parametrize(
    ("name", "rates"),
    [
        # "rate: 400 Gb/sec (4X NDR)" and "100 Gb/sec (4X EDR)" on RoCE ports of one host
        ("roce_400g_ndr_and_100g_edr_sglang.txt", [400_000_000_000, 100_000_000_000]),
        # two lanes: "200 Gb/sec (2X NDR)" is 200 Gbit/s, not 400
        ("roce_200g_2x_ndr_bonds_sglang.txt", [200_000_000_000] * 4),
    ],
)
def test_ibstatus_ndr_rates_and_two_lane_widths(name, rates):
    ports = parse_ibstatus(fixture_text("ibstatus", name)).ports
    assert [port.rate_bps for port in ports] == rates
    assert {port.link_layer for port in ports} == {"Ethernet"}


def test_ibstat_400g_ndr_infiniband():
    ports = parse_ibstat(fixture_text("ibstat", "ndr_400g_h20_deepep303.txt")).ports
    assert ports == (
        IbPort("mlx5_0", 1, "ACTIVE", "LINKUP", 400_000_000_000, "InfiniBand"),
        IbPort("mlx5_1", 1, "ACTIVE", "LINKUP", 400_000_000_000, "InfiniBand"),
    )


def test_ibstat_roce_200g_and_a_disabled_port_that_still_prints_a_rate():
    roce = parse_ibstat(fixture_text("ibstat", "roce_200g_cx7_mooncake1999.txt")).ports
    assert [(p.rate_bps, p.link_layer) for p in roce] == [(200_000_000_000, "Ethernet")] * 2
    hdr, down = parse_ibstat(fixture_text("ibstat", "hdr_200g_and_down_nccl_tests128.txt")).ports
    assert hdr.rate_bps == 200_000_000_000
    # "State: Down / Physical state: Disabled / Rate: 10": 10 is not a rate it runs at
    assert (down.state, down.phys_state, down.rate_bps) == ("DOWN", "DISABLED", None)


def test_ibstat_debug_lines_are_ignored_and_fdr_56_is_read():
    down, fdr = parse_ibstat(fixture_text("ibstat", "mlx4_fdr_with_ibwarn_rdma_core847.txt")).ports
    assert (down.port, down.rate_bps) == (1, None)
    # the excerpt ends after "Rate: 56": no link layer line for port 2
    assert (fdr.port, fdr.state, fdr.rate_bps, fdr.link_layer) == (2, "ACTIVE", 56 * 10**9, None)


def test_ibstat_partial_output_before_an_ibpanic_keeps_the_ports_it_printed():
    ports = parse_ibstat(fixture_text("ibstat", "partial_then_ibpanic_gpud752.txt")).ports
    # mlx5_8 panicked: it is absent, so a link check looking for it reports it missing
    assert [(p.device, p.rate_bps) for p in ports] == [("mlx5_7", 200_000_000_000)]


@pytest.mark.parametrize(
    ("state", "phys", "expected"),
    [
        # infiniband-diags ibstat.c port_state_str and port_phy_state_str
        ("Down", "Polling", ("DOWN", "POLLING", None)),
        ("Initializing", "LinkUp", ("INIT", "LINKUP", 100_000_000_000)),
        ("Armed", "LinkUp", ("ARMED", "LINKUP", 100_000_000_000)),
        ("Active", "LinkErrorRecovery", ("ACTIVE", "LINKERRORRECOVERY", None)),
        ("Down", "PortConfigurationTraining", ("DOWN", "PORTCONFIGURATIONTRAINING", None)),
        ("Down", "Sleep", ("DOWN", "SLEEP", None)),
        ("Down", "PhyTest", ("DOWN", "PHYTEST", None)),
    ],
)
def test_every_ibstat_state_spelling(state, phys, expected):
    text = (
        "CA 'mlx5_0'\n\tPort 1:\n"
        f"\t\tState: {state}\n\t\tPhysical state: {phys}\n\t\tRate: 100\n"
        "\t\tLink layer: InfiniBand\n"
    )
    port = parse_ibstat(text).ports[0]
    assert (port.state, port.phys_state, port.rate_bps) == expected


@pytest.mark.parametrize(
    ("state", "phys", "expected"),
    [
        # the kernel's sysfs files (drivers/infiniband/core/sysfs.c), as ibstatus cats them
        ("5: ACTIVE_DEFER", "5: LinkUp", ("ACTIVE_DEFER", "LINKUP")),
        ("3: ARMED", "5: LinkUp", ("ARMED", "LINKUP")),
        ("1: DOWN", "7: Phy Test", ("DOWN", "PHYTEST")),
        ("1: DOWN", "2: Polling", ("DOWN", "POLLING")),
    ],
)
def test_every_ibstatus_state_spelling(state, phys, expected):
    text = (
        "Infiniband device 'mlx5_0' port 1 status:\n"
        f"\tstate:\t\t {state}\n\tphys state:\t {phys}\n\trate:\t\t 400 Gb/sec (4X NDR)\n"
    )
    port = parse_ibstatus(text).ports[0]
    assert (port.state, port.phys_state) == expected


def test_an_unreadable_rate_file_is_unknown_not_a_number():
    # ibstatus prints "unknown" when `cat rate` fails; our probe also captures cat's stderr
    text = (
        "Infiniband device 'mlx5_0' port 1 status:\n\tstate:\t\t 4: ACTIVE\n"
        "\tphys state:\t 5: LinkUp\n"
        "cat: /sys/class/infiniband/mlx5_0/ports/1/rate: Invalid argument\n"
        "\trate:\t\t unknown\n\tlink_layer:\t InfiniBand\n"
    )
    assert parse_ibstatus(text).ports[0].rate_bps is None


@pytest.mark.parametrize("rate", ["9" * 30, "1e30", "1.2.3"])
def test_an_absurd_rate_is_refused(rate):
    text = fixture_text("ibstat", "ndr_400g_h20_deepep303.txt").replace(
        "Rate: 400", f"Rate: {rate}"
    )
    with pytest.raises(ParseError):
        parse_ibstat(text)
