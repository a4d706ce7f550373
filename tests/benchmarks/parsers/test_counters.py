import pytest

from gpulease_verify.parsers import PARSERS, ParseError, parse_counters

from . import fixture_text


def test_sysfs_data_counters_are_four_octet_units():
    result = parse_counters(fixture_text("counters", "sysfs_ib_counters_mlx5.txt"))
    assert result.source == "sysfs"
    (port,) = result.ports
    assert (port.name, port.device, port.port) == ("mlx5_0/1", "mlx5_0", 1)
    # port_rcv_data 8823914021 * 4 octets = 35295656084 bytes
    assert port.rx_bytes == 35_295_656_084
    # port_xmit_data 8801220117 * 4 = 35204880468 bytes
    assert port.tx_bytes == 35_204_880_468
    assert port.rx_errors == 0
    assert port.tx_errors is None  # no port_xmit_discards in this dump
    assert port.link_downed == 0
    assert port.rx_pause_frames is None
    assert port.raw["port_rcv_packets"] == 41220981
    assert len(port.raw) == 11


def test_saturated_counters_are_not_numbers():
    (port,) = parse_counters(fixture_text("counters", "derived_saturated_32bit.txt")).ports
    assert port.rx_bytes is None  # 0xFFFFFFFF: stopped counting
    assert port.tx_bytes is None
    assert port.rx_errors is None  # 0xFFFF
    assert port.tx_errors == 12
    assert port.link_downed == 3
    assert port.raw["port_rcv_data"] == 4294967295


def test_ethtool_statistics_prefer_physical_port_counters():
    result = parse_counters(fixture_text("counters", "ethtool_S_mlx5_physical.txt"))
    assert result.source == "ethtool"
    (port,) = result.ports
    assert port.interface is None  # ethtool -S does not print the name
    assert port.rx_bytes == 12_675_730_417_676  # rx_bytes_phy, not the software rx_bytes
    assert port.tx_bytes == 12_512_566_605_440  # tx_bytes_phy, not tx_bytes 777777777777
    assert port.rx_errors == 2  # rx_crc_errors_phy
    assert port.link_downed == 7
    assert port.rx_pause_frames == 11
    assert port.tx_pause_frames == 13
    assert port.rx_pfc_pause_frames is None
    assert len(port.raw) == 12


def test_ethtool_blocks_named_by_the_probe():
    text = (
        "# ethtool -S ens1f0\nNIC statistics:\n     rx_bytes: 10\n     tx_bytes: 20\n"
        "     rx_prio3_pause: 4\n     tx_prio3_pause: 5\n     rx_errors: 1\n"
        "# ethtool -S ens1f1\nNIC statistics:\n     rx_bytes: 30\n"
    )
    first, second = parse_counters(text).ports
    assert (first.interface, first.rx_bytes, first.tx_bytes) == ("ens1f0", 10, 20)
    assert (first.rx_pfc_pause_frames, first.tx_pfc_pause_frames, first.rx_errors) == (4, 5, 1)
    assert (second.interface, second.rx_bytes, second.tx_bytes) == ("ens1f1", 30, None)


def test_registered_as_counters():
    assert PARSERS["counters"] is parse_counters


@pytest.mark.parametrize("garbage", ["", "NIC statistics:\n", "rx_bytes 5", "/sys/class/net/x:1"])
def test_garbage(garbage):
    with pytest.raises(ParseError):
        parse_counters(garbage)


def test_kernel_netdev_statistics_of_any_interface():
    result = parse_counters(fixture_text("counters", "netdev_sysfs_virtio_capture.txt"))
    assert result.source == "netdev"
    (port,) = result.ports
    assert port.interface == "eth0"
    # /sys/class/net/*/statistics are plain byte counts: no scaling.
    assert (port.rx_bytes, port.tx_bytes) == (119430232, 233081)
    assert (port.rx_errors, port.tx_errors) == (0, 0)
    assert port.link_downed == 1  # carrier_down_count
    assert port.raw["rx_packets"] == 3239


def test_ethtool_statistics_without_physical_counters_use_the_software_ones():
    text = fixture_text("counters", "ethtool_S_mlx5_cx4lx_prefix_ethq8.txt")
    (port,) = parse_counters(text).ports
    assert (port.rx_bytes, port.tx_bytes) == (2_195_783_498_134, 2_655_285_206_479)
    assert port.raw["rx_csum_none"] == 49455
    assert len(port.raw) == 23


def test_per_queue_counters_are_not_port_totals():
    with pytest.raises(ParseError, match="no port-wide counter"):
        parse_counters(fixture_text("counters", "ethtool_S_bnx2x_per_queue_ethq6.txt"))


def test_a_counter_no_row_can_hold_is_dropped_from_raw_but_refused_when_it_is_a_figure():
    text = fixture_text("counters", "ethtool_S_mlx5_cx4lx_prefix_ethq8.txt")
    unset = str(2**64 - 1)  # a driver's unset 0xFFFFFFFFFFFFFFFF
    (port,) = parse_counters(text.replace("rx_csum_none: 49455", f"rx_csum_none: {unset}")).ports
    assert "rx_csum_none" not in port.raw
    assert port.rx_bytes == 2_195_783_498_134
    with pytest.raises(ParseError, match="too large"):
        parse_counters(text.replace("rx_bytes: 2195783498134", f"rx_bytes: {2**63}"))
