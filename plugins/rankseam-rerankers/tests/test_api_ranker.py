"""One of the library's rankers that needs no weights: its hosted-API ranker, pointed at a
text-embeddings-inference style ``/rerank`` server on the loopback interface (word overlap as
the relevance). Real library code end to end, plus what a misbehaving server does to it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.errors import RerankError
from rankseam.types import RerankStatus

TEXTS = [
    "alice booked a flight to lisbon for the conference in may",
    "bob adopted a grey cat named pixel",
    "the lisbon conference dinner is on friday",
    "the garden needs watering twice a week",
]
QUERY = "lisbon conference"


class Server(ThreadingHTTPServer):
    mode = "ok"
    requests: list[dict[str, Any]]


class Handler(BaseHTTPRequestHandler):
    server: Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"auth": self.headers.get("Authorization"), **body})
        words = set(body["query"].split())
        scored = [
            {"index": i, "score": len(words & set(t.split())) / len(words), "text": t}
            for i, t in enumerate(body["texts"])
        ]
        scored.sort(key=lambda r: -r["score"])
        mode, status = self.server.mode, 200
        if mode == "nan":
            scored[0]["score"] = float("nan")  # json.dumps writes NaN; the client accepts it
        elif mode == "drop":
            scored = scored[:1]
        elif mode == "bad-index":
            scored[0]["index"] = 99
        elif mode == "error":
            status, scored = 503, {"error": "model overloaded"}  # type: ignore[assignment]
        payload = json.dumps(scored).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server(("127.0.0.1", 0), Handler)
    srv.requests = []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    with rankseam.open_memory(tmp_path / "m.sqlite3") as mem:
        for text in TEXTS:
            mem.add(text)
        yield mem


def search(memory: rankseam.Memory, server: Server, **kw: Any) -> rankseam.SearchResult:
    options = {
        "model": "overlap",
        "model_type": "text-embeddings-inference",
        "url": f"http://127.0.0.1:{server.server_address[1]}/rerank",
        "api_key": "test-key",
    }
    return memory.search(QUERY, limit=3, reranker="rerankers", reranker_options=options, **kw)


def test_the_api_ranker_reranks_with_the_servers_scores(
    memory: rankseam.Memory, server: Server
) -> None:
    result = search(memory, server)
    assert result.status is RerankStatus.OK
    assert [h.rerank_score for h in result.hits] == [1.0, 1.0, 0.0]
    assert {h.text for h in result.hits[:2]} == {TEXTS[0], TEXTS[2]}
    assert len(server.requests) == 1
    sent = server.requests[0]
    assert sent["auth"] == "Bearer test-key" and sent["query"] == QUERY
    assert sent["texts"] == [c.text for c in result.trace.coarse]  # the pool, in coarse order
    rerank = result.trace.rerank
    assert rerank is not None and rerank.descriptor["ranker"] == "APIRanker"
    assert rerank.usage.calls == 1 and rerank.usage.input_tokens is None  # unknown, not zero
    assert "test-key" not in json.dumps(result.trace.to_dict())


def test_a_nan_score_from_the_server_is_discarded(memory: rankseam.Memory, server: Server) -> None:
    server.mode = "nan"
    result = search(memory, server)
    assert result.status is RerankStatus.REPAIRED
    assert result.trace.rerank is not None and result.trace.rerank.discarded_rank_count == 1
    assert len(result.hits) == 2 and all(h.rerank_score is not None for h in result.hits)


def test_documents_the_server_dropped_are_counted(memory: rankseam.Memory, server: Server) -> None:
    server.mode = "drop"
    result = search(memory, server)
    assert result.status is RerankStatus.REPAIRED and len(result.hits) == 1
    assert result.trace.rerank is not None
    assert result.trace.rerank.discarded_rank_count == len(result.trace.coarse) - 1


@pytest.mark.parametrize("mode", ["error", "bad-index"])
def test_a_failing_server_fails_closed_or_degrades(
    memory: rankseam.Memory, server: Server, mode: str
) -> None:
    server.mode = mode
    with pytest.raises(RerankError) as info:
        search(memory, server)
    assert "reranker 'rankseam.rerank.rerankers.v1' failed" in str(info.value)
    result = search(memory, server, on_error="coarse")
    assert result.status is RerankStatus.DEGRADED
    assert all(h.rerank_score is None for h in result.hits)
    assert [h.ref for h in result.hits] == [c.ref for c in result.trace.coarse][:3]
