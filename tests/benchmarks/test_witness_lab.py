"""The switch-side witness in the network lab: a real snmpd answers for the lab's switches,
``benchmarks.switch_snmp`` reads it, and the two faults it must see through: a flapping link
and a tenant whose iperf3 lies (``netlab flap`` / ``netlab forge``).

net-snmp refreshes its interface counters every few seconds (snmpd.COUNTER_CACHE_S), as
real switches do: a total is read that long after the traffic, never sooner.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest
from django.core.management import call_command

from benchmarks import netlab
from benchmarks.netlab import snmpd
from benchmarks.netlab.__main__ import main as netlab_cli
from benchmarks.netlab.network import destroy
from benchmarks.netlab.shell import in_netns
from benchmarks.netlab.shell import run as run_tool
from benchmarks.switch_snmp import SwitchPortReading, SwitchUnreachable, read_ports
from tests.benchmarks.conftest import Lab, private_lab_spec, require_lab_prerequisites

# waits: mostly waits on real time; make test runs it in the waiting lane (scripts/test_shards.py).
pytestmark = [pytest.mark.lab, pytest.mark.waits]

MIB = 2**20
PAYLOAD = 50 * MIB
# iperf3 -n stops at the first write that reaches the count; after a short write the blocks
# no longer end on it, so the last one can carry the total past it (CI saw 52,500,568 sent).
BLOCK = 128 * 1024
SETTLE_S = snmpd.COUNTER_CACHE_S + 0.5
IPERF_PORT = 5301


def switch_ports(lab: Lab, *names: str, timeout_s: float = 2.0) -> dict[str, SwitchPortReading]:
    state = lab.state
    return read_ports(
        address=state.snmp_address,
        port=state.snmp_port,
        community=state.snmp_community,
        if_names=set(names) or None,
        timeout_s=timeout_s,
    )


def settled_in_octets(lab: Lab, port: str) -> int:
    """The port's ifHCInOctets once the agent's counter cache has caught up."""
    time.sleep(SETTLE_S)
    return switch_ports(lab, port)[port].in_octets


def tx_bytes(namespace: str) -> int:
    return int(in_netns(namespace, "cat", "/sys/class/net/data0/statistics/tx_bytes"))


def iperf_server(lab: Lab, host: str, port: int) -> subprocess.Popen[bytes]:
    h = lab.host(host)
    server = subprocess.Popen(
        ["ip", "netns", "exec", h.namespace, "iperf3", "-s", "-1", "-B", h.data_address,
         "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ready = f"ss -Hltn 'sport = :{port}' | grep -q ."
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if subprocess.run(["ip", "netns", "exec", h.namespace, "sh", "-c", ready]).returncode == 0:
            return server
        time.sleep(0.05)
    server.kill()
    raise AssertionError(f"iperf3 server on {host} did not listen")


async def ssh_run(lab: Lab, host: str, command: str) -> str:
    transport = lab.transport(host)
    await transport.connect()
    try:
        result = await transport.run(command, timeout_s=60)
    finally:
        await transport.close()
    assert result.exit_code == 0, f"{command}: {result.exit_code} {result.stderr}"
    return result.stdout


# --- the agent ------------------------------------------------------------------------------


def test_snmpd_reports_every_host_port_and_counts_what_the_host_sent(lab: Lab) -> None:
    state = lab.state
    readings = switch_ports(lab)
    for index, host in enumerate(state.hosts, start=1):
        assert host.switch_port == f"h{index}-data"
        assert readings[host.switch_port].oper_up, readings[host.switch_port]
    assert {"l1-up", "l2-up", "l1-down", "l2-down"} <= set(readings)

    h1, h2 = lab.host("lab-h1"), lab.host("lab-h2")
    switch_before = settled_in_octets(lab, "h1-data")
    host_before = tx_bytes(h1.namespace)
    server = iperf_server(lab, "lab-h2", IPERF_PORT)
    try:
        out = in_netns(h1.namespace, "iperf3", "-c", h2.data_address, "-p", str(IPERF_PORT),
                       "-n", str(PAYLOAD), "-J")  # fmt: skip
    finally:
        server.wait(timeout=10)
    # iperf3 -n stops once the client has written PAYLOAD bytes; what the server had not
    # received by then is dropped with the connection. The payload carried is what arrived.
    delivered = json.loads(out)["end"]["sum_received"]["bytes"]
    switch_saw = settled_in_octets(lab, "h1-data") - switch_before
    host_sent = tx_bytes(h1.namespace) - host_before
    report = f"switch saw {switch_saw}, host sent {host_sent}, delivered {delivered}"
    assert delivered >= 0.8 * PAYLOAD, report
    assert switch_saw >= delivered, report
    assert abs(switch_saw - host_sent) <= 0.03 * host_sent, report


def test_wrong_community_is_unreachable_fast(lab: Lab) -> None:
    state = lab.state
    started = time.monotonic()
    with pytest.raises(SwitchUnreachable, match="community"):
        read_ports(
            address=state.snmp_address,
            port=state.snmp_port,
            community="not-" + state.snmp_community,
            timeout_s=0.5,
            retries=0,
        )
    assert time.monotonic() - started < 2


def test_hosts_cannot_read_the_switch(lab: Lab) -> None:
    """The agent answers the poller (the root namespace) only, even with the community."""
    state = lab.state
    script = (
        "from benchmarks.switch_snmp import read_ports, SwitchUnreachable\n"
        "try:\n"
        f"    read_ports(address={state.snmp_address!r}, port={state.snmp_port},"
        f" community={state.snmp_community!r}, timeout_s=0.5, retries=0)\n"
        "except SwitchUnreachable:\n"
        "    print('refused')\n"
        "else:\n"
        "    print('answered')\n"
    )
    out = in_netns(lab.host("lab-h1").namespace, sys.executable, "-c", script)
    assert out.strip() == "refused"


def test_status_shows_the_agent(lab: Lab) -> None:
    current = netlab.status(lab.state_dir)
    assert current.up and current.snmpd_pid
    out = io.StringIO()
    with redirect_stdout(out):
        assert netlab_cli(["status", "--state-dir", str(lab.state_dir)]) == 0
    snmp = json.loads(out.getvalue())["snmp"]
    assert snmp["community"] == lab.state.snmp_community
    assert snmp["address"] == lab.state.snmp_address
    assert (Path(lab.state_dir) / "lab.json").stat().st_mode & 0o777 == 0o600
    assert (Path(lab.state_dir) / "snmpd" / "snmpd.conf").stat().st_mode & 0o777 == 0o600


# --- faults ---------------------------------------------------------------------------------


@pytest.fixture
def lab_var_dir(lab: Lab, settings: object, tmp_path: Path) -> Path:
    """`manage.py netlab` works on VAR_DIR/netlab: point that at the session lab."""
    (tmp_path / "netlab").symlink_to(lab.state_dir)
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]
    return tmp_path


def test_flap_moves_carrier_changes_and_the_port_comes_back_up(lab: Lab, lab_var_dir) -> None:
    namespace = lab.host("lab-h2").namespace
    before = netlab.carrier_changes(namespace)
    out = io.StringIO()
    started = time.monotonic()
    call_command("netlab", "flap", "lab-h2", "--count", "3", "--interval", "2", "--down", "0.5",
                 stdout=out)  # fmt: skip
    took = time.monotonic() - started
    assert netlab.carrier_changes(namespace) - before == 6
    assert "carrier_changes +6" in out.getvalue()
    assert 4 <= took < 10, took  # flaps 2 s apart: the last starts 4 s after the first
    deadline = time.monotonic() + SETTLE_S + 3
    while not switch_ports(lab, "h2-data")["h2-data"].oper_up:
        assert time.monotonic() < deadline, "h2-data stayed down after the flaps"
        time.sleep(0.5)
    # The library call reports the same.
    assert netlab.flap(lab.state_dir, "lab-h2", count=1, interval_s=1, down_s=0.2) == 2


def test_flap_refuses_nonsense(lab: Lab) -> None:
    with pytest.raises(ValueError):
        netlab.flap(lab.state_dir, "lab-h2", count=0)
    with pytest.raises(ValueError):
        netlab.flap(lab.state_dir, "lab-h2", interval_s=1, down_s=2)
    with pytest.raises(netlab.LabError, match="no host"):
        netlab.flap(lab.state_dir, "lab-h9")


def _forged_run(lab: Lab) -> tuple[dict, float]:
    """iperf3 lab-h3 -> lab-h4 over SSH (as probes run it): its JSON report, and the rate
    the switch counted on lab-h3's port over the run."""
    h4 = lab.host("lab-h4")
    before = settled_in_octets(lab, "h3-data")
    server = iperf_server(lab, "lab-h4", IPERF_PORT + 1)
    try:
        command = f"iperf3 -c {h4.data_address} -p {IPERF_PORT + 1} -n {PAYLOAD} -J"
        out = asyncio.run(ssh_run(lab, "lab-h3", command))
    finally:
        server.wait(timeout=10)
    report = json.loads(out)
    seconds = report["end"]["sum_received"]["seconds"]
    switch_bps = (settled_in_octets(lab, "h3-data") - before) * 8 / seconds
    return report, switch_bps


def test_forge_halves_what_iperf3_reports_not_what_the_switch_counts(lab: Lab, lab_var_dir) -> None:
    call_command("netlab", "forge", "lab-h3", "--factor", "0.5", stdout=io.StringIO())
    try:
        assert netlab.forged_factor(lab.state_dir, "lab-h3") == 0.5
        forged, switch_bps = _forged_run(lab)
    finally:
        call_command("netlab", "forge", "lab-h3", "--factor", "1", stdout=io.StringIO())
    # What probes use: the receiver's rate in the sender's report (end.sum_received).
    end = forged["end"]
    assert PAYLOAD // 2 <= end["sum_sent"]["bytes"] < PAYLOAD // 2 + BLOCK
    ratio = end["sum_received"]["bits_per_second"] / switch_bps
    assert 0.45 <= ratio <= 0.55, ratio
    assert end["sum_sent"]["bits_per_second"] / switch_bps <= 0.6
    in_intervals = sum(i["sum"]["bytes"] for i in forged["intervals"])
    assert abs(in_intervals - PAYLOAD / 2) <= 0.1 * PAYLOAD / 2
    # Not forged: another host, and lab-h3 again once forge --factor 1 ran.
    assert netlab.forged_factor(lab.state_dir, "lab-h3") is None
    honest, switch_bps = _forged_run(lab)
    assert PAYLOAD <= honest["end"]["sum_sent"]["bytes"] < PAYLOAD + BLOCK
    ratio = honest["end"]["sum_received"]["bits_per_second"] / switch_bps
    assert 0.95 <= ratio <= 1.01, ratio


def test_forge_applies_to_ssh_sessions_only_and_keeps_exit_status(lab: Lab) -> None:
    netlab.forge(lab.state_dir, "lab-h1", 0.5)
    try:
        found = asyncio.run(ssh_run(lab, "lab-h1", "command -v iperf3"))
        assert found.strip() == str(Path(lab.state.state_dir) / "forge" / "lab-h1" / "iperf3")
        assert asyncio.run(ssh_run(lab, "lab-h2", "command -v iperf3")).strip() == (
            "/usr/bin/iperf3"
        )
        transport = lab.transport("lab-h1")

        async def bad_option() -> int | None:
            await transport.connect()
            try:
                return (await transport.run("iperf3 --no-such-option -J", timeout_s=20)).exit_code
            finally:
                await transport.close()

        assert asyncio.run(bad_option()) == 1
    finally:
        netlab.forge(lab.state_dir, "lab-h1", 1)
    with pytest.raises(ValueError):
        netlab.forge(lab.state_dir, "lab-h1", 0)


@pytest.mark.django_db
def test_register_lab_points_the_witness_at_the_lab_switches(lab: Lab, settings) -> None:
    from benchmarks.lab_registry import register_lab
    from leases.models import NicPort, Switch

    settings.PROBE_SSH_KEY = Path(lab.state.client_key_path)
    state = lab.state
    register_lab(state)
    for leaf in Switch.objects.filter(fabric__name="lab-fabric", name__in=state.leaves):
        assert leaf.management_address == state.snmp_address
        assert (leaf.snmp_port, leaf.snmp_community) == (state.snmp_port, state.snmp_community)
    spine = Switch.objects.get(fabric__name="lab-fabric", name="spine")
    assert spine.snmp_community == ""
    ports = dict(
        NicPort.objects.filter(node__hostname__startswith="lab-h").values_list(
            "node__hostname", "switch_port"
        )
    )
    assert ports == {h.name: h.switch_port for h in state.hosts}


# --- lifecycle ------------------------------------------------------------------------------


def _snmpd_processes(state_dir: Path) -> str:
    return run_tool(["pgrep", "-a", "-f", f"snmpd .*{state_dir}"], check=False)


def test_down_and_the_reaper_stop_snmpd(tmp_path: Path) -> None:
    require_lab_prerequisites()
    state_dir = tmp_path / "witness"
    spec = private_lab_spec(state_dir, kind="u", hosts=2, leaves=1)
    try:
        state = netlab.up(spec)
        pid = snmpd.running_pid(state_dir)
        assert pid and _snmpd_processes(state_dir)
        listening = in_netns(state.fabric_namespace, "ss", "-Hlun")
        assert f"{state.snmp_address}:{state.snmp_port}" in listening
        assert len(listening.strip().splitlines()) == 1  # that address only
        # What the stale-lab reaper does (conftest._reap_stale_test_labs): destroy by prefix.
        destroy(spec.prefix, spec.root_interface)
        assert not os.path.exists(f"/proc/{pid}") or snmpd.running_pid(state_dir) is None
        assert _snmpd_processes(state_dir) == ""
        state = netlab.up(spec)
        assert read_ports(
            address=state.snmp_address, community=state.snmp_community, if_names={"h1-data"}
        )["h1-data"].oper_up
        pid = snmpd.running_pid(state_dir)
        assert pid
    finally:
        netlab.down(state_dir)
    assert snmpd.running_pid(state_dir) is None
    assert _snmpd_processes(state_dir) == ""
    assert not state_dir.exists()
