"""Blocking facade over the async transports, for synchronous callers (Celery tasks).

``SyncTransport`` owns a private event loop (``asyncio.Runner``), so its connection stays
open across calls. To drive several nodes at once from synchronous code, write the work as
one coroutine over the async transports and run it with :func:`run_sync` (or plain
``asyncio.run``)::

    async def both():
        return await asyncio.gather(a.run("hostname", timeout_s=5), b.run(...))
    results = run_sync(both())
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from benchmarks.transports.base import (
    DEFAULT_MAX_LIFETIME_S,
    DEFAULT_MAX_OUTPUT_BYTES,
    AsyncTransport,
    CommandResult,
)

if TYPE_CHECKING:
    from types import TracebackType

    from benchmarks.transports.background import BackgroundProcess

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run one coroutine to completion from synchronous code (a fresh event loop)."""
    return asyncio.run(coro)


class SyncTransport:
    """Blocking wrapper of one AsyncTransport. Not thread-safe; close it when done."""

    def __init__(self, transport: AsyncTransport) -> None:
        self.transport = transport
        self._runner = asyncio.Runner()

    @property
    def label(self) -> str:
        return self.transport.label

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on this wrapper's loop (where the transport's connection lives)."""
        return self._runner.run(coro)

    def run(
        self,
        command: str,
        *,
        timeout_s: float,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        return self.call(
            self.transport.run(command, timeout_s=timeout_s, max_output_bytes=max_output_bytes)
        )

    def start(
        self, command: str, *, max_lifetime_s: float = DEFAULT_MAX_LIFETIME_S
    ) -> SyncBackgroundProcess:
        process = self.call(self.transport.start(command, max_lifetime_s=max_lifetime_s))
        return SyncBackgroundProcess(self, process)

    def close(self) -> None:
        try:
            self.call(self.transport.close())
        finally:
            self._runner.close()

    def __enter__(self) -> SyncTransport:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class SyncBackgroundProcess:
    """Blocking handle on a background process; ``with`` stops it on exit."""

    def __init__(self, owner: SyncTransport, process: BackgroundProcess) -> None:
        self._owner = owner
        self.process = process

    @property
    def pid(self) -> int:
        return self.process.pid

    def is_running(self) -> bool:
        return self._owner.call(self.process.is_running())

    def stop(self, *, grace_s: float = 2.0) -> CommandResult:
        return self._owner.call(self.process.stop(grace_s=grace_s))

    def __enter__(self) -> SyncBackgroundProcess:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
