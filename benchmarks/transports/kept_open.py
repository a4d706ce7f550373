"""A worker's kept-open connections: one event loop and one connection per node, kept
across telemetry polls and probe batches.

A node is read every 30 to 60 s and probed every few minutes; opening an SSH connection
each time would cost more than a short read (key exchange, authentication) and add about
0.4 s to every probe. A worker thread (a Celery prefork child has one) keeps one event
loop and one connection per node, and drops a connection when it fails or when the node's
address or pinned key changed, so the next use opens a fresh one; a connection that died
unseen is reopened by the transport itself (``SSHTransport``)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from benchmarks.transports.base import AsyncTransport, CommandResult, TransportError
from leases.models import Node

T = TypeVar("T")


def _identity(node: Node) -> tuple[Any, ...]:
    return (node.management_address, node.ssh_port, node.ssh_user, node.ssh_host_key)


class KeptOpen:
    """One per worker thread (``kept_open()``); not for concurrent use from threads."""

    def __init__(self, connect: Callable[[Node], AsyncTransport]) -> None:
        self._connect = connect
        self._runner = asyncio.Runner()
        self._open: dict[int, tuple[tuple[Any, ...], AsyncTransport]] = {}

    def transport(self, node: Node) -> AsyncTransport:
        """The node's kept-open transport (a new one when its identity changed)."""
        known = self._open.get(node.pk)
        if known is not None and known[0] == _identity(node):
            return known[1]
        if known is not None:
            self._runner.run(self._close(known[1]))
        transport = self._connect(node)
        self._open[node.pk] = (_identity(node), transport)
        return transport

    async def _close(self, transport: AsyncTransport) -> None:
        # Closing a broken connection may fail again; it is dropped either way.
        with contextlib.suppress(Exception):
            await transport.close()

    def read(
        self, nodes: list[Node], commands: Mapping[int, str], *, timeout_s: float
    ) -> dict[int, CommandResult | TransportError]:
        """Run each node's command at once over its kept-open connection."""
        transports = {node.pk: self.transport(node) for node in nodes}

        async def one(node_id: int) -> CommandResult | TransportError:
            try:
                return await transports[node_id].run(commands[node_id], timeout_s=timeout_s)
            except TransportError as error:
                return error

        async def every() -> list[CommandResult | TransportError]:
            return await asyncio.gather(*(one(node.pk) for node in nodes))

        results = dict(zip([node.pk for node in nodes], self._runner.run(every()), strict=True))
        self.drop(
            node_id for node_id, result in results.items() if isinstance(result, TransportError)
        )
        return results

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run ``work`` on this thread's loop, where the kept-open connections live."""
        return self._runner.run(work)

    def drop(self, node_ids: Iterable[int]) -> None:
        """Close and forget these nodes' connections (a fault: the next use reconnects)."""
        for node_id in list(node_ids):
            found = self._open.pop(node_id, None)
            if found is not None:
                self._runner.run(self._close(found[1]))

    def close(self) -> None:
        for _identity_key, transport in self._open.values():
            self._runner.run(self._close(transport))
        self._open.clear()
        self._runner.close()


_local = threading.local()


def kept_open(connect: Callable[[Node], AsyncTransport]) -> KeptOpen:
    """This thread's kept-open connections (a Celery prefork child has one thread)."""
    found: KeptOpen | None = getattr(_local, "kept", None)
    if found is None:
        found = _local.kept = KeptOpen(connect)
    return found


def reset() -> None:
    """Close this thread's connections (tests, and a worker shutting down)."""
    found: KeptOpen | None = getattr(_local, "kept", None)
    if found is not None:
        found.close()
        _local.kept = None
