"""Background processes on a node (e.g. an iperf3 server), built on ``Transport.run``.

The process is started detached from the SSH channel, in its own process group, under
``timeout`` so that it dies on the node after ``max_lifetime_s`` even if the controller
crashes or loses the connection. Its stdout/stderr/exit status go to a private temporary
directory on the node, which :meth:`BackgroundProcess.stop` reads and removes.

Needs a POSIX ``sh`` plus coreutils ``timeout`` and ``mktemp`` on the node.
"""

from __future__ import annotations

import shlex
import time
from typing import TYPE_CHECKING

from benchmarks.transports.base import (
    DEFAULT_MAX_OUTPUT_BYTES,
    CommandResult,
    TransportError,
)

if TYPE_CHECKING:
    from types import TracebackType

    from benchmarks.transports.base import AsyncTransport

_CONTROL_TIMEOUT_S = 15.0
_KILL_AFTER_S = 5

# Runs `command` in the background; prints "<workdir> <pid>", pid being the process group
# of `timeout` (timeout makes itself a group leader, and so do the command's children).
_START_SCRIPT = """\
d=$(mktemp -d "${{TMPDIR:-/tmp}}/gpulease-bg.XXXXXXXX") || exit 97
(
  timeout -k {kill_after} {lifetime} sh -c {command} </dev/null >"$d/out" 2>"$d/err" &
  echo $! >"$d/pid"
  wait $!
  echo $? >"$d/rc"
) </dev/null >/dev/null 2>&1 &
i=0
while [ ! -s "$d/pid" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done
echo "$d $(cat "$d/pid")"
"""

# Kills the process group unless it already finished, waits for it, prints the exit status.
# "Finished" is judged by the rc file (written when `timeout` exits), not by `kill -0` on the
# group: orphaned zombies keep a group alive until init reaps them, which can take seconds.
_STOP_SCRIPT = """\
d={workdir}; p={pid}
i=0
# A process that is ending by itself (an iperf3 server after its one test) gets a moment.
while [ ! -e "$d/rc" ] && [ $i -lt 10 ]; do sleep 0.01; i=$((i+1)); done
if [ ! -e "$d/rc" ]; then
  kill -TERM -"$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null
  i=0
  while [ ! -e "$d/rc" ] && [ $i -lt {grace_ticks} ]; do
    sleep 0.05; i=$((i+1)); kill -TERM -"$p" 2>/dev/null  # again: a just-forked child may miss one
  done
fi
kill -KILL -"$p" 2>/dev/null
i=0
while [ ! -e "$d/rc" ] && [ $i -lt 50 ]; do sleep 0.05; i=$((i+1)); done
cat "$d/rc" 2>/dev/null || echo none
"""

_COLLECT_SCRIPT = 'd={workdir}; cat "$d/out"; cat "$d/err" >&2; rm -rf "$d"'
# After the start script: the process is up but its ``ready`` check never passed.
_NOT_READY = 96


def _sh(script: str) -> str:
    return "sh -c " + shlex.quote(script)


class NotReady(TransportError):
    """The background command started, but its ``ready`` check never passed (it was
    stopped again)."""


async def start_background(
    transport: AsyncTransport,
    command: str,
    *,
    max_lifetime_s: float,
    before: str = "",
    ready: str = "",
) -> BackgroundProcess:
    """Start ``command`` on the node behind ``transport``; see the module docstring.
    ``before``: a shell command run first; ``ready``: a shell check that must pass before
    this returns (raises NotReady, the process stopped, when it does not). All in one
    command on the node: one round trip, however slow the link."""
    lifetime = max(1, int(max_lifetime_s + 0.999))
    script = _START_SCRIPT.format(
        kill_after=_KILL_AFTER_S, lifetime=lifetime, command=shlex.quote(command)
    )
    if before:
        script = f"{before}\n{script}"
    if ready:
        script += f"{ready} || exit {_NOT_READY}\n"
    result = await transport.run(_sh(script), timeout_s=_CONTROL_TIMEOUT_S)
    fields = result.stdout.split()
    started = len(fields) == 2 and fields[1].isdigit()
    if started and result.exit_code == _NOT_READY and ready:
        process = BackgroundProcess(transport, command, workdir=fields[0], pid=int(fields[1]))
        await process.stop()
        raise NotReady(f"{command!r} on {transport.label} started but never became ready")
    if result.exit_code != 0 or not started:
        raise TransportError(
            f"could not start background command on {transport.label}: "
            f"exit {result.exit_code}, {result.stdout.strip()!r} {result.stderr.strip()!r}"
        )
    return BackgroundProcess(transport, command, workdir=fields[0], pid=int(fields[1]))


class BackgroundProcess:
    """Handle on a process started by :func:`start_background`.

    Use ``await proc.stop()`` (idempotent) or ``async with proc:`` to stop it and collect its
    output. Stopping sends SIGTERM to its process group, then SIGKILL after ``grace_s``.
    """

    def __init__(self, transport: AsyncTransport, command: str, *, workdir: str, pid: int):
        self.transport = transport
        self.command = command
        self.workdir = workdir
        self.pid = pid
        self._started = time.monotonic()
        self._result: CommandResult | None = None

    def __repr__(self) -> str:
        return f"<BackgroundProcess {self.command!r} pid={self.pid} on {self.transport.label}>"

    async def is_running(self) -> bool:
        if self._result is not None:
            return False
        check = f"test -e {shlex.quote(self.workdir + '/rc')}"
        result = await self.transport.run(check, timeout_s=_CONTROL_TIMEOUT_S)
        return result.exit_code != 0

    async def stop(
        self, *, grace_s: float = 2.0, max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    ) -> CommandResult:
        """Stop the process (if still running) and return its output and exit status."""
        if self._result is not None:
            return self._result
        workdir = shlex.quote(self.workdir)
        stop = _STOP_SCRIPT.format(
            workdir=workdir, pid=self.pid, grace_ticks=max(1, int(grace_s * 20))
        )
        # Stopped and collected in one command: the exit status on the first line, then
        # what the process printed.
        collected = await self.transport.run(
            _sh(f"{stop}{_COLLECT_SCRIPT.format(workdir=workdir)}"),
            timeout_s=_CONTROL_TIMEOUT_S + grace_s,
            max_output_bytes=max_output_bytes,
        )
        status, _newline, output = collected.stdout.partition("\n")
        status = status.strip()
        self._result = CommandResult(
            command=self.command,
            exit_code=int(status) if status.lstrip("-").isdigit() else None,
            stdout=output,
            stderr=collected.stderr,
            duration_s=time.monotonic() - self._started,
            truncated=collected.truncated,
        )
        return self._result

    @property
    def result(self) -> CommandResult | None:
        """The result once :meth:`stop` has run, else ``None``."""
        return self._result

    async def __aenter__(self) -> BackgroundProcess:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
