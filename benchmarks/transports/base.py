"""Transport-neutral types: command results, errors and the transport protocols.

A transport runs shell commands on one node. The core API is asynchronous
(:class:`AsyncTransport`) so that a probe can drive several nodes at the same time;
:class:`benchmarks.transports.sync.SyncTransport` wraps it for plain synchronous callers
such as Celery tasks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from benchmarks.transports.background import BackgroundProcess
    from benchmarks.transports.sync import SyncBackgroundProcess

DEFAULT_MAX_OUTPUT_BYTES = 4 * 1024 * 1024
"""Default cap, per stream (stdout and stderr each), on the output kept from one command."""

DEFAULT_MAX_LIFETIME_S = 600.0
"""Default hard lifetime of a background process; it is killed on the node after this."""


@dataclass(frozen=True)
class CommandResult:
    """The outcome of one command.

    ``exit_code`` is ``None`` when the command ended without an exit status (killed by a
    signal, or the channel closed). ``truncated`` is true when stdout or stderr exceeded the
    output cap and was cut; the command still ran to completion.
    """

    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    truncated: bool

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


class TransportError(Exception):
    """Base class of every transport failure; ``reason`` is a short human-readable cause."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class HostUnreachable(TransportError):
    """The node could not be reached: connection refused, no route, connect timeout."""


class ConnectionLost(TransportError):
    """An established connection to the node broke while a command was running."""


class AuthenticationFailed(TransportError):
    """The node refused our client key."""


class HostKeyRejected(TransportError):
    """The node's host key is not the one recorded for it (or none is recorded).

    ``offered_key`` (OpenSSH public key text, e.g. ``"ssh-ed25519 AAAA..."``) and
    ``offered_fingerprint`` (``"SHA256:..."``) describe the key the node presented so that an
    operator can inspect and pin it; both are ``None`` if the node offered no usable key.
    """

    def __init__(
        self,
        reason: str,
        *,
        offered_key: str | None = None,
        offered_fingerprint: str | None = None,
        expected_fingerprint: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.offered_key = offered_key
        self.offered_fingerprint = offered_fingerprint
        self.expected_fingerprint = expected_fingerprint


class CommandTimeout(TransportError):
    """A command ran past its timeout and was killed; ``partial`` holds the output so far."""

    def __init__(self, reason: str, *, partial: CommandResult, timeout_s: float) -> None:
        super().__init__(reason)
        self.partial = partial
        self.timeout_s = timeout_s


class AsyncTransport(Protocol):
    """Runs commands on one node. Implementations: SSHTransport, LocalTransport."""

    @property
    def label(self) -> str:
        """A short name for logs and error messages (``root@198.19.0.11:22``, ``local``)."""
        ...

    async def run(
        self,
        command: str,
        *,
        timeout_s: float,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        """Run ``command`` with ``sh`` semantics and wait for it.

        Raises CommandTimeout (after killing the command) when it runs past ``timeout_s``.
        A non-zero exit status is not an error: it is returned in the result.
        """
        ...

    async def start(
        self,
        command: str,
        *,
        max_lifetime_s: float = DEFAULT_MAX_LIFETIME_S,
        before: str = "",
        ready: str = "",
    ) -> BackgroundProcess:
        """Start ``command`` in the background (e.g. an iperf3 server) and return a handle,
        after the shell command ``before`` and once the shell check ``ready`` passes, in
        one round trip (``start_background``).

        The process is killed on the node after ``max_lifetime_s`` even if nobody stops it.
        """
        ...

    async def connect(self) -> object:
        """Open the connection ahead of the first command (SSH: log in), or reuse the open
        one; a transport with nothing to open does nothing."""
        ...

    async def close(self) -> None:
        """Release connections. Background processes are not stopped by closing."""
        ...


class Transport(Protocol):
    """Synchronous transport interface (SyncTransport); same semantics as AsyncTransport."""

    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult: ...

    def start(
        self, command: str, *, max_lifetime_s: float = DEFAULT_MAX_LIFETIME_S
    ) -> SyncBackgroundProcess: ...

    def close(self) -> None: ...
