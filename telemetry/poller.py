"""Kept-open connections for the telemetry polls.

A node is read every 30 to 60 s; opening an SSH connection for each read would cost more
than the read (key exchange, authentication). A worker process keeps one event loop and
one connection per node across polls, and drops a connection when it fails or when the
node's address or pinned key changed, so the next poll opens a fresh one."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from benchmarks.transports import AsyncTransport, CommandResult, TransportError
from leases.models import Node


def _identity(node: Node) -> tuple[Any, ...]:
    return (node.management_address, node.ssh_port, node.ssh_user, node.ssh_host_key)


class Poller:
    """One per worker process (``poller()``); not for concurrent use from threads."""

    def __init__(self, connect: Callable[[Node], AsyncTransport]) -> None:
        self._connect = connect
        self._runner = asyncio.Runner()
        self._open: dict[int, tuple[tuple[Any, ...], AsyncTransport]] = {}

    def _transport(self, node: Node) -> AsyncTransport:
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
        transports = {node.pk: self._transport(node) for node in nodes}

        async def one(node_id: int) -> CommandResult | TransportError:
            try:
                return await transports[node_id].run(commands[node_id], timeout_s=timeout_s)
            except TransportError as error:
                return error

        async def every() -> list[CommandResult | TransportError]:
            return await asyncio.gather(*(one(node.pk) for node in nodes))

        results = dict(zip([node.pk for node in nodes], self._runner.run(every()), strict=True))
        for node_id, result in results.items():
            if isinstance(result, TransportError):
                self._runner.run(self._close(self._open.pop(node_id)[1]))
        return results

    def close(self) -> None:
        for _identity_key, transport in self._open.values():
            self._runner.run(self._close(transport))
        self._open.clear()
        self._runner.close()


_local = threading.local()


def poller(connect: Callable[[Node], AsyncTransport]) -> Poller:
    """This thread's poller (a Celery prefork child has one thread: one poller)."""
    found: Poller | None = getattr(_local, "poller", None)
    if found is None:
        found = _local.poller = Poller(connect)
    return found


def reset() -> None:
    """Close this thread's connections (tests, and a worker shutting down)."""
    found: Poller | None = getattr(_local, "poller", None)
    if found is not None:
        found.close()
        _local.poller = None
