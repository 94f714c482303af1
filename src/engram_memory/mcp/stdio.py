"""MCP over stdio: stdout is the protocol, so nothing else may ever write to it.

The SDK's `stdio_server` reads and writes through anyio's file wrapper, which hands every line and
every flush to a worker thread; those hops cost about a third of a millisecond per call, the same
order as a whole `get`. On POSIX pipes (what a host gives the process it spawns) we serve the same
JSON-RPC lines from the event loop itself and hand the SDK the same message streams; anything else
(a regular file, /dev/null or a terminal, or a platform without them) gets the SDK's transport.
While serving, fd 0 reads the null device and fd 1 points at stderr, as with the SDK, so stray output
of a library can never tear a frame on the wire.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared._context_streams import create_context_streams
from mcp.shared.message import SessionMessage

from engram_memory.mcp.lines import Reply, handshake_refusal, read_line, refused_line, too_long
from engram_memory.mcp.log_budget import LogBudget

logger = logging.getLogger(__name__)

# The longest request line read as a request (no tool's arguments come near it); a longer one is
# answered with one -32600 and skipped, and the next line read as usual.
LINE_LIMIT = 16 * 1024 * 1024
_BAD_LINES = LogBudget(logger)


# Why a client must not be told this server works (no usable binding), asked at each handshake.
Refusal = Callable[[], str | None]


async def serve_stdio(server: Server[Any], refusal: Refusal | None = None) -> None:
    """Serves until the client closes stdin; with `refusal`, a handshake (`initialize`, `server/discover`) is
    answered -32603 naming why whenever it gives a reason, and never reaches the server."""
    options = server.create_initialization_options()
    refused = refusal or _never
    if not (_pollable(0) and _pollable(1)):
        async with stdio_server() as (transport_in, write_stream):
            forward, gated = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            async with anyio.create_task_group() as group:
                group.start_soon(_forward, transport_in, forward, write_stream, refused)
                await server.run(gated, write_stream, options)
                group.cancel_scope.cancel()
        return
    with _claimed_wire() as (wire_in, wire_out):
        reader, writer, reading = await _pipe_streams(wire_in, wire_out)
        try:
            await _serve_lines(server, options, reader, writer, refused)
        finally:
            writer.close()
            reading.close()


def _never() -> str | None:
    return None


async def _forward(
    transport_in: MemoryObjectReceiveStream[SessionMessage | Exception],
    forward: MemoryObjectSendStream[SessionMessage | Exception],
    write_stream: MemoryObjectSendStream[SessionMessage],
    refused: Refusal,
) -> None:
    """The SDK transport's messages to the server, but a refused handshake answered here."""
    async with forward, transport_in:
        async for message in transport_in:
            error = None if isinstance(message, Exception) else handshake_refusal(message, refused)
            if error is not None:
                await write_stream.send(SessionMessage(error))
            else:
                await forward.send(message)


def _pollable(fd: int) -> bool:
    """Pipes and sockets; the event loop cannot poll a regular file or /dev/null, and a terminal is
    left to the SDK's transport too."""
    if os.name != "posix":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def _claimed_wire() -> Iterator[tuple[int, int]]:
    """Private duplicates of stdin and stdout carry the protocol; fd 0 reads the null device and fd 1
    points at stderr until serving ends, when both point back at the wire."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.close(null)
        with suppress(OSError):
            os.dup2(wire_in, 0)
        with suppress(OSError):
            os.dup2(wire_out, 1)
        os.close(wire_in)
        os.close(wire_out)


async def _pipe_streams(
    wire_in: int, wire_out: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, asyncio.BaseTransport]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    source = os.fdopen(wire_in, "rb", buffering=0, closefd=False)
    reading, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), source)
    sink = os.fdopen(wire_out, "wb", buffering=0, closefd=False)
    try:
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sink)
    except BaseException:
        reading.close()
        raise
    return reader, asyncio.StreamWriter(transport, protocol, None, loop), reading


async def _lines(reader: asyncio.StreamReader, answer: Callable[[Reply], Awaitable[None]]) -> AsyncIterator[bytes]:
    """The request lines, the last one without its newline too; a line over LINE_LIMIT is answered
    once and skipped to its end (never held whole in memory)."""
    skipping = False
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            if end.partial and not skipping:
                yield end.partial
            return
        except asyncio.LimitOverrunError as overrun:
            # The buffer holds `consumed` bytes of the line (its newline not among them): drop them.
            await reader.readexactly(overrun.consumed)
            if not skipping:
                await answer(too_long())
            skipping = True
            continue
        except ConnectionError:
            return
        if skipping:
            skipping = False  # the end of the line that was too long
            continue
        yield line


async def _serve_lines(
    server: Server[Any], options: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, refused: Refusal
) -> None:
    read_sender, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_receiver = create_context_streams[SessionMessage](0)

    async def answer(reply: Reply) -> None:
        _BAD_LINES.warning("answered %s with a JSON-RPC error", reply.reason)
        with suppress(ConnectionError):
            writer.write(reply.line)
            await writer.drain()

    async def read_lines() -> None:
        async with read_sender:
            async for line in _lines(reader, answer):
                handled = read_line(line)
                if isinstance(handled, SessionMessage):
                    error = handshake_refusal(handled, refused)
                    handled = handled if error is None else refused_line(error)
                if isinstance(handled, Reply):
                    await answer(handled)
                elif handled is not None:
                    await read_sender.send(handled)

    async def write_lines() -> None:
        async with write_receiver:
            async for session_message in write_receiver:
                line = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    writer.write(line.encode("utf-8") + b"\n")
                    await writer.drain()
                except ConnectionError:  # the client went away; reading ends the session
                    return

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_lines)
        await server.run(read_stream, write_stream, options)
        group.cancel_scope.cancel()
