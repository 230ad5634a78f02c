"""`rankseam mcp` answers every line a client writes, and keeps serving.

One real `rankseam mcp` subprocess per test; the MCP SDK's own `Client` drives it over the
process's pipes while the test writes raw lines (bad JSON, batches, lone surrogates, a 200 MiB
line streamed in chunks) onto the same stdin. Raw requests carry string ids ("raw-..."), so
their answers come back to the test and the client's session never sees them. Each bad line
must be answered (the time from its last byte to the answer is printed: run with -s), and a
normal request through the client must work after it. Timeouts are generous on purpose: a
slow machine changes the times printed, never the verdict.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import Process
from mcp import Client
from mcp.shared.message import SessionMessage

import rankseam

RANKSEAM = str(Path(sys.executable).parent / "rankseam")
ANSWER_TIMEOUT_S = 30.0  # generous: only "an answer arrives" decides a verdict
MIB = 1024 * 1024


class Wire:
    """The server process, its pipes shared by the MCP client and raw writes from the test."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.lock = anyio.Lock()
        self.raw_send, self.raw_answers = anyio.create_memory_object_stream[tuple[float, Any]](100)

    async def write(self, data: bytes) -> None:
        assert self.process.stdin is not None
        async with self.lock:
            await self.process.stdin.send(data)

    async def raw(self, chunks: Iterable[bytes]) -> tuple[Any, float]:
        """Write one raw line (in chunks, under the lock) and wait for its answer: returns the
        answer and the seconds from the line's last byte to the answer."""
        assert self.process.stdin is not None
        async with self.lock:
            for chunk in chunks:
                await self.process.stdin.send(chunk)
            sent = time.perf_counter()
        with anyio.fail_after(ANSWER_TIMEOUT_S):
            received, answer = await self.raw_answers.receive()
        return answer, received - sent

    def peak_rss_kib(self) -> int:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("VmHWM:"))
        return int(line.split()[1])


def _is_raw(message: Any) -> bool:
    if isinstance(message, list):
        return True
    rid = message.get("id", 0) if isinstance(message, dict) else 0
    return rid is None or (isinstance(rid, str) and rid.startswith("raw-"))


@asynccontextmanager
async def serve(db: Path) -> AsyncIterator[tuple[Wire, Any]]:
    process = await anyio.open_process(
        [RANKSEAM, "mcp", "--db", str(db)], stderr=None, env={**os.environ}
    )
    wire = Wire(process)
    to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](10)
    session_writes, from_session = anyio.create_memory_object_stream[SessionMessage](10)

    async def pump_out() -> None:
        assert process.stdout is not None
        buffer = b""
        async for data in process.stdout:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line)
                if _is_raw(message):
                    await wire.raw_send.send((time.perf_counter(), message))
                else:
                    parsed = types.jsonrpc_message_adapter.validate_python(message, by_name=False)
                    await to_session.send(SessionMessage(parsed))
        await to_session.aclose()

    async def pump_in() -> None:
        async for message in from_session:
            body = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            await wire.write(body.encode() + b"\n")

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        yield session_reads, session_writes

    async with process, anyio.create_task_group() as tasks:
        tasks.start_soon(pump_out)
        tasks.start_soon(pump_in)
        try:
            async with Client(transport(), read_timeout_seconds=120) as client:
                yield wire, client
        finally:
            tasks.cancel_scope.cancel()
            process.kill()


def run(db: Path, fn: Callable[[Wire, Any], Awaitable[Any]]) -> Any:
    rankseam.open_memory(db).close()  # an empty store: `stats` answers 0 memories

    async def main() -> Any:
        async with serve(db) as (wire, client):
            return await fn(wire, client)

    return anyio.run(main)


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def call(rid: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def memories(client: Any) -> int:
    """A normal request through the client: the server still serves."""
    result = await client.call_tool("memory_stats", {})
    assert not result.is_error, result.content[0].text
    return int(json.loads(result.content[0].text)["memories"])


def report(name: str, seconds: float) -> None:
    print(f"\n  {name}: answered {seconds * 1000:.1f} ms after its last byte")


# JSON-RPC allows a string or an integer id (MCP: never null); the SDK took these for
# notifications and never answered them: each gets an invalid-request error with id null
INVALID_IDS = ["[7]", "{}", "true", "1.5", "1e400", "null"]
INVALID_ID_LINES = [
    (
        rid,
        b'{"jsonrpc": "2.0", "id": ' + rid.encode() + b', "method": "tools/call", '
        b'"params": {"name": "memory_add", "arguments": {"text": "must not be stored"}}}\n',
    )
    for rid in INVALID_IDS
]

BAD_LINES = [
    ("not JSON", b"{bad\n", -32700),
    ("truncated", b'{"jsonrpc": "2.0", "id": "raw-t", "method": \n', -32700),
    ("trailing garbage", b'{"jsonrpc": "2.0", "id": "raw-g", "method": "ping"} x\n', -32700),
    ("null", b"null\n", -32600),
    ("a number", b"5\n", -32600),
    ("a string", b'"ping"\n', -32600),
    ("an empty batch", b"[]\n", -32600),
    ("no jsonrpc member", b'{"id": "raw-v", "method": "ping"}\n', -32600),
    ("no method", b'{"jsonrpc": "2.0", "id": "raw-m"}\n', -32600),
]


SURROGATE = (
    b'{"jsonrpc": "2.0", "id": "raw-s", "method": "tools/call", '
    b'"params": {"name": "add", "arguments": {"text": "a\\ud800b"}}}\n'
)
BROKEN_UTF8 = line(call("raw-u", "add", {"text": "PLACEHOLDER"})).replace(b"PLACEHOLDER", b"a\xffb")
BAD_NOTIFICATION = (
    b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"reason": "\\udc00"}}\n'
)
BATCH = [{"jsonrpc": "2.0", "id": "raw-b1", "method": "ping"}, 7]


def test_every_bad_line_is_answered_and_serving_goes_on(tmp_path: Path) -> None:
    """One server for all the cases (a server start is the slow part on a loaded machine)."""

    async def fn(wire: Wire, client: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"lines": []}
        for _, data, _ in BAD_LINES:
            answer, seconds = await wire.raw([data])
            out["lines"].append((answer, seconds, await memories(client)))
        out["ids"] = []
        for _, data in INVALID_ID_LINES:
            answer, seconds = await wire.raw([data])
            out["ids"].append((answer, seconds, await memories(client)))
        out["batch"] = (*await wire.raw([line(BATCH)]), await memories(client))
        for key, data in [("surrogate", SURROGATE), ("utf8", BROKEN_UTF8)]:
            out[key] = (*await wire.raw([data]), await memories(client))
        await wire.write(BAD_NOTIFICATION)  # never answered (a notification) ...
        out["after_notification"] = await memories(client)  # ... and serving goes on
        out["next_raw"] = await wire.raw([b"null\n"])  # the next raw answer is this one's
        good = await client.call_tool(
            "memory_add", {"text": "a\U0001f600b (a surrogate pair is fine)"}
        )
        out["good"] = (not good.is_error, await memories(client))
        return out

    out = run(tmp_path / "m.sqlite3", fn)
    for (name, data, code), (answer, seconds, count) in zip(BAD_LINES, out["lines"], strict=True):
        report(name, seconds)
        assert answer["jsonrpc"] == "2.0"
        assert answer["error"]["code"] == code, (name, answer)
        expected_id = json.loads(data).get("id") if code == -32600 and data[:1] == b"{" else None
        assert answer["id"] == expected_id, (name, answer)
        assert count == 0

    for (rid, _), (answer, seconds, count) in zip(INVALID_ID_LINES, out["ids"], strict=True):
        report(f"id {rid}", seconds)  # the bound is one second; the verdict is the answer
        assert answer == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": answer["error"]["message"]},
        }
        assert '"id" must be a string or an integer' in answer["error"]["message"], answer
        assert count == 0  # nothing was stored

    answer, seconds, count = out["batch"]  # one invalid-request error per member
    report("batch", seconds)
    assert [a["id"] for a in answer] == ["raw-b1", None]
    assert {a["error"]["code"] for a in answer} == {-32600}
    assert "batch" in answer[0]["error"]["message"]

    for key, name, rid in [
        ("surrogate", "lone surrogate", "raw-s"),
        ("utf8", "bad UTF-8", "raw-u"),
    ]:
        answer, seconds, count = out[key]  # a tool error; nothing is stored
        report(name, seconds)
        assert answer["id"] == rid
        assert answer["result"]["isError"] is True
        text = answer["result"]["content"][0]["text"]
        assert "argument 'text'" in text and "not valid Unicode" in text, text
        assert count == 0

    assert out["after_notification"] == 0
    assert out["next_raw"][0]["error"]["code"] == -32600
    assert out["good"] == (True, 1)


def stream_line(prefix: bytes, size: int, suffix: bytes, chunk: int = MIB) -> Iterable[bytes]:
    """A request line of about ``size`` bytes, produced chunk by chunk (never whole)."""
    yield prefix
    filler = b"x" * chunk
    for _ in range(size // chunk):
        yield filler
    yield suffix


def test_a_200_mib_line_is_refused_while_read_with_memory_bounded(tmp_path: Path) -> None:
    head = b'{"jsonrpc": "2.0", "id": "raw-big", "method": "tools/call", "params": {"name": "add", "arguments": {"text": "'
    # a client that writes the id last (as the TypeScript SDK does)
    tail_first = b'{"method": "tools/call", "params": {"name": "add", "arguments": {"text": "'
    tail_id = b'"}}, "jsonrpc": "2.0", "id": "raw-late"}\n'

    async def fn(wire: Wire, client: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"before_kib": wire.peak_rss_kib()}
        started = time.perf_counter()
        out["big"] = await wire.raw(stream_line(head, 200 * MIB, b'"}}}\n'))
        out["big_s"] = time.perf_counter() - started
        out["after_kib"] = wire.peak_rss_kib()
        out["count"] = await memories(client)
        out["late"] = await wire.raw(stream_line(tail_first, 8 * MIB, tail_id))
        out["count2"] = await memories(client)
        return out

    out = run(tmp_path / "m.sqlite3", fn)
    for key, rid in [("big", "raw-big"), ("late", "raw-late")]:
        answer, seconds = out[key]
        report(f"{key} line", seconds)
        assert answer["id"] == rid
        assert answer["result"]["isError"] is True
        assert "bytes long" in answer["result"]["content"][0]["text"]
    print(f"  200 MiB line written and answered in {out['big_s']:.2f} s")
    print(f"  server peak RSS: {out['before_kib']} KiB before, {out['after_kib']} KiB after")
    # bounded: reading the line raised the server's peak resident memory by far less than the
    # line (its start-up peak, about 100 MiB, depends on the installed packages' versions)
    assert out["after_kib"] - out["before_kib"] < 32 * 1024
    assert out["count"] == out["count2"] == 0
