"""stdio over the event loop's own pipe transports, for a server whose stdin and stdout are pipes
(the OpenClaw plugin's resident worker, any MCP host that spawns us).

The SDK's `stdio_server()` reads and writes through `anyio.wrap_file`: every line read, every
write and every flush is a hop to a worker thread and back. On a loaded host each hop waits for a
core, and a warm search paid three of them on top of the call's own. Here a line is read from a
non-blocking pipe by the loop itself and an answer is written to one, `drain` waiting only when
the pipe is full. The messages are the same lines of JSON: the SDK's `stdio_server()` still
parses and serializes them, given these two objects as its stdin and stdout.

As the SDK does when it owns the descriptors, fd 0 is pointed at the null device and fd 1 at
stderr while serving (a stray print or a child's output misses the wire), and both are put back
on exit. Anything that is not a pipe (a file, a terminal) keeps the SDK's own reader.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

# One JSON-RPC message per line; the CLI takes requests up to 16 MiB, leave room around that.
MAX_LINE_BYTES = 64 * 1024 * 1024


def are_pipes() -> bool:
    """Whether stdin and stdout are both pipes (or sockets): what `loop_stdio` serves."""
    try:
        modes = [os.fstat(fd).st_mode for fd in (0, 1)]
    except OSError:
        return False
    return all(stat.S_ISFIFO(m) or stat.S_ISSOCK(m) for m in modes)


class _Lines:
    """The SDK's stdin: an async iterator of text lines."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _Writer:
    """The SDK's stdout: `write` queues on the pipe transport, `flush` waits while it is full."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


@asynccontextmanager
async def loop_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """(stdin, stdout) for `mcp.server.stdio.stdio_server(stdin, stdout)`, on private copies of
    fds 0 and 1, which point at the null device and stderr until the block ends."""
    loop = asyncio.get_running_loop()
    saved = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    writer = None
    try:
        reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
        # The transports own (and close) their copies, made non-blocking.
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader),
            os.fdopen(os.dup(saved[0]), "rb", buffering=0),
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(os.dup(saved[1]), "wb", buffering=0)
        )
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        yield _Lines(reader), _Writer(writer)
    finally:
        if writer is not None:
            writer.close()
        for fd, copy in zip((0, 1), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
            os.set_blocking(fd, True)
