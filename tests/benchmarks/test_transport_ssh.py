"""SSHTransport against the real sshd of each lab host (needs the network lab: root)."""

from __future__ import annotations

import asyncio
import time

import asyncssh
import pytest

from benchmarks.netlab import rotate_host_key, start_sshd, stop_sshd
from benchmarks.transports import (
    DEFAULT_MAX_OUTPUT_BYTES,
    AuthenticationFailed,
    CommandResult,
    CommandTimeout,
    HostKeyRejected,
    HostUnreachable,
    SSHTarget,
    SSHTransport,
    SyncTransport,
    fetch_host_key,
    fingerprint,
)
from tests.benchmarks.conftest import Lab

# A distinctive duration, so that looking for leftovers cannot match anything else.
HUNG = "sleep 30.25"
LIVE_HUNG = 'ps -eo stat=,args= | awk \'$1 !~ /^Z/ && $2 == "sleep" && $3 == "30.25"\''


async def _run(
    transport: SSHTransport,
    command: str,
    *,
    timeout_s: float = 10,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
) -> CommandResult:
    """One command on a fresh transport, closed afterwards."""
    try:
        return await transport.run(command, timeout_s=timeout_s, max_output_bytes=max_output_bytes)
    finally:
        await transport.close()


def test_runs_commands_inside_the_host(lab: Lab) -> None:
    host = lab.host("lab-h1")
    result = asyncio.run(_run(lab.transport("lab-h1"), "id -un; ip -4 -o addr show dev data0"))
    assert result.exit_code == 0 and not result.truncated
    user, addresses = result.stdout.splitlines()
    assert user == "root"
    assert host.data_address in addresses


def test_exit_status_and_stderr_are_returned(lab: Lab) -> None:
    result = asyncio.run(_run(lab.transport("lab-h2"), "echo out; echo err >&2; exit 7"))
    assert (result.exit_code, result.stdout, result.stderr) == (7, "out\n", "err\n")
    assert not result.ok


def test_unknown_host_key_is_refused_and_offered_key_exposed(lab: Lab) -> None:
    host = lab.host("lab-h1")
    with pytest.raises(HostKeyRejected) as excinfo:
        asyncio.run(_run(lab.transport("lab-h1", host_key=None), "true"))
    error = excinfo.value
    assert error.reason.startswith("unknown host key")
    assert error.offered_key == host.host_public_key
    assert error.offered_fingerprint == fingerprint(host.host_public_key)
    assert error.offered_fingerprint in error.reason


def test_fetch_host_key_returns_the_key_to_pin(lab: Lab) -> None:
    host = lab.host("lab-h3")
    assert asyncio.run(fetch_host_key(host.mgmt_address, host.ssh_port)) == host.host_public_key


def test_a_different_host_key_is_refused(lab: Lab) -> None:
    other = lab.host("lab-h2").host_public_key
    with pytest.raises(
        HostKeyRejected, match=r"^host key changed: expected SHA256:\S+, got SHA256"
    ):
        asyncio.run(_run(lab.transport("lab-h1", host_key=other), "true"))


def test_rotated_host_key_is_refused_until_repinned(lab: Lab) -> None:
    old_key = lab.host("lab-h4").host_public_key
    new_key = rotate_host_key(lab.state_dir, "lab-h4")
    assert new_key != old_key
    with pytest.raises(HostKeyRejected, match=r"^host key changed") as excinfo:
        asyncio.run(_run(lab.transport("lab-h4", host_key=old_key), "true"))
    assert excinfo.value.offered_key == new_key
    assert excinfo.value.expected_fingerprint == fingerprint(old_key)
    result = asyncio.run(_run(lab.transport("lab-h4", host_key=new_key), "echo ok"))
    assert result.stdout == "ok\n"


def test_stopped_sshd_is_unreachable(lab: Lab) -> None:
    stop_sshd(lab.state_dir, "lab-h3")
    try:
        with pytest.raises(HostUnreachable, match="connection refused"):
            asyncio.run(_run(lab.transport("lab-h3"), "true"))
    finally:
        start_sshd(lab.state_dir, "lab-h3")
    assert asyncio.run(_run(lab.transport("lab-h3"), "echo back")).stdout == "back\n"


def test_address_without_a_host_is_unreachable(lab: Lab) -> None:
    # Inside the lab's management subnet, but no host has this address.
    target = lab.target("lab-h1", host="198.19.200.99", connect_timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(HostUnreachable):
        asyncio.run(_run(SSHTransport(target), "true"))
    assert time.monotonic() - started < 8


def test_wrong_client_key_fails_authentication(lab: Lab) -> None:
    stranger = asyncssh.generate_private_key("ssh-ed25519").export_private_key().decode()
    target = lab.target("lab-h1", private_key_path=None, private_key_text=stranger)
    with pytest.raises(AuthenticationFailed):
        asyncio.run(_run(SSHTransport(target), "true"))


def test_hung_command_times_out_and_is_killed_on_the_node(lab: Lab) -> None:
    transport = lab.transport("lab-h2")

    async def scenario() -> tuple[CommandTimeout, float, str]:
        started = time.monotonic()
        try:
            await transport.run(f"echo started; {HUNG}", timeout_s=1)
        except CommandTimeout as exc:
            elapsed = time.monotonic() - started
            leftovers = await transport.run(LIVE_HUNG, timeout_s=10)
            return exc, elapsed, leftovers.stdout
        finally:
            await transport.close()
        raise AssertionError("no CommandTimeout")

    error, elapsed, leftovers = asyncio.run(scenario())
    assert elapsed < 4
    assert error.timeout_s == 1
    assert error.partial.stdout == "started\n"
    assert leftovers == ""


def test_output_is_capped(lab: Lab) -> None:
    command = "head -c 100000 /dev/zero | tr '\\0' x; head -c 5000 /dev/zero | tr '\\0' y >&2"
    result = asyncio.run(_run(lab.transport("lab-h1"), command, max_output_bytes=1000))
    assert result.truncated
    assert result.stdout == "x" * 1000 and result.stderr == "y" * 1000
    assert result.exit_code == 0


def test_background_process_is_stopped_and_cleaned_up(lab: Lab) -> None:
    transport = lab.transport("lab-h1")

    async def scenario() -> None:
        try:
            process = await transport.start(f"echo up; {HUNG}")
            assert await process.is_running()
            result = await process.stop()
            assert not await process.is_running()
            assert result.stdout == "up\n"
            assert result.exit_code not in (0, None)
            assert (await transport.run(LIVE_HUNG, timeout_s=10)).stdout == ""
            gone = await transport.run(f"test -e {process.workdir}", timeout_s=10)
            assert gone.exit_code == 1
        finally:
            await transport.close()

    asyncio.run(scenario())


def test_background_process_dies_after_its_lifetime(lab: Lab) -> None:
    transport = lab.transport("lab-h2")

    async def scenario() -> None:
        try:
            process = await transport.start(HUNG, max_lifetime_s=1)
            await asyncio.sleep(2)
            assert not await process.is_running()
            assert (await process.stop()).exit_code == 124  # coreutils timeout fired
        finally:
            await transport.close()

    asyncio.run(scenario())


def test_several_hosts_run_concurrently(lab: Lab) -> None:
    transports = [lab.transport(h.name) for h in lab.state.hosts]

    async def scenario() -> list[str]:
        try:
            results = await asyncio.gather(
                *(t.run("sleep 1; hostname -I", timeout_s=10) for t in transports)
            )
            return [r.stdout for r in results]
        finally:
            await asyncio.gather(*(t.close() for t in transports))

    started = time.monotonic()
    outputs = asyncio.run(scenario())
    assert time.monotonic() - started < 3
    for host, output in zip(lab.state.hosts, outputs, strict=True):
        assert host.data_address in output.split()


def test_sync_wrapper_keeps_one_connection(lab: Lab) -> None:
    with SyncTransport(lab.transport("lab-h3")) as transport:
        assert transport.run("echo one", timeout_s=5).stdout == "one\n"
        with transport.start("sleep 60") as process:
            assert process.is_running()
        assert not process.is_running()
        assert transport.run("echo two", timeout_s=5).stdout == "two\n"


def test_transport_reconnects_after_sshd_restart(lab: Lab) -> None:
    with SyncTransport(lab.transport("lab-h2")) as transport:
        assert transport.run("echo before", timeout_s=5).stdout == "before\n"
        start_sshd(lab.state_dir, "lab-h2")  # kills sshd and its sessions: our connection too
        assert transport.run("echo after", timeout_s=5).stdout == "after\n"


def test_transport_reconnects_in_a_new_event_loop(lab: Lab) -> None:
    transport = lab.transport("lab-h4")
    first = asyncio.run(transport.run("echo a", timeout_s=5))
    second = asyncio.run(_run(transport, "echo b"))
    assert (first.stdout, second.stdout) == ("a\n", "b\n")


def test_target_needs_exactly_one_client_key() -> None:
    with pytest.raises(ValueError):
        SSHTarget(host="198.18.0.1")
    with pytest.raises(ValueError):
        SSHTarget(host="198.18.0.1", private_key_path="/k", private_key_text="k")


def test_unparseable_recorded_key_is_refused(lab: Lab) -> None:
    with pytest.raises(HostKeyRejected, match="not a valid OpenSSH public key"):
        asyncio.run(_run(lab.transport("lab-h1", host_key="ssh-ed25519 garbage"), "true"))
