"""A hostile hostname, address, device name or port cannot run anything on a node.

Every command the planner can ask for (every probe kind on every technology) is built twice
from the same cluster: once with a harmless placeholder in one inventory field, once with a
hostile value there, the command-side checks switched off as if a bad row had reached the
database. Each is run the way the SSH transport has a node run it: the login shell gets
``timeout ... sh -c '<command>'``. Stub tools first in PATH record their argv. The hostile
run must record exactly what the placeholder run recorded, placeholder replaced by the
value: the same tools, the same number of arguments, the value whole inside one of them.
The payloads aim at a marker file (and a directory to delete); both are checked after.
"""

import asyncio
import dataclasses
import shlex
from pathlib import Path

import pytest

from benchmarks.choices import Pattern, Tool
from benchmarks.probes import arguments, commands, runner
from benchmarks.probes.plan import PlanNode, PlanPort, plan_batches
from benchmarks.transports import CommandResult, LocalTransport
from benchmarks.transports.background import start_background
from benchmarks.transports.ssh import remote_command
from leases.choices import LinkLayer, ProbeKind, Technology

PLACEHOLDER = "zzplaceholderzz"
PROBE_TOOLS = (
    "ethtool",
    "ib_write_bw",
    "ib_write_lat",
    "ibstatus",
    "iperf3",
    "mpirun",
    "ping",
    "grep",
)
# {m}: the marker a payload tries to create; {victim}: a directory it tries to delete.
HOSTILE = {
    "command substitution": "$(touch {m})",
    "backticks": "`touch {m}`",
    "semicolon": "x;touch {m}",
    "rm -rf": "; rm -rf {victim}",
    "and": "x && touch {m}",
    "pipe": "x|touch {m}",
    "redirection": "x>{m}",
    "single quote": "x';touch {m};'",
    "double quote": 'x";touch {m};"',
    "newline": "x\ntouch {m}",
    "glob": "*",
    "option": "-S",
    "backslash": "x\\ctouch",
    "IFS": "x${{IFS}}y",
}
# Names the kernel lets an administrator give (dev_valid_name has no quarrel with them), so
# the rules accept them and only the quoting stands between them and the shell. The RDMA
# device field is "mlx5_" + value (perftest takes the first mlx port), so "-S" is legal there.
LEGAL = {
    "interface name": {"glob", "backslash", "IFS"},
    "RDMA device": {"glob", "backslash", "IFS", "option"},
}


def plan_node(
    hostname: str,
    *,
    address: str | None = "198.18.0.11",
    rdma_device: str = "mlx5_0",
    ib_device: str | None = "mlx5_1",
    port: object = 1,
    netdev: str = "ens1f0np0",
    plain_netdev: str = "data0",
) -> PlanNode:
    """A RoCE port (the data address, perftest's device, `ethtool -S`), an InfiniBand
    port unless ib_device is None (ibstatus, sysfs counters) and a plain Ethernet port
    (netdev sysfs counters)."""
    roce = PlanPort(rdma_device, port, netdev, address, LinkLayer.ETHERNET, 100)  # type: ignore[arg-type]
    ib = PlanPort(ib_device or "", port, "", None, LinkLayer.INFINIBAND, 200)  # type: ignore[arg-type]
    plain = PlanPort("data0", 1, plain_netdev, None, LinkLayer.ETHERNET, 100)
    return PlanNode(hostname, "leaf1", 8, (roce, ib, plain) if ib_device else (roce, plain))


FIELDS = {
    "hostname": lambda v: {"hostname": v, "address": None},
    "data address": lambda v: {"address": v},
    "RDMA device": lambda v: {"rdma_device": "mlx5_" + v, "ib_device": "mlx5_" + v},
    "port number": lambda v: {"port": v},
    "interface name": lambda v: {"netdev": v, "plain_netdev": v},
}
# Which tools each field reaches: hand-derived from commands.py.
REACHES = {
    "hostname": {"mpirun"},
    "data address": {"iperf3", "ib_write_bw", "ib_write_lat", "ping", "mpirun"},
    "RDMA device": {"ibstatus", "cat", "grep", "ib_write_bw", "ib_write_lat"},
    "port number": {"ibstatus", "cat", "grep", "ib_write_bw", "ib_write_lat"},
    "interface name": {"ethtool", "cat", "grep"},
}


def cluster(field: str, value: str) -> dict[str, PlanNode]:
    """Node "a" (no InfiniBand port: its link check is ethtool's) and the target node with
    the value in one field. The target sorts last, so it is the server of the ring pair:
    every tool that takes an address gets its address."""
    target = {"hostname": "target", "address": "198.18.0.12", **FIELDS[field](value)}
    nodes = [plan_node("a", ib_device=None), plan_node(target.pop("hostname"), **target)]
    return {node.hostname: node for node in nodes}


def planned_runs(field: str):
    """Every run of every kind on every technology, planned for the placeholder cluster (a
    sweep as the node checks it runs); a hostile cluster reuses this plan with its node
    name swapped in, so that a name sorting differently cannot reorder it."""
    nodes = cluster(field, PLACEHOLDER)
    for technology in Technology:
        for kind in ProbeKind:
            for batch in plan_batches(kind=kind, nodes=list(nodes.values()), technology=technology):
                for index, run in enumerate(batch.runs):
                    if run.pattern == Pattern.SWEEP:
                        yield from ((index, check) for check in runner.node_checks(run))
                    else:
                        yield index, run


def test_the_plan_covers_every_tool():
    # The cluster has an InfiniBand port, so its link sweep is ibstatus's; node "a" has
    # none, and its link check runs ethtool (REACHES: the interface name reaches ethtool).
    assert {run.tool for _, run in planned_runs("data address")} == set(Tool) - {Tool.ETHTOOL}
    assert any("ethtool data0" in line for line in lines(built("data address", PLACEHOLDER)))


def built(field: str, value: str) -> list[tuple[str, str]]:
    """(server, client) command lines of every planned run, in plan order; "" where a run
    has no server side, ("", "") where it cannot be built (a refused value, or a pair whose
    server has no data address)."""
    nodes = cluster(field, value)
    runs = []
    for index, run in planned_runs(field):
        names = tuple(name.replace(PLACEHOLDER, value) for name in run.nodes)
        try:
            pair = runner.planned_commands(
                dataclasses.replace(run, nodes=names), index, nodes, runner.Options()
            )
        except arguments.UnsafeValue:
            runs.append(("", ""))
            continue
        runs.append((pair.server, pair.client))
    return runs


def lines(runs: list[tuple[str, str]]) -> list[str]:
    return [line for pair in runs for line in pair]


@pytest.fixture
def stubs(tmp_path, monkeypatch):
    """Stub probe tools (and cat) that write their argv, NUL-separated, to $STUB_LOG/<pid>."""
    directory = tmp_path / "stubs"
    directory.mkdir()
    for tool in (*PROBE_TOOLS, "cat"):
        stub = directory / tool
        stub.write_text('#!/bin/sh\nprintf "%s\\0" "${0##*/}" "$@" >"$STUB_LOG/$$"\n')
        stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}:/usr/bin:/bin")
    return directory


@pytest.fixture
def no_command_checks(monkeypatch):
    """As if the value had slipped past every validator: only the quoting is left."""
    monkeypatch.setattr(arguments, "checked", lambda check, value: value)


class LikeSshd:
    """Runs a command as a node's sshd would: the login shell -c the remote command."""

    label = "sshd-like"

    async def run(self, command: str, *, timeout_s: float, max_output_bytes: int = 1 << 20):
        remote = remote_command(command, timeout_s=timeout_s, kill_grace_s=1.0)
        return await LocalTransport().run(
            remote, timeout_s=timeout_s + 5, max_output_bytes=max_output_bytes
        )

    async def start(self, command: str, *, max_lifetime_s: float = 60.0):
        return await start_background(self, command, max_lifetime_s=max_lifetime_s)

    async def close(self) -> None:
        return None


def run_recorded(command: str, log: Path, monkeypatch) -> tuple[CommandResult, list[tuple]]:
    log.mkdir()
    monkeypatch.setenv("STUB_LOG", str(log))
    result = asyncio.run(LikeSshd().run(command, timeout_s=20))
    calls = [tuple(f.read_text().split("\0")[:-1]) for f in log.iterdir()]
    return result, sorted(calls)


def swapped(calls: list[tuple], value: str) -> list[tuple]:
    return sorted(tuple(arg.replace(PLACEHOLDER, value) for arg in call) for call in calls)


@pytest.mark.usefixtures("no_command_checks")
@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("payload", HOSTILE)
def test_a_hostile_value_reaches_the_tool_as_one_literal_argument(
    field, payload, stubs, tmp_path, monkeypatch
):
    marker, victim = tmp_path / "pwned", tmp_path / "victim"
    victim.mkdir()
    value = HOSTILE[payload].format(m=marker, victim=victim)
    monkeypatch.chdir(tmp_path)  # an unquoted * would match "pwned", "stubs", "victim"
    baseline, hostile = lines(built(field, PLACEHOLDER)), lines(built(field, value))
    assert [line == "" for line in baseline] == [line == "" for line in hostile]
    reached = set()
    runs = dict.fromkeys(zip(baseline, hostile, strict=True))  # same command: run once
    for i, (safe_line, hostile_line) in enumerate(runs):
        if not safe_line:
            continue
        safe, safe_calls = run_recorded(safe_line, tmp_path / f"safe{i}", monkeypatch)
        result, calls = run_recorded(hostile_line, tmp_path / f"hostile{i}", monkeypatch)
        assert calls == swapped(safe_calls, value), hostile_line
        assert result.stdout == safe.stdout.replace(PLACEHOLDER, value), hostile_line
        assert (result.stderr, result.exit_code) == ("", 0), hostile_line
        reached |= {call[0] for call in safe_calls if any(PLACEHOLDER in a for a in call)}
    assert reached == REACHES[field]
    assert not marker.exists()
    assert victim.is_dir()


def test_the_harness_sees_an_injection(stubs, tmp_path, monkeypatch):
    """The line this change replaced, `echo '# ethtool -S {netdev}'`, runs a payload that
    closes its quote; the same checks as above catch it."""
    marker = tmp_path / "pwned"
    netdev = HOSTILE["single quote"].format(m=marker)
    before = f"echo '# ethtool -S {netdev}'; ethtool -S {shlex.quote(netdev)}"
    result, calls = run_recorded(before, tmp_path / "log", monkeypatch)
    assert marker.exists()
    assert result.stdout == "# ethtool -S x\n"  # not the interface's name
    assert calls == [("ethtool", "-S", netdev)]


@pytest.mark.usefixtures("no_command_checks")
def test_mpirun_gets_the_host_list_as_one_argument(stubs, tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    hostname = f"$(touch {marker})"
    nodes = [plan_node(hostname, address=None), plan_node("b", address="198.18.0.12")]
    _, calls = run_recorded(commands.all_reduce(nodes), tmp_path / "log", monkeypatch)
    assert calls == [
        (
            "mpirun",
            "--allow-run-as-root",
            "-np",
            "16",
            "-H",
            f"$(touch {marker}):8,198.18.0.12:8",
            "-x",
            "NCCL_DEBUG=WARN",
            "all_reduce_perf",
            "-b",
            "8",
            "-e",
            "1G",
            "-f",
            "2",
            "-g",
            "1",
        )
    ]
    assert not marker.exists()


@pytest.mark.usefixtures("no_command_checks")
@pytest.mark.parametrize("payload", HOSTILE)
def test_a_background_server_survives_three_shells(payload, stubs, tmp_path, monkeypatch):
    """An iperf3 server runs detached: login shell, then `sh -c` of the start script, then
    `sh -c` of the command inside it. The address still arrives whole."""
    (stubs / "cat").unlink()  # the start and stop scripts read their files with cat
    marker, victim = tmp_path / "pwned", tmp_path / "victim"
    victim.mkdir()
    address = HOSTILE[payload].format(m=marker, victim=victim)
    server = plan_node("a", address=address)
    pair = commands.iperf3_pair(client=server, server=server, seconds=10, streams=1, port=5201)
    log = tmp_path / "log"
    log.mkdir()
    monkeypatch.setenv("STUB_LOG", str(log))

    async def start_and_stop():
        process = await LikeSshd().start(pair.server, max_lifetime_s=30)
        for _ in range(200):
            if any(log.iterdir()):
                break
            await asyncio.sleep(0.01)
        return await process.stop()

    result = asyncio.run(start_and_stop())
    calls = [tuple(f.read_text().split("\0")[:-1]) for f in log.iterdir()]
    assert calls == [("iperf3", "-s", "-1", "-p", "5201", "-B", address)]
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")
    assert not marker.exists()
    assert victim.is_dir()


# --- the checks in front of the quoting -------------------------------------------------


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("payload", HOSTILE)
def test_commands_are_built_only_from_values_the_rules_accept(
    field, payload, tmp_path, monkeypatch
):
    """Each run whose commands would carry the value is refused, unless the value is a name
    the kernel allows; the runs that do not carry it are built as before."""
    value = HOSTILE[payload].format(m=tmp_path / "pwned", victim=tmp_path / "victim")
    with monkeypatch.context() as unchecked:
        unchecked.setattr(arguments, "checked", lambda check, value: value)
        baseline = built(field, PLACEHOLDER)
    hostile = built(field, value)
    carrying = [i for i, pair in enumerate(baseline) if PLACEHOLDER in "".join(pair)]
    assert carrying
    legal = payload in LEGAL.get(field, set())
    assert [hostile[i] != ("", "") for i in carrying] == [legal] * len(carrying)
    others = [i for i in range(len(baseline)) if i not in carrying]
    assert [hostile[i] for i in others] == [baseline[i] for i in others]


@pytest.mark.parametrize(
    ("node", "reason"),
    [
        (
            plan_node("a", netdev="eth0 reboot"),
            "interface name 'eth0 reboot' has ' '; '/', ':', '%' and whitespace are refused",
        ),
        (
            plan_node("a", ib_device="-h"),
            "RDMA device name '-h' starts with '-', which a tool would take as an option",
        ),
        (
            plan_node("a", port="1;reboot"),
            "port number '1;reboot' is not a whole number from 1 to 255",
        ),
        (
            plan_node("a", ib_device="mlx5_0:2"),
            "RDMA device name 'mlx5_0:2' has ':'; '/', ':', '%' and whitespace are refused",
        ),
    ],
)
def test_a_node_check_refuses_with_the_reason(node, reason):
    with pytest.raises(arguments.UnsafeValue) as refused:
        commands.link_check(node)
    assert str(refused.value) == f"refusing to build the command: {reason}"


def test_a_pair_refuses_an_address_that_is_not_one():
    client, server = plan_node("a", address="$(reboot)"), plan_node("b", address="198.18.0.12")
    with pytest.raises(arguments.UnsafeValue) as refused:
        commands.ping_pair(client=client, server=server)
    assert str(refused.value) == "refusing to build the command: '$(reboot)' is not an IP address"


def test_a_pair_refuses_a_scoped_address():
    """ipaddress accepts any text as an IPv6 zone: fe80::1%$(reboot) parses."""
    client, server = plan_node("a", address="fe80::1%$(reboot)"), plan_node("b")
    with pytest.raises(arguments.UnsafeValue, match="has a zone index; give the address alone"):
        commands.ping_pair(client=client, server=server)


def test_a_pair_without_a_data_address_says_so():
    with pytest.raises(arguments.UnsafeValue) as refused:
        commands.ping_pair(client=plan_node("a", address=None), server=plan_node("b"))
    assert str(refused.value) == "refusing to build the command: node 'a' has no data address"


def test_all_reduce_refuses_a_hostname_that_is_not_one():
    nodes = [plan_node("node-01;reboot", address=None), plan_node("b")]
    with pytest.raises(arguments.UnsafeValue) as refused:
        commands.all_reduce(nodes)
    assert str(refused.value) == (
        "refusing to build the command: hostname 'node-01;reboot' has ';'; only letters, "
        "digits, hyphens and dots are allowed"
    )


def test_perftest_refuses_an_unknown_tool():
    with pytest.raises(arguments.UnsafeValue) as refused:
        commands.perftest_pair(
            tool="ib_write_bw;reboot",
            client=plan_node("a"),
            server=plan_node("b"),
            seconds=10,
            port=18515,
        )
    assert str(refused.value) == (
        "refusing to build the command: perftest tool 'ib_write_bw;reboot' is not one of "
        "ib_write_bw, ib_write_lat"
    )


def test_a_name_the_kernel_allows_is_built_quoted():
    assert commands.link_check(plan_node("a", netdev="eth0;reboot")).startswith(
        "printf '%s\\n' '### ethtool eth0;reboot'; ethtool 'eth0;reboot' 2>&1; "
        "printf '%s\\n' '### carrier_down_count eth0;reboot'; "
        "cat /sys/class/net/'eth0;reboot'/carrier_down_count 2>&1; "
    )


def test_the_runner_records_a_refusal_and_connects_to_nothing():
    nodes = {"a": plan_node("a", netdev="eth0 reboot")}
    batch = plan_batches(kind=ProbeKind.LINK, nodes=list(nodes.values()), technology="roce")[0]

    def connect(hostname):
        raise AssertionError(f"connected to {hostname}")

    [execution] = asyncio.run(
        runner.run_batch(runs=batch.runs, nodes=nodes, connect=connect, options=runner.Options())
    )
    # The sweep ran; its one node's check was refused before anything connected.
    [node] = execution.nodes
    assert (node.node, node.state, node.command, node.stdout) == ("a", "failed", "", "")
    assert node.error == (
        "refusing to build the command: interface name 'eth0 reboot' has ' '; '/', ':', '%' "
        "and whitespace are refused"
    )
