"""The one runner of synchronous calls: a plugin that stops the host's event loop fails its own
search under the search's policy, and every later search on that Memory (or DocumentReranker)
works on a fresh loop."""

from __future__ import annotations

import asyncio
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
from rankseam.plugin import DecisionOutcome, DecisionResult

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
