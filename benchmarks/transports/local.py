"""Runs commands on this machine via subprocess, optionally inside a network namespace.

Used for loopback demo nodes and for lab hosts addressed by namespace. Same semantics as
the SSH transport: ``sh -c`` command, per-command timeout that kills the whole process group,
per-stream output cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess

from benchmarks.transports._output import OutputCollector
from benchmarks.transports.background import BackgroundProcess, start_background
from benchmarks.transports.base import (
    DEFAULT_MAX_LIFETIME_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandResult,
    CommandTimeout,
    TransportError,
)


class LocalTransport:
    """Local subprocess transport; ``netns`` runs every command via ``ip netns exec NAME``."""

    def __init__(self, *, netns: str | None = None, kill_grace_s: float = 1.0) -> None:
        self.netns = netns
        self.kill_grace_s = kill_grace_s

    @property
    def label(self) -> str:
        return f"netns:{self.netns}" if self.netns else "local"

    def _argv(self, command: str) -> list[str]:
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        return [*prefix, "/bin/sh", "-c", command]

    async def run(
        self,
        command: str,
        *,
        timeout_s: float,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        collector = OutputCollector(command, max_output_bytes)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv(command),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise TransportError(f"cannot start command on {self.label}: {exc}") from exc
        assert proc.stdout is not None and proc.stderr is not None
        try:
            await asyncio.wait_for(
                asyncio.gather(collector.drain(proc.stdout, proc.stderr), proc.wait()),
                timeout_s,
            )
        except TimeoutError:
            await self._kill_group(proc)
            raise CommandTimeout(
                f"command timed out after {timeout_s:g}s on {self.label} and was killed",
                partial=collector.result(None),
                timeout_s=timeout_s,
            ) from None
        except BaseException:
            await self._kill_group(proc)
            raise
        code = proc.returncode
        return collector.result(code if code is not None and code >= 0 else None)

    async def _kill_group(self, proc: asyncio.subprocess.Process) -> None:
        """SIGTERM the command's process group, SIGKILL it after the grace period."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                await asyncio.wait_for(asyncio.shield(proc.wait()), self.kill_grace_s)
            except TimeoutError:
                continue
            # The leader is gone; make sure nothing else in its group survives.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            return

    async def start(
        self,
        command: str,
        *,
        max_lifetime_s: float = DEFAULT_MAX_LIFETIME_S,
        before: str = "",
        ready: str = "",
    ) -> BackgroundProcess:
        return await start_background(
            self, command, max_lifetime_s=max_lifetime_s, before=before, ready=ready
        )

    async def connect(self) -> None:
        return None

    async def close(self) -> None:
        return None
