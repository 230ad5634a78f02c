"""Response bodies are capped while they stream in (``max_response_bytes``).

A server that sends an endless or a huge body -- announced by Content-Length, chunked, or
compressed -- costs at most the cap: the read stops there with ResponseTooLargeError, a typed
``invalid_output`` error that is not retried. One test runs a client in a fresh process against
a loopback server that never stops sending, and checks that the process's peak memory stays
within a few MiB of where it started.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from rankseam.errors import ConfigurationError, InvalidOutputError
from rankseam.plugin.decision import rerank_request
from rankseam.types import Usage
from rankseam_openai import ResponseTooLargeError, make_decision_backend
from rankseam_openai.config import DEFAULT_MAX_RESPONSE_BYTES
from rankseam_openai.testing import FakeOpenAIServer, Reply

GOOD = Reply.json({"answer": "yes"})


def evaluate(backend: Any) -> Any:
    return asyncio.run(backend.evaluate(rerank_request("q", "s")))


def test_the_default_cap_is_one_mebibyte() -> None:
    assert DEFAULT_MAX_RESPONSE_BYTES == 1 << 20
    backend = make_decision_backend({"base_url": "http://127.0.0.1:9/v1", "model": "m"})
    assert backend.settings.max_response_bytes == 1 << 20
    assert backend.descriptor["max_response_bytes"] == 1 << 20


@pytest.mark.parametrize("bad", [0, 1023, 2**30 + 1, "1MB", 1.5, True, None])
def test_a_bad_cap_is_a_configuration_error(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_response_bytes"):
        make_decision_backend(
            {"base_url": "http://127.0.0.1:9/v1", "model": "m", "max_response_bytes": bad}
        )


def test_an_endless_body_stops_at_the_cap(server: FakeOpenAIServer) -> None:
    """Before the cap, an endless body was read until ``timeout_s`` (here 20 s)."""
    server.inject("endless_body")
    backend = make_decision_backend(
        server.options(max_response_bytes=64 * 1024, timeout_s=20.0, deadline_s=60.0)
    )
    with pytest.raises(ResponseTooLargeError) as info:
        evaluate(backend)
    error = info.value
    assert isinstance(error, InvalidOutputError) and error.kind == "invalid_output"
    assert "max_response_bytes=65536" in str(error)
    assert error.usage == Usage(1, None, None)  # type: ignore[attr-defined]  # not retried
    assert len(server.settle().chat_requests) == 1


def test_an_announced_oversized_body_is_refused_before_reading(server: FakeOpenAIServer) -> None:
    body = json.dumps({"choices": [{"message": {"content": "x" * 3_000_000}}]}).encode()
    server.script(Reply.raw(body))
    backend = make_decision_backend(server.options())
    with pytest.raises(ResponseTooLargeError, match="Content-Length") as info:
        evaluate(backend)
    assert f"{len(body)}-byte" in str(info.value)
    assert len(server.settle().chat_requests) == 1


def test_a_compressed_body_is_never_inflated_past_the_cap(server: FakeOpenAIServer) -> None:
    bomb = gzip.compress(b" " * (64 * 1024 * 1024), compresslevel=9)  # 64 MiB in ~64 kB
    assert len(bomb) < 256 * 1024
    server.script(
        Reply(200, bomb, (("Content-Type", "application/json"), ("Content-Encoding", "gzip")))
    )
    backend = make_decision_backend(server.options())
    with pytest.raises(ResponseTooLargeError):
        evaluate(backend)


def test_a_compressed_body_under_the_cap_is_read(server: FakeOpenAIServer) -> None:
    packed = gzip.compress(GOOD.body)
    server.script(
        Reply(200, packed, (("Content-Type", "application/json"), ("Content-Encoding", "gzip")))
    )
    result = evaluate(make_decision_backend(server.options()))
    assert result.outcome.value == "yes"
    assert server.chat_requests[0].headers.get("Accept-Encoding") == "identity"


def test_an_unknown_content_encoding_is_invalid_output(server: FakeOpenAIServer) -> None:
    server.script(
        Reply(200, b"\x00\x01", (("Content-Type", "application/json"), ("Content-Encoding", "br")))
    )
    with pytest.raises(InvalidOutputError, match="Content-Encoding 'br'"):
        evaluate(make_decision_backend(server.options()))


def test_an_error_body_is_cut_not_refused(server: FakeOpenAIServer) -> None:
    """A huge error page still gives the status's error (with a short excerpt)."""
    server.script(Reply.raw(b"E" * (5 * 1024 * 1024), status=503), GOOD)
    result = evaluate(make_decision_backend(server.options()))
    assert result.outcome.value == "yes"  # the 503 was retried as usual
    assert len(server.chat_requests) == 2


def test_a_body_at_the_cap_is_read(server: FakeOpenAIServer) -> None:
    body = GOOD.body
    server.script(Reply.raw(body))
    backend = make_decision_backend(server.options(max_response_bytes=1024))
    assert len(body) <= 1024
    assert evaluate(backend).outcome.value == "yes"


# The client in a fresh process, against a loopback server (in the same process, as in every
# test here) that sends body bytes for as long as anyone reads them. The script prints the
# growth of the process's peak RSS over the call. Its server is written out in the script, so
# the same script measures a client of any version.
_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, resource, sys, threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    # A guard for the machine: a client with no cap stops with MemoryError at 1 GiB of growth
    # instead of taking the machine's memory.
    def vm_bytes():
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    limit = vm_bytes() + (1 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    CHUNK = b" " * 65536
    GOOD = json.dumps({"choices": [{"message": {"content": '{"answer": "yes"}'}}]}).encode()
    served = []

    class Endless(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def log_message(self, *args):
            pass
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            served.append(1)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            if len(served) == 1:  # the warm-up call gets a normal answer
                self.send_header("Content-Length", str(len(GOOD)))
                self.end_headers()
                self.wfile.write(GOOD)
                return
            self.end_headers()
            try:
                while True:
                    self.wfile.write(CHUNK)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()

    from rankseam.plugin.decision import rerank_request
    from rankseam_openai import make_decision_backend

    # Timeouts far above any healthy answer: neither call's verdict depends on how fast this
    # machine is. Only the cap can stop the endless read (an uncapped client reads until the
    # guard's MemoryError, within seconds).
    backend = make_decision_backend({
        "base_url": f"http://127.0.0.1:{server.server_address[1]}/v1",
        "model": "m", "timeout_s": 300, "deadline_s": 600, "max_attempts": 1,
    })
    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    # warm up (a normal answer): imports, the event loop, httpx's first connection
    asyncio.run(backend.evaluate(rerank_request("q", "s")))
    before = peak()
    try:
        asyncio.run(backend.evaluate(rerank_request("q", "s")))
        error = "none"
    except MemoryError:
        error = "MemoryError"
    except Exception as exc:
        error = type(exc).__name__
    print(json.dumps({"growth": peak() - before, "error": error}))
    """
)


def test_an_endless_body_leaves_process_memory_bounded() -> None:
    """Before the cap, this process grew by hundreds of MB per second of ``timeout_s``. The
    warm-up call (imports, the event loop, the first connection) and the endless read have
    timeouts no loaded machine reaches, so the verdict is the cap's alone; it once shared a
    2 s timeout, and the warm-up timed out on a loaded machine."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "RANKSEAM_OPENAI"))}
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT],
        capture_output=True,
        text=True,
        timeout=900,  # a guard against a hang only
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["error"] == "ResponseTooLargeError", report
    # the cap is 1 MiB; allow the interpreter some slack, far below an uncapped read
    assert report["growth"] < 16 * 1024 * 1024, report
