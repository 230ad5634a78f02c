"""The one runner of synchronous calls: a plugin that stops the host's event loop fails its own
search under the search's policy, and every later search on that Memory (or DocumentReranker)
works on a fresh loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam import RerankDecision, RerankError, RerankStatus
from rankseam.loop import Reentrant


class StopsTheLoop:
    """Stops the event loop it runs on, then answers as if nothing happened."""

    policy_id = "test.stops-the-loop.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        asyncio.get_running_loop().stop()
        return RerankDecision(tuple(range(limit, 0, -1)))


class ClosesTheLoop:
    policy_id = "test.closes-the-loop.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        asyncio.get_running_loop().close()
        return RerankDecision((1,))


class Reverses:
    """Awaits (so it needs the loop thread), then reverses the pool."""

    policy_id = "test.reverses.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        await asyncio.sleep(0)
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("RANKSEAM_RERANK", raising=False)
    with rankseam.open_memory(tmp_path / "m.sqlite3") as mem:
        for i in range(8):
            mem.add(f"note {i}: the spare key is under flowerpot number {i}")
        yield mem


def _later_searches_work(memory: Any) -> None:
    plain = memory.search("spare key flowerpot", 5, reranker=None)
    coarse = [h.ref for h in plain]
    for _ in range(3):
        again = memory.search("spare key flowerpot", 5, reranker=Reverses())
        assert again.trace.rerank.status is RerankStatus.OK
        full = [c.ref for c in again.trace.coarse]
        assert [h.ref for h in again] == full[::-1][:5]
        assert memory.search("spare key flowerpot", 5, reranker="identity").hits == plain.hits
    assert coarse == [h.ref for h in memory.search("spare key flowerpot", 5, reranker=None)]


def test_a_reranker_that_stops_the_loop_fails_its_search_closed(memory: Any) -> None:
    with pytest.raises(RerankError, match="stopped") as info:
        memory.search("spare key flowerpot", 5, reranker=StopsTheLoop())
    assert info.value.reason == "exception"
    assert info.value.policy_id == "test.stops-the-loop.v1"
    _later_searches_work(memory)


def test_a_reranker_that_stops_the_loop_degrades_under_on_error_coarse(memory: Any) -> None:
    plain = memory.search("spare key flowerpot", 5, reranker=None)
    result = memory.search("spare key flowerpot", 5, reranker=StopsTheLoop(), on_error="coarse")
    assert result.trace.rerank.status is RerankStatus.DEGRADED
    assert result.trace.rerank.reason == "exception: RerankError"
    assert [h.ref for h in result] == [h.ref for h in plain]
    _later_searches_work(memory)


def test_a_reranker_that_tries_to_close_the_loop_fails_its_search(memory: Any) -> None:
    with pytest.raises(RerankError, match="Cannot close a running event loop"):
        memory.search("spare key flowerpot", 5, reranker=ClosesTheLoop())
    result = memory.search("spare key flowerpot", 5, reranker=ClosesTheLoop(), on_error="coarse")
    assert result.trace.rerank.status is RerankStatus.DEGRADED
    _later_searches_work(memory)


def test_documents_a_reranker_that_stops_the_loop_fails_its_call_only() -> None:
    texts = ["alpha one", "beta two", "gamma three"]
    with pytest.raises(RerankError, match="stopped"):
        rankseam.open_reranker(StopsTheLoop()).rerank("q", texts, 2)
    degraded = rankseam.open_reranker(StopsTheLoop(), on_error="coarse").rerank("q", texts, 2)
    assert degraded.trace.rerank.status is RerankStatus.DEGRADED
    assert degraded.positions == (0, 1)
    result = rankseam.open_reranker(Reverses()).rerank("q", texts, 2)
    assert result.positions == (2, 1) and result.trace.rerank.status is RerankStatus.OK


def test_a_synchronous_search_from_inside_its_own_loop_is_refused(memory: Any) -> None:
    """A reranker running on the Memory's loop thread that calls Memory.search synchronously
    would wait on itself: the runner refuses (Reentrant), which fails that reranker."""

    class SearchesAgain:
        policy_id = "test.searches-again.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            await asyncio.sleep(0)
            memory.search("spare", 1, reranker=Reverses())
            return RerankDecision((1,))

    with pytest.raises(RerankError) as info:
        memory.search("spare key flowerpot", 5, reranker=SearchesAgain())
    assert isinstance(info.value.__cause__, Reentrant)
    assert isinstance(info.value.__cause__, RuntimeError)
    _later_searches_work(memory)


GATE = """
import asyncio

import rankseam
from rankseam.plugin.decision import DecisionOutcome, DecisionResult

CALLS = []

class StopsOnce:
    policy_id = "test.gate-stops-once.v1"

    async def evaluate(self, request, /):
        CALLS.append(request)
        if len(CALLS) == 1:
            asyncio.get_running_loop().stop()
        await asyncio.sleep(0)
        return DecisionResult(DecisionOutcome.YES, self.policy_id)

@rankseam.hookimpl
def register_decision_backends(register):
    register("stops-once", lambda options, context: StopsOnce())
"""


@pytest.mark.parametrize("policy", ["fail_open", "fail_closed"])
def test_a_gate_backend_that_stops_the_loop_gets_no_verdict_once(
    tmp_path: Path, install: Any, policy: str
) -> None:
    install("stops_once", GATE, module=f"rs_test_gate_{policy}")
    gate = {"write_gate": True, "write_gate_backend": "stops-once"}
    with rankseam.open_memory(
        tmp_path / "g.sqlite3", write_gate_failure_policy=policy, **gate
    ) as memory:
        if policy == "fail_open":
            first = memory.add("the spare key is under the flowerpot")
            assert first.gate is not None and first.gate.degraded and first.ref is not None
        else:
            with pytest.raises(rankseam.WriteGateError, match="stopped the event loop") as info:
                memory.add("the spare key is under the flowerpot")
            assert info.value.reason == "exception"
        second = memory.add("the spare tyre is in the boot")
        assert second.gate is not None and not second.gate.degraded and second.ref is not None
        assert len(memory.search("spare", 5, reranker=None)) == (2 if policy == "fail_open" else 1)


def test_a_search_without_a_reranker_starts_no_event_loop(memory: Any) -> None:
    def loop_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "rankseam-memory-loop"]

    before = loop_threads()
    for _ in range(3):
        memory.search("spare key flowerpot", 5, reranker=None)
        memory.search("spare key flowerpot", 5, reranker="identity")  # runs inline
    assert loop_threads() == before


def test_documents_a_reranker_that_blocks_the_loop_is_abandoned_at_the_deadline() -> None:
    """DocumentReranker.rerank runs on the host's runner like a synchronous search: a reranker
    that blocks its event loop releases the call at the deadline plus the margin (the verdict:
    the call came back while the reranker was still blocked)."""

    class BlocksTheLoop:
        policy_id = "test.blocks-the-loop.v1"

        def __init__(self) -> None:
            self.release = threading.Event()

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            self.release.wait(60)  # synchronous code in an async def
            return RerankDecision((1,))

    blocking = BlocksTheLoop()
    reranker = rankseam.open_reranker(
        blocking, config={"search": {"rerank_deadline_s": 0.2}}, on_error="coarse"
    )
    try:
        result = reranker.rerank("q", ["alpha one", "beta two", "gamma three"], 2)
        assert not blocking.release.is_set()
        assert result.trace.rerank.status is RerankStatus.DEGRADED
        assert result.trace.rerank.reason == "timeout: RerankError"
        assert result.positions == (0, 1)
    finally:
        blocking.release.set()
    after = rankseam.open_reranker(Reverses()).rerank("q", ["alpha one", "beta two"], 2)
    assert after.positions == (1, 0)
