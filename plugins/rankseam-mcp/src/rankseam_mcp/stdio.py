"""The stdio transport of ``rankseam mcp``: newline-delimited JSON-RPC, read with a bounded
buffer, every request answered.

The MCP SDK's own stdio transport reads each line whole before it looks at it, and drops a
line it cannot parse without answering (the client then waits forever). This one reads at most
``max_message_bytes`` of a line: a longer line is skipped to its end while only its first and
last few bytes are kept (memory stays bounded), and is answered
(:func:`rankseam_mcp.answers.answer_oversized`). A line the SDK refuses is answered too
(:func:`rankseam_mcp.answers.answer_bad_line`), and so is one it would take for a notification
although it has an ``id`` JSON-RPC does not allow (``[7]``, ``{}``, ``true``, ``1.5``, ``null``:
:func:`rankseam_mcp.answers.answer_invalid`). Blank lines are skipped. The server then reads
the next line.

While serving, file descriptor 0 reads the null device and 1 writes to stderr, so nothing but
the protocol reaches stdout; both are restored afterwards.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.to_thread
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from rankseam_mcp.answers import answer_bad_line, answer_invalid, answer_oversized

__all__ = ["serve_stdio"]

log = logging.getLogger("rankseam_mcp")

_CHUNK = 256 * 1024
_HEAD = 4096  # bytes kept of an oversized line's start ...
_TAIL = 1024  # ... and end, to find its id and method
_DRAIN_S = 5.0  # how long answers still queued may take to be written at exit


class _Oversized:
    """What is kept of a line longer than the limit: its head, its tail and its length."""

    def __init__(self, start: bytearray, limit: int) -> None:
        self.head = bytes(start[:_HEAD])
        self.tail = bytes(start[-_TAIL:])
        self.size = len(start)
        self.limit = limit

    def feed(self, data: bytes | bytearray) -> None:
        self.size += len(data)
        self.tail = (self.tail + bytes(data[-_TAIL:]))[-_TAIL:]

    def answer(self) -> bytes:
        return answer_oversized(self.head, self.tail, self.size, self.limit)


def _read(fd: int) -> bytes:
    return os.read(fd, _CHUNK)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


async def _deliver(
    line: bytes,
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage | bytes],
) -> None:
    if not line.strip():
        return
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception:
        answer = answer_bad_line(line)
        if answer is None:
            log.warning("dropped a notification whose text is not valid Unicode")
        else:
            await answers.send(answer)
        return
    if isinstance(message, types.JSONRPCNotification):  # or a request with an invalid id
        answer = answer_invalid(line)
        if answer is not None:
            await answers.send(answer)
            return
    await messages.send(SessionMessage(message))


async def _reader(
    fd: int,
    limit: int,
    messages: MemoryObjectSendStream[SessionMessage | Exception],
    answers: MemoryObjectSendStream[SessionMessage | bytes],
) -> None:
    async with messages, answers:
        buf = bytearray()
        skipping: _Oversized | None = None
        while True:
            chunk = await anyio.to_thread.run_sync(_read, fd, abandon_on_cancel=True)
            if not chunk:
                break
            start = 0
            while start <= len(chunk):
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if skipping is not None:
                    skipping.feed(piece)
                else:
                    buf += piece
                    if len(buf) > limit:  # from here on only its head and tail are kept
                        skipping = _Oversized(buf, limit)
                        buf = bytearray()
                if end < 0:
                    break
                if skipping is not None:
                    await answers.send(skipping.answer())
                    skipping = None
                else:
                    await _deliver(bytes(buf), messages, answers)
                    buf = bytearray()
                start = end + 1
        if skipping is not None:  # the input ended inside an oversized line
            await answers.send(skipping.answer())
        elif buf:
            await _deliver(bytes(buf), messages, answers)


def _encode(item: SessionMessage | bytes) -> bytes | None:
    if isinstance(item, bytes):
        return item + b"\n"
    message = item.message
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"
    except (ValueError, UnicodeError) as exc:
        rid = getattr(message, "id", None)
        log.error("could not encode an answer: %s", exc)
        if rid is None:
            return None
        error = types.JSONRPCError(
            jsonrpc="2.0",
            id=rid,
            error=types.ErrorData(
                code=-32603,
                message=f"Internal error: the server could not encode its answer ({exc})",
            ),
        )
        return error.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"


async def _writer(fd: int, items: MemoryObjectReceiveStream[SessionMessage | bytes]) -> None:
    async with items:
        async for item in items:
            data = _encode(item)
            if data is not None:
                await anyio.to_thread.run_sync(_write_all, fd, data, abandon_on_cancel=True)


@contextmanager
def _claimed_stdio() -> Iterator[tuple[int, int]]:
    """Private duplicates of stdin and stdout; fd 0 reads the null device and fd 1 writes to
    stderr meanwhile. The duplicates are never closed: a worker thread may still block on one."""
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
    finally:
        os.close(null)
    try:
        yield wire_in, wire_out
    finally:
        sys.stdout.flush()
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


async def serve_stdio(server: MCPServer, *, max_message_bytes: int) -> None:
    """Serve ``server`` over this process's stdin and stdout until stdin ends."""
    lowlevel: Any = getattr(server, "_lowlevel_server", None)
    if lowlevel is None or not hasattr(lowlevel, "run"):
        raise RuntimeError(
            "this version of the mcp SDK has no MCPServer._lowlevel_server; install the "
            "mcp version rankseam-mcp names (pip install 'rankseam-mcp')"
        )
    with _claimed_stdio() as (wire_in, wire_out):
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        out_send, out_recv = anyio.create_memory_object_stream[SessionMessage | bytes](0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_reader, wire_in, max_message_bytes, read_send, out_send.clone())
            tasks.start_soon(_writer, wire_out, out_recv)
            async with out_send:
                await lowlevel.run(read_recv, out_send, lowlevel.create_initialization_options())
            # stdin ended: the writer ends once the reader's answers are written
            tasks.cancel_scope.deadline = anyio.current_time() + _DRAIN_S
