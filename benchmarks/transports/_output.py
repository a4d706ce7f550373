"""Bounded collection of a command's stdout/stderr (shared by the transports)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Protocol

from benchmarks.transports.base import CommandResult

_CHUNK = 64 * 1024


class ByteReader(Protocol):
    async def read(self, n: int = -1, /) -> bytes: ...


@dataclass
class CappedBuffer:
    """Keeps at most ``limit`` bytes; further data is drained and discarded."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def feed(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        if len(chunk) > room:
            self.truncated = True
            chunk = chunk[: max(room, 0)]
        self.data.extend(chunk)

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


async def drain(reader: ByteReader, buffer: CappedBuffer) -> None:
    """Read ``reader`` to EOF into ``buffer``."""
    while chunk := await reader.read(_CHUNK):
        buffer.feed(chunk)


@dataclass
class OutputCollector:
    """stdout + stderr buffers of one command and the time it started."""

    command: str
    limit: int
    stdout: CappedBuffer = field(init=False)
    stderr: CappedBuffer = field(init=False)
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.stdout = CappedBuffer(self.limit)
        self.stderr = CappedBuffer(self.limit)

    async def drain(self, out: ByteReader, err: ByteReader) -> None:
        await asyncio.gather(drain(out, self.stdout), drain(err, self.stderr))

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def result(self, exit_code: int | None) -> CommandResult:
        return CommandResult(
            command=self.command,
            exit_code=exit_code,
            stdout=self.stdout.text(),
            stderr=self.stderr.text(),
            duration_s=self.elapsed(),
            truncated=self.stdout.truncated or self.stderr.truncated,
        )
