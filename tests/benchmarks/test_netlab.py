"""The network lab: its plan (pure), its lifecycle, and real iperf3 traffic through it.

Rates are 1 Gbit host links and 1 Gbit leaf uplinks (2 hosts per leaf, 2:1 oversubscribed).
Data links use 9000-byte frames, so TCP goodput can reach ~99% of the shaped rate.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from benchmarks.netlab import (
    LabError,
    LabSpec,
    LabUnavailable,
    check_prerequisites,
    down,
    format_rate,
    load_state,
    parse_rate,
    set_host_rate,
    status,
    up,
)
from benchmarks.netlab import shell as netlab_shell
from benchmarks.netlab.__main__ import main as netlab_cli
from benchmarks.netlab.network import namespaces_with_prefix
from benchmarks.netlab.shell import run as run_tool
from benchmarks.netlab.spec import LAB_RANGE, plan_hosts
from tests.benchmarks import conftest as lab_conftest
from tests.benchmarks.conftest import (
    Lab,
    Measured,
    iperf_pairs,
    private_lab_spec,
    require_lab_prerequisites,
)

GBIT = 1_000_000_000


# --- pure: spec and plan --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bps"),
    [("1gbit", GBIT), ("400mbit", 400_000_000), ("1.5Gbit", 1_500_000_000), ("2500", 2500)],
)
def test_parse_rate(text: str, bps: int) -> None:
    assert parse_rate(text) == bps


@pytest.mark.parametrize("text", ["1gbps", "fast", "-1gbit", "0", "1 gigabit"])
def test_parse_rate_rejects_bytes_and_nonsense(text: str) -> None:
    with pytest.raises(ValueError):
        parse_rate(text)


def test_format_rate() -> None:
    assert [format_rate(b) for b in (GBIT, 400_000_000, 1_500_000, 7)] == [
        "1gbit",
        "400mbit",
        "1500kbit",
        "7bit",
    ]


def test_default_plan_is_two_leaves_of_two_hosts(tmp_path: Path) -> None:
    spec = LabSpec(state_dir=tmp_path, degrade={"lab-h2": "400mbit"})
    plans = plan_hosts(spec)
    assert [(p.name, p.namespace, p.leaf) for p in plans] == [
        ("lab-h1", "gpl-h1", "leaf1"),
        ("lab-h2", "gpl-h2", "leaf1"),
        ("lab-h3", "gpl-h3", "leaf2"),
        ("lab-h4", "gpl-h4", "leaf2"),
    ]
    assert [p.data_address for p in plans] == [f"198.18.0.{i}" for i in (11, 12, 13, 14)]
    assert [p.mgmt_address for p in plans] == [f"198.19.0.{i}" for i in (11, 12, 13, 14)]
    assert [p.rate_bps for p in plans] == [GBIT, 400_000_000, GBIT, GBIT]
    assert spec.root_mgmt_address == "198.19.0.1"


@pytest.mark.parametrize(
    "overrides",
    [
        {"data_subnet": "10.0.0.0/24"},
        {"mgmt_subnet": "192.168.1.0/24"},
        {"mgmt_subnet": "198.18.0.0/24"},  # overlaps the data subnet
        {"degrade": {"lab-h9": "1mbit"}},
        {"degrade": {"lab-h1": "1gbps"}},
        {"prefix": "Bad-Prefix"},
        {"hosts": 2, "leaves": 3},
    ],
)
def test_spec_rejects_bad_settings(tmp_path: Path, overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LabSpec(state_dir=tmp_path, **overrides)  # type: ignore[arg-type]


def test_every_planned_address_is_in_the_lab_range(tmp_path: Path) -> None:
    import ipaddress

    spec = LabSpec(state_dir=tmp_path, hosts=8, leaves=4)
    for plan in plan_hosts(spec):
        for address in (plan.data_address, plan.mgmt_address):
            assert ipaddress.ip_address(address) in LAB_RANGE


def test_prerequisites_name_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netlab_shell.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(netlab_shell.shutil, "which", lambda tool: None)
    monkeypatch.setattr(netlab_shell, "SSHD", "/nonexistent/sshd")
    with pytest.raises(LabUnavailable) as excinfo:
        check_prerequisites()
    message = str(excinfo.value)
    assert message.startswith("netlab needs root")
    for word in ("root privileges", "`ip`", "`tc`", "`iperf3`", "/nonexistent/sshd"):
        assert word in message


def test_up_refuses_without_prerequisites(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(netlab_shell.os, "geteuid", lambda: 1000)
    with pytest.raises(LabUnavailable, match="netlab needs root"):
        up(LabSpec(state_dir=tmp_path / "lab"))
    assert not (tmp_path / "lab").exists()


def test_missing_prerequisites_skip_locally_but_fail_in_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lab_conftest, "missing_prerequisites", lambda: ["`iperf3`"])
    monkeypatch.setattr(lab_conftest, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match="iperf3"):
        lab_conftest.require_lab_prerequisites()
    monkeypatch.setattr(lab_conftest, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        lab_conftest.require_lab_prerequisites()


# --- lifecycle (root) -----------------------------------------------------------------------


def test_lifecycle_up_is_idempotent_and_down_leaves_no_trace(tmp_path: Path) -> None:
    require_lab_prerequisites()
    state_dir = tmp_path / "lifecycle"
    spec = private_lab_spec(state_dir, kind="u", degrade={"lab-h2": "400mbit"})
    p = spec.prefix
    try:
        started = time.monotonic()
        first = up(spec)
        first_up_s = time.monotonic() - started
        second = up(spec)  # rebuilds: same layout, fresh host keys
        assert status(state_dir).up
        assert [h.name for h in second.hosts] == ["lab-h1", "lab-h2", "lab-h3", "lab-h4"]
        assert first.host("lab-h1").host_public_key != second.host("lab-h1").host_public_key
        expected = [f"{p}-fabric", f"{p}-h1", f"{p}-h2", f"{p}-h3", f"{p}-h4"]
        assert sorted(namespaces_with_prefix(p)) == expected
        degraded = run_tool(["tc", "-n", f"{p}-h2", "class", "show", "dev", "data0"])
        assert "rate 400Mbit" in degraded
        normal = run_tool(["tc", "-n", f"{p}-h1", "class", "show", "dev", "data0"])
        assert "rate 1Gbit" in normal
        assert second.host("lab-h2").rate_bps == 400_000_000
        assert first_up_s < 15
    finally:
        started = time.monotonic()
        removed = down(state_dir)
        down_s = time.monotonic() - started
    assert f"{p}-fabric" in removed
    assert namespaces_with_prefix(p) == []
    assert run_tool(["ip", "link", "show", f"{p}-mgmt"], check=False) == ""
    assert not state_dir.exists()
    assert run_tool(["pgrep", "-f", str(state_dir)], check=False) == ""  # no sshd left
    assert down_s < 15
    assert down(state_dir) == []  # nothing left: still fine


def test_status_and_state_file(lab: Lab) -> None:
    current = status(lab.state_dir)
    assert current.up
    assert all(h.sshd_pid and h.ssh_port_open and h.namespace_present for h in current.hosts)
    state = load_state(lab.state_dir)
    assert state is not None and state.prefix.startswith("gt")
    assert {h.leaf for h in state.hosts} == {"leaf1", "leaf2"}
    assert Path(state.client_key_path).is_file()


def test_cli_status_reports_json(lab: Lab) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        code = netlab_cli(["status", "--state-dir", str(lab.state_dir)])
    assert code == 0
    assert json.loads(out.getvalue())["up"] is True


def test_management_path_is_not_shaped(lab: Lab) -> None:
    host = lab.host("lab-h1")
    mgmt = run_tool(["tc", "-n", host.namespace, "qdisc", "show", "dev", "mgmt0"])
    data = run_tool(["tc", "-n", host.namespace, "qdisc", "show", "dev", "data0"])
    assert "htb" not in mgmt
    assert "htb" in data


def shaper_buckets(lab: Lab) -> dict[str, tuple[str, int, int]]:
    """Every shaped hop of the data network as tc shows it: rate, burst and cburst (bytes)."""
    state = lab.state
    hops = {f"{h.name} data0": (h.namespace, "data0") for h in state.hosts}
    hops.update({f"h{i}-data": (state.fabric_namespace, f"h{i}-data") for i in (1, 2, 3, 4)})
    for j in (1, 2):
        hops.update({port: (state.fabric_namespace, port) for port in (f"l{j}-up", f"l{j}-down")})
    buckets = {}
    for hop, (namespace, dev) in hops.items():
        shown = run_tool(["tc", "-n", namespace, "class", "show", "dev", dev])
        found = re.search(r"\brate (\S+) .*\bburst (\d+)b cburst (\d+)b", shown)
        assert found, f"{hop}: no HTB class in {shown!r}"
        buckets[hop] = (found.group(1), int(found.group(2)), int(found.group(3)))
    return buckets


def test_every_shaper_can_catch_up_10_ms_and_the_hosts_run_reno(lab: Lab) -> None:
    """Issue 34: HTB sends when its timer fires and the softirq runs, both late on a busy
    machine; with a 1 ms bucket (125,000 bytes at 1 Gbit/s) every millisecond later than that
    was lost for good, and healthy links carried 0.975-0.991 of the shaper through the probe
    (perf/README.md, "Lab fidelity"). 10 ms at 1 Gbit/s is 1,250,000 bytes. The hosts' TCP
    is the lab's own (Reno), not the root namespace's (BBR on the development machine)."""
    buckets = shaper_buckets(lab)
    assert len(buckets) == 12  # 4 hosts x 2 directions, 2 uplinks x 2 directions
    assert set(buckets.values()) == {("1Gbit", 1_250_000, 1_250_000)}, buckets
    for host in lab.state.hosts:
        tcp = run_tool(["ip", "netns", "exec", host.namespace, "sysctl", "-n",
                        "net.ipv4.tcp_congestion_control"])  # fmt: skip
        assert tcp.strip() == "reno", host.name


def test_set_host_rate_on_unknown_host_fails(lab: Lab) -> None:
    with pytest.raises(LabError, match="no host"):
        set_host_rate(lab.state_dir, "lab-h9", "1gbit")


# --- real traffic (root) --------------------------------------------------------------------


def reaches_link_rate(measured: Measured, rate: int = GBIT) -> bool:
    """The link carried its rate: some second reached 95 % of it (TCP over the shaped link
    carries 99 % when idle) and a stall did not take the mean below 80 %; see Measured."""
    return measured.best_second_bps >= 0.95 * rate and measured.bps >= 0.80 * rate


def test_same_leaf_pair_reaches_link_rate(lab: Lab) -> None:
    [measured] = asyncio.run(iperf_pairs(lab, [("lab-h1", "lab-h2")]))
    assert reaches_link_rate(measured), measured


# The receiver reads and drops what arrives on port 5299, while a packet socket on its data0
# notes the kernel's arrival time of every data packet: the first and the last of each
# connection's 1 MB, whenever this process gets to read them. 35: SO_TIMESTAMPNS on Linux.
_CATCH_UP_RECEIVER = """
import select, socket, struct, sys
capture = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
capture.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE: keep every packet
capture.setsockopt(socket.SOL_SOCKET, 35, 1)
capture.bind(("data0", 0x0800))
listener = socket.create_server((sys.argv[1], 5299))
print("listening", flush=True)
conns, seen = [], {}
while sum(got >= 1_000_000 for _, _, got in seen.values()) < int(sys.argv[2]):
    for sock in select.select([listener, capture, *conns], [], [], 10)[0] or sys.exit(1):
        if sock is listener:
            conns.append(listener.accept()[0])
        elif sock is capture:
            frame, ancillary, _, _ = capture.recvmsg(128, 256)
            ip = frame[14:]
            ihl, total = (ip[0] & 15) * 4, struct.unpack("!H", ip[2:4])[0]
            source, destination = struct.unpack("!HH", ip[ihl : ihl + 4])
            payload = total - ihl - (ip[ihl + 12] >> 4) * 4
            if destination == 5299 and payload > 0:
                sec, ns = struct.unpack("qq", ancillary[0][2][:16])
                first, _, got = seen.get(source, (sec + ns / 1e9, 0, 0))
                seen[source] = (first, sec + ns / 1e9, got + payload)
        elif not sock.recv(1 << 20):
            conns.remove(sock)
for first, last, _ in seen.values():
    print((last - first) * 1e3)
"""
_CATCH_UP_SENDER = """
import socket, sys, time
for _ in range(int(sys.argv[3])):
    time.sleep(0.05)
    with socket.socket() as sender:
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        sender.bind((sys.argv[1], 0))
        sender.connect((sys.argv[2], 5299))
        sender.sendall(bytes(1_000_000))
"""


def test_a_shaper_that_fell_behind_catches_up_10_ms_at_once(lab: Lab) -> None:
    """Issue 34: after a quiet spell, as after a stall, the shaper holds 10 ms of its rate and
    sends it at once: 1 MB (8 ms at 1 Gbit/s) crosses lab-h1 > lab-h2 in 0.5-0.7 ms, first to
    last data packet as the receiver's kernel saw them. With the old 1 ms bucket it took at
    least 6.59 ms, as it must ((1 MB - 125 KB - one 62 KB segment) / 125 MB/s is 6.5 ms). A
    stall only makes a try slower: the best of 8 is judged."""
    client, server = lab.host("lab-h1"), lab.host("lab-h2")
    receiver = subprocess.Popen(
        ["ip", "netns", "exec", server.namespace, sys.executable, "-c", _CATCH_UP_RECEIVER,
         server.data_address, "8"], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert receiver.stdout is not None and receiver.stdout.readline() == "listening\n"
        run_tool(["ip", "netns", "exec", client.namespace, sys.executable, "-c",
                  _CATCH_UP_SENDER, client.data_address, server.data_address, "8"])  # fmt: skip
        out, _ = receiver.communicate(timeout=20)
    finally:
        receiver.kill()
    milliseconds = sorted(float(line) for line in out.split())
    assert len(milliseconds) == 8, out
    assert milliseconds[0] < 3.0, milliseconds


def test_degraded_host_measures_its_degraded_rate(lab: Lab) -> None:
    set_host_rate(lab.state_dir, "lab-h4", "400mbit")
    try:
        # Reshaped, both directions keep a 10 ms bucket at the new rate: 500,000 bytes.
        buckets = shaper_buckets(lab)
        assert buckets["lab-h4 data0"] == buckets["h4-data"] == ("400Mbit", 500_000, 500_000)
        [measured] = asyncio.run(iperf_pairs(lab, [("lab-h3", "lab-h4")]))
    finally:
        set_host_rate(lab.state_dir, "lab-h4", "1gbit")
    # The shaper is a ceiling: no second carries more than 400 Mbit/s, and most of it.
    assert measured.best_second_bps <= 0.45 * GBIT, measured
    assert reaches_link_rate(measured, 400_000_000), measured


def test_single_cross_leaf_pair_reaches_link_rate(lab: Lab) -> None:
    [measured] = asyncio.run(iperf_pairs(lab, [("lab-h2", "lab-h3")]))
    assert reaches_link_rate(measured), measured


def test_concurrent_cross_leaf_pairs_share_the_oversubscribed_uplink(lab: Lab) -> None:
    cross = asyncio.run(iperf_pairs(lab, [("lab-h1", "lab-h3"), ("lab-h2", "lab-h4")]))
    same = asyncio.run(iperf_pairs(lab, [("lab-h1", "lab-h2"), ("lab-h3", "lab-h4")]))
    report = f"cross {cross}, same {same}"
    for measured in cross:  # ~430-580 Mbit/s each: FIFO sharing is not perfectly fair
        assert 0.30 * GBIT <= measured.bps <= 0.70 * GBIT, report
    # The 1 Gbit uplink is the bottleneck (a little over: the runs' windows differ by ms).
    assert sum(measured.bps for measured in cross) <= 1.05 * GBIT, report
    for measured in same:
        assert reaches_link_rate(measured), report
