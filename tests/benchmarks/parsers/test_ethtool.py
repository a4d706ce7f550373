import pytest

from benchmarks.parsers import ParseError
from benchmarks.parsers.ethtool import EthtoolResult, parse_ethtool

from . import fixture_text


def test_speed_in_megabits():
    result = parse_ethtool(fixture_text("ethtool", "mana_speed_100mbps.txt"))
    # "Speed: 100Mb/s" -> 100 * 10^6 bits/s
    assert result == EthtoolResult("enP30832s1", 100_000_000, "full", True)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("i40e_unsupported_sfp_link_down.txt", EthtoolResult("net03", None, None, False)),
        ("e1000e_unknown_65535.txt", EthtoolResult("eth0", None, None, False)),
        ("virtio_vm_speed_unknown_link_up.txt", EthtoolResult("enp0s8", None, None, True)),
    ],
)
def test_unknown_speed_is_none(name, expected):
    assert parse_ethtool(fixture_text("ethtool", name)) == expected


def test_hundred_gig():
    text = "Settings for ens1f0:\n\tSpeed: 100000Mb/s\n\tDuplex: Full\n\tLink detected: yes\n"
    assert parse_ethtool(text).speed_bps == 100_000_000_000


def test_missing_device():
    with pytest.raises(ParseError, match="no device matches name"):
        parse_ethtool(fixture_text("ethtool", "derived_no_such_device.txt"))


@pytest.mark.parametrize(
    "garbage", ["", "Speed: 100Mb/s", "Settings for eth0:\n\tSpeed: fast\n", "\x00"]
)
def test_garbage(garbage):
    with pytest.raises(ParseError):
        parse_ethtool(garbage)
