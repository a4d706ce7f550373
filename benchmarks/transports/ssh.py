"""SSH transport (asyncssh) with key authentication and strict host key pinning.

Host key policy: the node's host key must equal the key recorded for it (an OpenSSH public
key string such as ``"ssh-ed25519 AAAA..."``). No recorded key -> HostKeyRejected("unknown
host key ..."); a different key -> HostKeyRejected("host key changed ..."). Both carry the
offered key and its fingerprint so an operator can pin it (see also :func:`fetch_host_key`).
Neither ``~/.ssh/known_hosts``, ``~/.ssh/config`` nor an ssh-agent is consulted.

Timeouts: every command runs on the node as ``timeout -k GRACE T sh -c CMD``, so a hung
command and its process group are killed *on the node*; the client waits a little longer
(``T + GRACE + margin``) and, failing an answer, signals and closes the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from benchmarks.transports._output import OutputCollector
from benchmarks.transports.background import BackgroundProcess, start_background
from benchmarks.transports.base import (
    DEFAULT_MAX_LIFETIME_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    AuthenticationFailed,
    CommandResult,
    CommandTimeout,
    ConnectionLost,
    HostKeyRejected,
    HostUnreachable,
    TransportError,
)

_TIMEOUT_EXIT_CODES = (124, 137)  # coreutils timeout: TERM worked / needed KILL


@dataclass(frozen=True)
class SSHTarget:
    """Where and how to log in. Give exactly one of ``private_key_path``/``private_key_text``.

    ``host_key`` is the pinned OpenSSH public key of the node (``None``: not yet recorded,
    every connection is refused with HostKeyRejected).
    """

    host: str
    port: int = 22
    username: str = "root"
    host_key: str | None = None
    private_key_path: str | None = None
    private_key_text: str | None = None
    connect_timeout_s: float = 10.0
    keepalive_interval_s: float = 15.0

    def __post_init__(self) -> None:
        if (self.private_key_path is None) == (self.private_key_text is None):
            raise ValueError("give exactly one of private_key_path and private_key_text")

    @property
    def label(self) -> str:
        return f"{self.username}@{self.host}:{self.port}"


def openssh_public_key(key: asyncssh.SSHKey) -> str:
    """``"<algorithm> <base64>"`` without a comment."""
    fields = key.export_public_key("openssh").decode().split()
    return f"{fields[0]} {fields[1]}"


def fingerprint(key_text: str) -> str:
    """SHA256 fingerprint (``"SHA256:..."``) of an OpenSSH public key string."""
    return asyncssh.import_public_key(key_text).get_fingerprint("sha256")


def _parse_pinned(key_text: str | None) -> asyncssh.SSHKey | None:
    if key_text is None or not key_text.strip():
        return None
    try:
        return asyncssh.import_public_key(key_text.strip())
    except (asyncssh.KeyImportError, ValueError) as exc:
        raise HostKeyRejected(
            f"recorded host key is not a valid OpenSSH public key: {exc}"
        ) from exc


def _load_client_key(target: SSHTarget) -> asyncssh.SSHKey:
    try:
        if target.private_key_path is not None:
            return asyncssh.read_private_key(Path(target.private_key_path))
        assert target.private_key_text is not None
        return asyncssh.import_private_key(target.private_key_text)
    except (OSError, asyncssh.KeyImportError, ValueError) as exc:
        raise TransportError(f"cannot load the client private key: {exc}") from exc


class _PinningClient(asyncssh.SSHClient):
    """Accepts only the pinned host key and remembers what the server offered."""

    def __init__(self, pinned: asyncssh.SSHKey | None) -> None:
        self.pinned = pinned
        self.offered: asyncssh.SSHKey | None = None

    def validate_host_public_key(
        self, host: str, addr: str, port: int, key: asyncssh.SSHKey
    ) -> bool:
        self.offered = key
        return self.pinned is not None and key.public_data == self.pinned.public_data

    def rejection(self, target: SSHTarget) -> HostKeyRejected:
        offered = self.offered
        offered_text = openssh_public_key(offered) if offered else None
        offered_fp = offered.get_fingerprint("sha256") if offered else None
        expected_fp = self.pinned.get_fingerprint("sha256") if self.pinned else None
        if self.pinned is None:
            reason = f"unknown host key for {target.label}: offered {offered_fp}; pin it first"
        elif offered is None:
            reason = (
                f"host key changed: expected {expected_fp}, "
                f"got no {self.pinned.get_algorithm()} key from {target.label}"
            )
        else:
            reason = f"host key changed: expected {expected_fp}, got {offered_fp}"
        return HostKeyRejected(
            reason,
            offered_key=offered_text,
            offered_fingerprint=offered_fp,
            expected_fingerprint=expected_fp,
        )


def _unreachable(target: SSHTarget, exc: BaseException) -> HostUnreachable:
    if isinstance(exc, TimeoutError):
        reason = f"connect timeout after {target.connect_timeout_s:g}s"
    elif isinstance(exc, ConnectionRefusedError):
        reason = "connection refused"
    elif isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
    else:
        reason = str(exc) or type(exc).__name__
    return HostUnreachable(f"{target.label} unreachable: {reason}")


async def _connect(target: SSHTarget) -> asyncssh.SSHClientConnection:
    pinned = _parse_pinned(target.host_key)
    client_key = _load_client_key(target)
    client = _PinningClient(pinned)
    host_key_algs = [pinned.get_algorithm()] if pinned is not None else ()
    try:
        conn, _ = await asyncio.wait_for(
            asyncssh.create_connection(
                lambda: client,
                target.host,
                target.port,
                username=target.username,
                client_keys=[client_key],
                known_hosts=([], [], []),  # nothing trusted up front: the client decides
                server_host_key_algs=host_key_algs,
                config=None,
                agent_path=None,
                password=None,
                kbdint_auth=False,
                preferred_auth="publickey",
                connect_timeout=target.connect_timeout_s,
                keepalive_interval=target.keepalive_interval_s,
                keepalive_count_max=3,
            ),
            target.connect_timeout_s + 5,
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        raise client.rejection(target) from exc
    except asyncssh.KeyExchangeFailed as exc:
        if pinned is not None and "host key" in str(exc).lower():
            raise client.rejection(target) from exc
        raise HostUnreachable(f"{target.label}: key exchange failed: {exc}") from exc
    except asyncssh.PermissionDenied as exc:
        raise AuthenticationFailed(f"{target.label} refused our key: {exc}") from exc
    except (OSError, TimeoutError, asyncssh.Error) as exc:
        raise _unreachable(target, exc) from exc
    return conn


def remote_command(command: str, *, timeout_s: float, kill_grace_s: float) -> str:
    """What the SSH channel asks the node to run; sshd hands it to the login shell's -c, so
    ``command`` is quoted once more for that shell."""
    return f"timeout -k {kill_grace_s:.3f} {timeout_s:.3f} sh -c {shlex.quote(command)}"


class SSHTransport:
    """One node over SSH. The connection is opened lazily and shared by concurrent commands.

    A connection belongs to the event loop that opened it; used from another loop (e.g. a
    later ``asyncio.run``), the transport silently reconnects.
    """

    def __init__(
        self, target: SSHTarget, *, kill_grace_s: float = 2.0, client_margin_s: float = 5.0
    ) -> None:
        self.target = target
        self.kill_grace_s = kill_grace_s
        self.client_margin_s = client_margin_s
        self._conn: asyncssh.SSHClientConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    @property
    def label(self) -> str:
        return self.target.label

    async def connect(self) -> asyncssh.SSHClientConnection:
        """Open (or reuse) the connection; raises the connect-time errors of this module."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._drop_connection()
            self._loop, self._lock = loop, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            if self._conn is None or self._conn.is_closed():
                self._conn = await _connect(self.target)
            return self._conn

    def _drop_connection(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.abort()
        self._conn = None

    async def _open_session(self, remote_command: str) -> asyncssh.SSHClientProcess[bytes]:
        """Open a session channel running ``remote_command``.

        A cached connection may have died since its last use (node rebooted, sshd
        restarted); nothing has run yet then, so reconnect once and retry.
        """
        for attempt in (1, 2):
            conn = await self.connect()
            try:
                return await conn.create_process(
                    remote_command, encoding=None, stdin=asyncssh.DEVNULL
                )
            except (asyncssh.Error, OSError) as exc:
                self._drop_connection()
                if attempt == 2:
                    raise ConnectionLost(f"{self.label}: cannot open a session: {exc}") from exc
        raise AssertionError("unreachable")

    def _remote_command(self, command: str, timeout_s: float) -> str:
        return remote_command(command, timeout_s=timeout_s, kill_grace_s=self.kill_grace_s)

    async def run(
        self,
        command: str,
        *,
        timeout_s: float,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        # The clock starts before the session opens, so that a 124 from the node's `timeout`
        # is always seen at elapsed >= timeout_s below.
        collector = OutputCollector(command, max_output_bytes)
        process = await self._open_session(self._remote_command(command, timeout_s))
        client_deadline = timeout_s + self.kill_grace_s + self.client_margin_s
        try:
            async with asyncio.timeout(client_deadline):
                await collector.drain(process.stdout, process.stderr)
                await process.wait_closed()
        except TimeoutError:
            with contextlib.suppress(Exception):
                process.send_signal("KILL")
            process.close()
            raise CommandTimeout(
                f"command timed out after {timeout_s:g}s on {self.label}; no answer from the "
                "node after that, so the process may still be running there",
                partial=collector.result(None),
                timeout_s=timeout_s,
            ) from None
        except (asyncssh.Error, OSError) as exc:
            self._drop_connection()
            raise ConnectionLost(f"{self.label}: connection lost: {exc}") from exc
        except BaseException:
            process.close()
            raise
        exit_code = process.exit_status
        if exit_code is not None and exit_code < 0:
            exit_code = None
        if exit_code in _TIMEOUT_EXIT_CODES and collector.elapsed() >= timeout_s:
            raise CommandTimeout(
                f"command timed out after {timeout_s:g}s on {self.label} and was killed",
                partial=collector.result(None),
                timeout_s=timeout_s,
            )
        return collector.result(exit_code)

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

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await conn.wait_closed()


async def fetch_host_key(
    host: str, port: int = 22, *, timeout_s: float = 10.0, algorithm: str | None = None
) -> str:
    """Return the node's host key as ``"<algorithm> <base64>"`` (like ssh-keyscan).

    This trusts the network for one moment; pin the result only if you trust the path (or
    compare its fingerprint with one obtained out of band).
    """
    target = f"{host}:{port}"
    try:
        key = await asyncio.wait_for(
            asyncssh.get_server_host_key(
                host,
                port,
                config=None,
                server_host_key_algs=[algorithm] if algorithm else (),
            ),
            timeout_s,
        )
    except TimeoutError as exc:
        raise HostUnreachable(f"{target} unreachable: timeout after {timeout_s:g}s") from exc
    except ConnectionRefusedError as exc:
        raise HostUnreachable(f"{target} unreachable: connection refused") from exc
    except (OSError, asyncssh.Error) as exc:
        raise HostUnreachable(f"{target} unreachable: {exc}") from exc
    if key is None:
        raise HostKeyRejected(f"{target} presented no host key")
    return openssh_public_key(key)
