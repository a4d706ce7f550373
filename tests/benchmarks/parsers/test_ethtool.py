import pytest

from gpulease_verify.parsers import ParseError
from gpulease_verify.parsers.ethtool import EthtoolResult, parse_ethtool

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


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("speed_1000_softroce_rxe52.txt", EthtoolResult("eth0", 1_000_000_000, "full", True)),
        # "100000Mb/s" is 100 Gbit/s; this quoted output ends before "Link detected"
        (
            "speed_100g_no_link_line_netdev_quote.txt",
            EthtoolResult("eth0", 100_000_000_000, "full", None),
        ),
        # hccn_tool prefixes the header: "Netdev status:Settings for eth3:"
        (
            "speed_200g_hccn_tool_prefix.txt",
            EthtoolResult("eth3", 200_000_000_000, "full", True),
        ),
        (
            "derived_400g_lanes_from_netdev_grep.txt",
            EthtoolResult("swp1", 400_000_000_000, "full", None),
        ),
        (
            "link_only_wol_warning_open_nic29.txt",
            EthtoolResult("enp24s0f0", None, None, True),
        ),
    ],
)
def test_speeds_up_to_400g_and_partial_outputs(name, expected):
    assert parse_ethtool(fixture_text("ethtool", name)) == expected


def test_a_reason_after_link_detected_no_is_still_no():
    text = "Settings for eth1:\n\tSpeed: Unknown!\n\tLink detected: no (No cable)\n"
    assert parse_ethtool(text).link_detected is False


@pytest.mark.parametrize("speed", ["99999999999999999999Mb/s", "1e400Mb/s", "-100Mb/s"])
def test_an_absurd_speed_is_refused(speed):
    text = fixture_text("ethtool", "speed_1000_softroce_rxe52.txt").replace("1000Mb/s", speed)
    with pytest.raises(ParseError):
        parse_ethtool(text)
