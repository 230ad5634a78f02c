"""`rankseam mcp --transport http`: the MCP SDK's own client over real HTTP on 127.0.0.1.

Each test starts a real `rankseam mcp` process on a free port (`--port 0`; the server prints
its URL on stderr). Raw requests go through httpx to the same server. Timeouts are generous:
only whether an answer arrives decides a verdict; the measured times are printed (run with -s).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp import Client

RANKSEAM = str(Path(sys.executable).parent / "rankseam")
START_TIMEOUT_S = 120.0  # a loaded machine starts slowly; only "it starts" decides
ANSWER_TIMEOUT_S = 10.0  # the bound is one second: ten leaves a loaded machine room
ACCEPT = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


class Served:
    def __init__(self, process: subprocess.Popen[str], url: str, stderr: list[str]) -> None:
        self.process = process
        self.url = url
        self.stderr = stderr


@contextmanager
def http_server(db: Path, *args: str) -> Iterator[Served]:
    """A `rankseam mcp --transport http` process and the URL it announced."""
    process = subprocess.Popen(
        [RANKSEAM, "mcp", "--db", str(db), "--transport", "http", "--port", "0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert process.stderr is not None
        for text in process.stderr:
            lines.put(text)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        url = None
        while url is None:
            got = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if got is None:
                raise AssertionError(f"the server exited: {''.join(seen)}")
            seen.append(got)
            if "serving http://" in got:
                url = got.split("serving ", 1)[1].split()[0]
        yield Served(process, url, seen)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_official_client_over_http(tmp_path: Path) -> None:
    async def fn(url: str) -> dict[str, Any]:
        async with Client(url, read_timeout_seconds=60) as client:
            tools = (await client.list_tools()).tools
            added = await client.call_tool("memory_add", {"text": "tea at five", "memory_id": "t"})
            found = await client.call_tool("memory_search", {"query": "tea"})
            coerced = await client.call_tool("memory_search", {"query": "tea", "limit": "5"})
            return {"tools": tools, "added": added, "found": found, "coerced": coerced}

    with http_server(tmp_path / "m.sqlite3") as served:
        # bound to loopback by default
        assert served.url.startswith("http://127.0.0.1:") and served.url.endswith("/mcp")
        out = anyio.run(fn, served.url)
    tools = {t.name: t for t in out["tools"]}
    assert tools["memory_search"].annotations.read_only_hint is True
    assert tools["memory_delete"].annotations.destructive_hint is True
    assert not out["added"].is_error
    assert json.loads(out["added"].content[0].text)["created_store"] == str(tmp_path / "m.sqlite3")
    hits = json.loads(out["found"].content[0].text)["hits"]
    assert [h["memory_id"] for h in hits] == ["t"]
    assert out["coerced"].is_error
    assert "'limit' must be an integer" in out["coerced"].content[0].text


INVALID_IDS = ["[7]", "{}", "true", "1.5", "1e400", "null"]


def test_every_request_is_answered_over_http(tmp_path: Path) -> None:
    """A request whose id JSON-RPC does not allow gets an invalid-request error with id null
    (the SDK took it for a notification and answered 202 with no body); a body that is not a
    request gets the answer stdio gives. Then the server still serves the official client."""
    bodies = [(rid, f'{{"jsonrpc":"2.0","id":{rid},"method":"ping"}}') for rid in INVALID_IDS]
    bodies += [("not JSON", "{bad"), ("null body", "null"), ("a batch", '[{"jsonrpc":"2.0"}]')]

    async def still_serves(url: str) -> bool:
        async with Client(url, read_timeout_seconds=60) as client:
            return not (await client.call_tool("memory_add", {"text": "still here"})).is_error

    with http_server(tmp_path / "m.sqlite3") as served:
        answers = []
        with httpx.Client(timeout=ANSWER_TIMEOUT_S) as http:
            for name, body in bodies:
                started = time.perf_counter()
                response = http.post(served.url, content=body.encode(), headers=ACCEPT)
                answers.append((name, response, time.perf_counter() - started))
        assert anyio.run(still_serves, served.url)
    for name, response, seconds in answers:
        print(f"\n  {name}: HTTP {response.status_code} in {seconds * 1000:.1f} ms")
        assert response.status_code == 400, (name, response.text)
        answer = response.json()
        for item in answer if isinstance(answer, list) else [answer]:
            assert item["jsonrpc"] == "2.0" and item["id"] is None, (name, item)
            assert item["error"]["code"] in (-32600, -32700), (name, item)
        if name in INVALID_IDS:
            assert answer["error"]["code"] == -32600
            assert '"id" must be a string or an integer' in answer["error"]["message"]


def test_a_host_beyond_loopback_needs_allow_remote(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    refused = subprocess.run(
        [RANKSEAM, "mcp", "--db", str(db), "--transport", "http", "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert refused.returncode != 0
    assert "not a loopback address" in refused.stderr and "--allow-remote" in refused.stderr
    assert not db.exists()
    on_stdio = subprocess.run(
        [RANKSEAM, "mcp", "--db", str(db), "--port", "9"],
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert on_stdio.returncode != 0 and "apply to --transport http" in on_stdio.stderr

    async def fn(url: str) -> bool:
        async with Client(url, read_timeout_seconds=60) as client:
            return not (await client.call_tool("memory_stats", {})).is_error

    with http_server(db, "--host", "0.0.0.0", "--allow-remote") as served:
        warning = "".join(served.stderr)
        assert "WARNING" in warning and "no authentication" in warning, warning
        port = served.url.rsplit(":", 1)[1].split("/")[0]
        # reached here through loopback, which 0.0.0.0 includes; the store does not exist
        # yet, so memory_stats is a tool error: the call is what is tested
        assert anyio.run(fn, f"http://127.0.0.1:{port}/mcp") is False
