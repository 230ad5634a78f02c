"""FakeOpenAIServer.settle(): it waits for every request a client has sent, and not for a
connection on which a client sent nothing (a client cancelled between connecting and sending
can leave one open for as long as its socket lives; settle() used to wait for it until its
30 s timeout, which failed the failure-matrix tests on a loaded machine)."""

from __future__ import annotations

import json
import socket
import time

from rankseam_openai.testing import FakeOpenAIServer, Reply


def _request(body: dict[str, object]) -> bytes:
    raw = json.dumps(body).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(raw)}\r\n\r\n"
    )
    return head.encode() + raw


def test_an_idle_connection_does_not_hold_up_settle_and_a_late_request_still_counts() -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.json({"answer": "yes"}))
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=30)
        try:
            time.sleep(0.3)  # most likely accepted by now (settle waits for it if not)
            # A settle() that waited for the idle connection would raise TimeoutError: the
            # connection stays open and silent far longer than the 30 s timeout allows.
            started = time.monotonic()
            assert server.settle(timeout=30.0).chat_requests == []
            assert time.monotonic() - started < 25.0
            # the same connection sends a request after all: it is read and recorded
            idle.sendall(_request({"model": "m", "messages": []}))
            assert idle.recv(4096).startswith(b"HTTP/1.1 200")
        finally:
            idle.close()
        assert len(server.settle(timeout=30.0).chat_requests) == 1


def test_settle_waits_for_a_request_whose_bytes_have_arrived() -> None:
    with FakeOpenAIServer() as server:
        server.script(Reply.json({"answer": "yes"}).delayed(0.5))
        with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
            conn.sendall(_request({"model": "m", "messages": []}))
            # the bytes are in the server's buffer now; settle must not return before they
            # are read and the request recorded
            assert len(server.settle(timeout=30.0).chat_requests) == 1
