"""The telemetry poll's parser and the per-interval samples, on real sysfs and ethtool text
(fixtures/telemetry/README.md names each source)."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpulease_verify.parsers.base import ParseError
from gpulease_verify.telemetry import (
    PortReading,
    PortSample,
    Snapshot,
    TelemetryParseError,
    parse_snapshot,
    port_samples,
    sample_entry,
    sample_from_entry,
    switch_entry,
)

FIXTURES = Path(__file__).parent / "fixtures" / "telemetry"
BOOT = "89924595-6e08-46d9-aa54-98af938dd840"
OTHER_BOOT = "0b7f3a52-1c4e-4d8a-9f0e-2a6b5c7d8e9f"
AT = datetime(2026, 12, 1, 10, 0, 30, tzinfo=UTC)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def poll(*sections: tuple[str, str], boot_id: str = BOOT, uptime: str = "1000.25 900.00") -> str:
    """A whole poll output: the header sections, then the given (label, body) ones."""
    parts = [("boot_id", boot_id), ("clock", uptime), *sections]
    return "".join(f"### {label}\n{body.rstrip()}\n" for label, body in parts)


# --- parsing --------------------------------------------------------------------------


def test_parses_an_infiniband_port_of_a_real_h100():
    snapshot = parse_snapshot(poll(("ib mlx5_0:1", fixture("sysfs_ib_mlx5_0_h100_ndr_gpud.txt"))))
    port = snapshot.ports["mlx5_0:1"]
    assert (port.link_layer, port.up, port.state, port.rate_gbps) == (
        "infiniband",
        True,
        "ACTIVE LinkUp",
        400.0,
    )
    assert port.counters["port_xmit_data"] == 230442669431839
    assert port.counters["excessive_buffer_overrun_errors"] == 15
    assert port.counters["link_downed"] == 0
    assert "out_of_sequence" in port.counters  # hw_counters/ read too
    assert snapshot.boot_id == BOOT and snapshot.uptime_s == 1000.25


def test_parses_a_roce_port_as_ethernet():
    text = fixture("sysfs_roce_mlx5_bond_0_h100_gpud.txt")
    port = parse_snapshot(poll(("ib mlx5_bond_0:1", text))).ports["mlx5_bond_0:1"]
    assert (port.link_layer, port.up, port.rate_gbps) == ("ethernet", True, 200.0)


def test_parses_a_real_veth_poll():
    snapshot = parse_snapshot(fixture("veth_up_capture.txt"))
    assert snapshot.boot_id == BOOT
    assert snapshot.uptime_s == 385.34
    port = snapshot.ports["gl0"]
    assert (port.link_layer, port.up, port.state, port.rate_gbps) == ("ethernet", True, "up", 10.0)
    assert port.counters["carrier_changes"] == 2
    assert port.counters["rx_bytes"] == 0


def test_a_down_veth_and_the_einval_of_an_admin_down_one():
    down = parse_snapshot(fixture("veth_down_after_flap_capture.txt")).ports["gl0"]
    assert (down.up, down.state, down.counters["carrier_changes"]) == (False, "down", 5)
    admin = parse_snapshot(fixture("veth_admin_down_capture.txt")).ports["gl0"]
    assert "grep: /sys/class/net/gl0/carrier: Invalid argument" in fixture(
        "veth_admin_down_capture.txt"
    )
    assert (admin.up, admin.state, admin.rate_gbps) == (False, "down", None)
    assert "carrier" not in admin.counters and admin.counters["carrier_changes"] == 5


def test_ethtool_counters_merge_into_the_netdev_port():
    net = "\n".join(
        [
            "/sys/class/net/eth0/operstate:up",
            "/sys/class/net/eth0/carrier:1",
            "/sys/class/net/eth0/carrier_changes:4",
            "/sys/class/net/eth0/speed:100000",
            "/sys/class/net/eth0/statistics/rx_bytes:111",
        ]
    )
    ethtool = "\n".join(
        [
            fixture("ethtool_S_mlx5_cx4lx_prefix_ethq8.txt"),
            fixture("ethtool_S_mlx5_prio3_grep.txt"),
            fixture("ethtool_S_mlx5_cx4_pause_grep.txt"),
        ]
    )
    port = parse_snapshot(poll(("net eth0", net), ("ethtool eth0", ethtool))).ports["eth0"]
    assert (port.up, port.rate_gbps) == (True, 100.0)
    assert port.counters["rx_prio3_pause"] == 41927
    assert port.counters["tx_prio3_pause"] == 1290418
    assert port.counters["tx_pci_signal_integrity"] == 3
    assert port.counters["rx_packets"] == 845320277
    # the kernel's statistics win a clash with ethtool's same-named counter
    assert port.counters["rx_bytes"] == 111


def test_an_interface_that_is_gone_is_down_and_absent():
    missing = "grep: /sys/class/net/gl9/operstate: No such file or directory\n" * 2
    port = parse_snapshot(poll(("net gl9", missing))).ports["gl9"]
    assert (port.up, port.state, port.counters) == (False, "absent", {})


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("", "printed nothing"),
        ("Permission denied\nsomething else\n", "no '### label' sections"),
        ("### clock\n1.0 2.0\n", "no '### boot_id'"),
        (f"### boot_id\n{BOOT}\n", "no '### clock'"),
        ("### boot_id\nnot-a-uuid\n### clock\n1 1\n", "not a UUID"),
        (f"### boot_id\n{BOOT}\n### clock\nsoon\n", "seconds since boot"),
        (poll(("ib mlx5_0:1", "<html>garbage</html>")), "unexpected line"),
        (poll(("ib mlx5_0:1", "/sys/class/infiniband/mlx5_0/ports/1/rate:fast")), "Gb/sec"),
        (poll(("net eth0", "/sys/class/net/eth0/carrier:7")), "neither 0 nor 1"),
    ],
)
def test_garbled_output_is_refused_with_a_sentence(raw, words):
    with pytest.raises(TelemetryParseError, match=words) as error:
        parse_snapshot(raw)
    assert isinstance(error.value, ParseError)
    assert "\n" not in str(error.value)


def test_snapshot_json_round_trip():
    snapshot = parse_snapshot(fixture("veth_up_capture.txt"))
    assert Snapshot.from_json(snapshot.to_json()) == snapshot


# --- samples --------------------------------------------------------------------------


def ib(up: bool, **counters: int) -> PortReading:
    return PortReading(
        "mlx5_0:1", "infiniband", up, "ACTIVE LinkUp" if up else "DOWN", 400, counters
    )


def snap(*ports: PortReading, boot_id: str = BOOT) -> Snapshot:
    return Snapshot(boot_id, 100.0, {port.port: port for port in ports})


def one(previous: Snapshot | None, current: Snapshot, seconds: float = 30) -> PortSample:
    [sample] = port_samples(previous, current, at=AT, seconds=seconds)
    return sample


def test_first_poll_has_the_state_only():
    sample = one(None, snap(ib(True, symbol_error=5)))
    assert sample == PortSample("mlx5_0:1", AT, 0.0, True, 0, {}, False)


def test_deltas_keep_only_counters_that_moved():
    sample = one(
        snap(ib(True, symbol_error=5, port_rcv_errors=1)),
        snap(ib(True, symbol_error=9, port_rcv_errors=1)),
    )
    assert (sample.deltas, sample.reset, sample.down_cycles, sample.seconds) == (
        {"symbol_error": 4},
        False,
        0,
        30.0,
    )


def test_link_downed_increase_is_down_cycles():
    sample = one(snap(ib(True, link_downed=3)), snap(ib(True, link_downed=5)))
    assert (sample.down_cycles, sample.deltas) == (2, {"link_downed": 2})


def test_up_then_down_without_the_counter_is_one_down():
    sample = one(snap(ib(True, link_downed=3)), snap(ib(False, link_downed=3)))
    assert (sample.up, sample.down_cycles) == (False, 1)


def test_reboot_resets_the_interval():
    sample = one(
        snap(ib(True, symbol_error=50, link_downed=4)),
        snap(ib(True, symbol_error=2, link_downed=0), boot_id=OTHER_BOOT),
    )
    assert (sample.reset, sample.deltas, sample.down_cycles) == (True, {}, 0)


def test_a_counter_that_went_backwards_resets_the_interval():
    sample = one(
        snap(ib(True, port_rcv_errors=10, symbol_error=1)),
        snap(ib(True, port_rcv_errors=3, symbol_error=2)),
    )
    assert (sample.reset, sample.deltas) == (True, {})


def test_a_32_bit_data_counter_wraps():
    sample = one(snap(ib(True, port_xmit_data=4294967000)), snap(ib(True, port_xmit_data=200)))
    assert (sample.reset, sample.deltas) == (False, {"port_xmit_data": 496})  # 296 + 200


def test_a_saturated_32_bit_counter_that_reads_lower_was_cleared():
    sample = one(snap(ib(True, port_xmit_data=2**32 - 1)), snap(ib(True, port_xmit_data=200)))
    assert sample.reset


def test_a_64_bit_counter_going_backwards_is_a_reset_not_a_wrap():
    sample = one(snap(ib(True, port_xmit_data=230442669431839)), snap(ib(True, port_xmit_data=5)))
    assert sample.reset
    sample = one(snap(ib(True, symbol_error=65000)), snap(ib(True, symbol_error=3)))
    assert sample.reset  # not a known 32-bit counter


def test_real_veth_flap_counts_one_cycle_and_the_open_down():
    before = parse_snapshot(fixture("veth_up_capture.txt"))
    after = parse_snapshot(fixture("veth_down_after_flap_capture.txt"))
    sample = one(before, after, seconds=1.52)
    # carrier_changes 2 -> 5 from up: down, up, down = 2 downs, the last still open
    assert (sample.up, sample.down_cycles, sample.deltas["carrier_changes"]) == (False, 2, 3)


@pytest.mark.parametrize(
    ("was_up", "now_up", "changes", "downs"),
    [
        (True, True, 4, 2),
        (True, False, 1, 1),
        (False, True, 1, 0),
        (False, True, 3, 1),
        (False, False, 2, 1),
    ],
)
def test_carrier_changes_give_the_downs(was_up, now_up, changes, downs):
    def net(up: bool, count: int) -> PortReading:
        return PortReading(
            "eth0", "ethernet", up, "up" if up else "down", 100, {"carrier_changes": count}
        )

    assert one(snap(net(was_up, 10)), snap(net(now_up, 10 + changes))).down_cycles == downs


def test_port_sample_json_is_compact_and_round_trips():
    sample = PortSample("mlx5_0:1", AT, 30.0, True, 2, {"symbol_error": 4, "link_downed": 2})
    assert sample.to_json() == {
        "p": "mlx5_0:1",
        "t": "2026-12-01T10:00:30Z",
        "s": 30.0,
        "u": True,
        "c": 2,
        "d": {"link_downed": 2, "symbol_error": 4},
    }
    assert PortSample.from_json(sample.to_json()) == sample
    quiet = PortSample("eth0", AT + timedelta(microseconds=5), 30.0, None, reset=True)
    assert quiet.to_json() == {
        "p": "eth0",
        "t": "2026-12-01T10:00:30.000005Z",
        "s": 30.0,
        "u": None,
        "r": True,
    }
    assert PortSample.from_json(quiet.to_json()) == quiet


def test_port_sample_json_refuses_bad_values():
    with pytest.raises(ValueError, match="whole number"):
        PortSample.from_json({"p": "x", "t": "2026-12-01T10:00:30Z", "s": 30, "u": True, "c": -1})
    with pytest.raises(ValueError, match="timezone"):
        PortSample.from_json({"p": "x", "t": "2026-12-01T10:00:30", "s": 30, "u": True})


# --- saturated counters and a port below its rate ---------------------------------------


def h100(device: str, fixture_name: str) -> Snapshot:
    return parse_snapshot(poll((f"ib {device}:1", fixture(fixture_name))))


def test_real_h100_ports_with_counters_stuck_at_their_maximum():
    # gpud's H100 capture: mlx5_0's excessive_buffer_overrun_errors reads 15 (4 bits, all
    # ones); mlx5_1's link_downed reads 255 (8 bits) as well. Its 64-bit data counters
    # (230442669431839) and 0-valued error counters are not at any maximum.
    mlx5_0 = h100("mlx5_0", "sysfs_ib_mlx5_0_h100_ndr_gpud.txt")
    mlx5_1 = h100("mlx5_1", "sysfs_ib_mlx5_1_h100_ndr_gpud.txt")
    assert mlx5_1.ports["mlx5_1:1"].counters["link_downed"] == 255
    first = one(None, mlx5_0)
    assert first.saturated == ("excessive_buffer_overrun_errors",)
    [second] = port_samples(mlx5_1, mlx5_1, at=AT, seconds=30)
    assert second.saturated == ("excessive_buffer_overrun_errors", "link_downed")
    # A saturated link_downed does not move: the down cycles between polls are blind.
    assert (second.down_cycles, second.deltas) == (0, {})


def test_a_32_bit_counter_is_saturated_only_at_all_ones_on_two_polls():
    ceiling = 2**32 - 1
    assert (
        one(snap(ib(True, port_rcv_data=5)), snap(ib(True, port_rcv_data=ceiling))).saturated == ()
    )
    stuck = one(snap(ib(True, port_rcv_data=ceiling)), snap(ib(True, port_rcv_data=ceiling)))
    assert stuck.saturated == ("port_rcv_data",)
    # 16 bits and fewer: all ones is the end of the count at once.
    assert one(None, snap(ib(True, symbol_error=65535))).saturated == ("symbol_error",)
    assert one(None, snap(ib(True, symbol_error=65534))).saturated == ()
    # The same names on a netdev are not the IBA counters.
    net = PortReading("eth0", "ethernet", True, "up", 100, {"link_downed": 255})
    assert one(None, snap(net)).saturated == ()


def test_a_port_up_below_its_expected_rate_keeps_both_rates():
    # gpud's mlx5_bond_0 is ACTIVE at "200 Gb/sec (2X NDR)": two of four lanes.
    bond = parse_snapshot(
        poll(("ib mlx5_bond_0:1", fixture("sysfs_roce_mlx5_bond_0_h100_gpud.txt")))
    )
    [slow] = port_samples(None, bond, at=AT, seconds=0, expected={"mlx5_bond_0:1": 400})
    assert (slow.rate_gbps, slow.expected_gbps, slow.slow) == (200.0, 400.0, True)
    [at_rate] = port_samples(None, bond, at=AT, seconds=0, expected={"mlx5_bond_0:1": 200})
    assert (at_rate.rate_gbps, at_rate.expected_gbps, at_rate.slow) == (None, None, False)
    [unknown] = port_samples(None, bond, at=AT, seconds=0)
    assert unknown.rate_gbps is None
    down = one(None, snap(ib(False)))  # a down port has no rate to hold against
    assert down.rate_gbps is None


def test_new_sample_fields_round_trip_and_stay_out_of_old_entries():
    plain = PortSample("eth0", AT, 30.0, True, 0, {"tx_bytes": 5})
    # The entry (what a chain link hashes) of a sample without them is as it always was.
    assert set(sample_entry("n1", plain)) == {
        "node", "port", "at", "seconds", "up", "down_cycles", "deltas", "reset"
    }  # fmt: skip
    full = PortSample(
        "mlx5_0:1", AT, 30.0, True, 0, {}, False, 200.0, 400.0, ("link_downed",), True
    )
    entry = sample_entry("n1", full)
    assert (entry["rate_gbps"], entry["expected_gbps"], entry["saturated"], entry["disputed"]) == (
        "200.0",
        "400.0",
        ["link_downed"],
        True,
    )
    assert sample_from_entry(entry) == ("n1", full)
    assert PortSample.from_json(full.to_json()) == full
    assert full.to_json()["x"] == ["link_downed"] and full.to_json()["w"] is True
    with pytest.raises(ValueError, match="true or false"):
        sample_from_entry({**entry, "disputed": "yes"})
    reading = {
        "switch": "leaf1", "port": "h1-data", "in_octets": 1, "out_octets": 2,
        "oper_up": True, "in_errors": 0, "out_discards": 0,
    }  # fmt: skip
    assert "link" not in switch_entry(**reading)
    assert switch_entry(**reading, link={"node": "n1"})["link"] == {"node": "n1"}


# --- the command ----------------------------------------------------------------------


def test_the_poll_command_reads_each_port_once_under_its_label():
    from benchmarks.probes.commands import telemetry, telemetry_rates
    from benchmarks.probes.plan import PlanNode, PlanPort

    node = PlanNode(
        "n1",
        "leaf1",
        8,
        (
            PlanPort("mlx5_0", 1, "", None, "infiniband", 400),
            PlanPort("mlx5_1", 1, "eth0", "198.18.0.11", "ethernet", 100),
            PlanPort("data0", 1, "data0", None, "ethernet", 1),
        ),
    )
    command = telemetry(node)
    labels = [part.split("'")[1] for part in command.split("printf '%s\\n' ")[1:]]
    assert labels == [
        "### boot_id",
        "### clock",
        "### ib mlx5_0:1",
        "### ib mlx5_1:1",
        "### net eth0",
        "### ethtool eth0",
        "### net data0",
    ]
    assert "grep -H . /sys/class/infiniband/mlx5_0/ports/1/state " in command
    assert "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/* 2>&1" in command
    assert "/sys/class/net/data0/statistics/* 2>&1" in command
    assert "ethtool -S data0" not in command  # a veth: no mlx5 counters to read
    # What each key is expected to run at: the inventory's rate of its port.
    assert telemetry_rates(node) == {
        "mlx5_0:1": 400.0,
        "mlx5_1:1": 100.0,
        "eth0": 100.0,
        "data0": 1.0,
    }
