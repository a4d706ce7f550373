"""LocalTransport: subprocess with the same timeout, cap and background semantics as SSH."""

from __future__ import annotations

import asyncio
import time

import pytest

from benchmarks.transports import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandResult,
    CommandTimeout,
    LocalTransport,
    SyncTransport,
    run_sync,
)
from tests.benchmarks.conftest import Lab

HUNG = "sleep 30.75"
LIVE_HUNG = 'ps -eo stat=,args= | awk \'$1 !~ /^Z/ && $2 == "sleep" && $3 == "30.75"\''


def _run(
    command: str, *, timeout_s: float = 10, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
) -> CommandResult:
    transport = LocalTransport()
    return run_sync(transport.run(command, timeout_s=timeout_s, max_output_bytes=max_output_bytes))


def test_stdout_stderr_and_exit_status() -> None:
    result = _run("echo out; echo err >&2; exit 3")
    assert (result.exit_code, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert result.command == "echo out; echo err >&2; exit 3"
    assert not result.truncated and result.duration_s >= 0


def test_shell_semantics() -> None:
    assert _run("a=1; b=$((a+1)); echo $b | tr 2 z").stdout == "z\n"


def test_killed_by_signal_has_no_exit_code() -> None:
    assert _run("kill -KILL $$").exit_code is None


def test_timeout_kills_the_whole_process_group_quickly() -> None:
    started = time.monotonic()
    with pytest.raises(CommandTimeout) as excinfo:
        _run(f"echo begun; {HUNG} & {HUNG}", timeout_s=1)
    assert time.monotonic() - started < 3
    assert excinfo.value.partial.stdout == "begun\n"
    assert excinfo.value.partial.exit_code is None
    assert excinfo.value.timeout_s == 1
    assert _run(LIVE_HUNG).stdout == ""


def test_output_cap_truncates_each_stream() -> None:
    result = _run(
        "head -c 100000 /dev/zero | tr '\\0' x; head -c 3000 /dev/zero | tr '\\0' y >&2",
        max_output_bytes=1000,
    )
    assert result.truncated
    assert result.stdout == "x" * 1000 and result.stderr == "y" * 1000
    assert result.exit_code == 0


def test_output_under_the_cap_is_not_truncated() -> None:
    result = _run("printf 12345", max_output_bytes=5)
    assert (result.stdout, result.truncated) == ("12345", False)


def test_invalid_utf8_is_replaced_not_fatal() -> None:
    assert _run("printf 'a\\377b'").stdout == "a\ufffdb"


def test_background_process_stop_collects_output_and_kills_it() -> None:
    async def scenario() -> None:
        transport = LocalTransport()
        process = await transport.start(f"echo ready; echo warn >&2; {HUNG}")
        assert await process.is_running()
        result = await process.stop(grace_s=1)
        assert (result.stdout, result.stderr) == ("ready\n", "warn\n")
        assert result.exit_code == 143  # SIGTERM
        assert not await process.is_running()
        assert await process.stop() is result  # idempotent
        assert (await transport.run(LIVE_HUNG, timeout_s=5)).stdout == ""

    asyncio.run(scenario())


def test_background_process_that_ignores_sigterm_is_killed() -> None:
    async def scenario() -> None:
        process = await LocalTransport().start(f"trap '' TERM; {HUNG}")
        await asyncio.sleep(0.2)
        started = time.monotonic()
        result = await process.stop(grace_s=0.5)
        assert time.monotonic() - started < 3
        assert result.exit_code == 137  # SIGKILL

    asyncio.run(scenario())
    assert _run(LIVE_HUNG).stdout == ""


def test_background_process_finishing_on_its_own_keeps_its_status() -> None:
    async def scenario() -> None:
        process = await LocalTransport().start("echo done; exit 5")
        for _ in range(50):
            if not await process.is_running():
                break
            await asyncio.sleep(0.05)
        result = await process.stop()
        assert (result.exit_code, result.stdout) == (5, "done\n")

    asyncio.run(scenario())


def test_background_process_lifetime_is_enforced() -> None:
    async def scenario() -> None:
        process = await LocalTransport().start(HUNG, max_lifetime_s=1)
        await asyncio.sleep(1.8)
        assert not await process.is_running()
        assert (await process.stop()).exit_code == 124

    asyncio.run(scenario())


def test_sync_wrapper() -> None:
    with SyncTransport(LocalTransport()) as transport:
        assert transport.run("echo hi", timeout_s=5).stdout == "hi\n"
        with pytest.raises(CommandTimeout):
            transport.run(HUNG, timeout_s=0.5)
        with transport.start(HUNG) as process:
            assert process.is_running()
        assert not process.is_running()


def test_commands_run_concurrently() -> None:
    async def scenario() -> list[CommandResult]:
        transport = LocalTransport()
        return await asyncio.gather(*(transport.run("sleep 1", timeout_s=5) for _ in range(4)))

    started = time.monotonic()
    results = asyncio.run(scenario())
    assert time.monotonic() - started < 2.5
    assert all(r.ok for r in results)


def test_netns_transport_runs_inside_a_lab_host(lab: Lab) -> None:
    host = lab.host("lab-h2")
    transport = LocalTransport(netns=host.namespace)
    assert transport.label == f"netns:{host.namespace}"
    result = run_sync(transport.run("ip -4 -o addr show dev data0", timeout_s=5))
    assert host.data_address in result.stdout
