"""The search path holds no lock while a reranker runs (docs/store.md): a search whose reranker
sleeps 1 s does not delay a write or another search of the same namespace, and its hits still
cite exact revisions when a write lands meanwhile. Timings are measured inside the test with
generous margins (this is a behaviour check, not a benchmark)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from rankseam.memory import Memory, open_memory
from rankseam.types import Candidate, RerankDecision

SLEEP_S = 1.0
FAST_S = 0.5  # what "well before" means: at most half the reranker's sleep


class SleepyReranker:
    """Keeps the coarse order, after blocking its thread for ``SLEEP_S`` (a slow model call)."""

    policy_id = "test.sleepy.v1"
    descriptor: dict[str, Any] = {"name": "sleepy"}
    deterministic = True
    needs_embeddings = False

    def __init__(self) -> None:
        self.entered = threading.Event()

    def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> RerankDecision:
        self.entered.set()
        time.sleep(SLEEP_S)
        return RerankDecision(tuple(range(1, min(limit, len(candidates)) + 1)))


class AsyncSleepyReranker(SleepyReranker):
    async def rerank(  # type: ignore[override]
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        self.entered.set()
        await asyncio.sleep(SLEEP_S)
        return RerankDecision(tuple(range(1, min(limit, len(candidates)) + 1)))


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with open_memory(tmp_path / "lockfree.sqlite3", namespace="shared") as m:
        m.ingest({"id": f"m{i}", "text": f"lantern river note {i}"} for i in range(200))
        yield m


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float, float]:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    end = time.perf_counter()
    return out, end - start, end


def test_slow_reranker_does_not_delay_writes_or_other_searches(memory: Memory) -> None:
    slow = SleepyReranker()
    box: dict[str, Any] = {}

    def slow_search() -> None:
        try:
            box["result"] = memory.search("lantern river", 10, reranker=slow)
        except BaseException as exc:  # pragma: no cover - reported below
            box["error"] = exc
        box["end"] = time.perf_counter()

    thread = threading.Thread(target=slow_search)
    thread.start()
    assert slow.entered.wait(10), "the slow search never reached its reranker"
    entered_at = time.perf_counter()

    added, add_s, add_end = _timed(
        memory.add, "zeppelin arrives during a slow search", memory_id="late"
    )
    # a write to a memory that the slow search's pool holds
    pool_ids = {c.ref.memory_id for c in memory.search("lantern river", 30, reranker=None).hits}
    target_id = sorted(pool_ids)[0]
    _, update_s, update_end = _timed(memory.update, target_id, "lantern river, rewritten")
    plain, plain_s, plain_end = _timed(memory.search, "zeppelin", 5, reranker=None)

    thread.join(10)
    assert "error" not in box, box.get("error")
    slow_end = box["end"]
    assert slow_end - entered_at >= SLEEP_S * 0.9  # the sleep really overlapped
    for what, took, end in (
        ("add", add_s, add_end),
        ("update", update_s, update_end),
        ("plain search", plain_s, plain_end),
    ):
        assert took < FAST_S, f"{what} took {took:.3f}s while a reranker slept"
        assert end < slow_end - SLEEP_S / 4, f"{what} finished only when the slow search did"
    # the concurrent write is visible to the concurrent search
    assert added.ref is not None and plain.hits[0].ref == added.ref
    # the slow search's hits cite exact revisions: text and identity of the same revision
    result = box["result"]
    assert len(result.hits) == 10
    for hit in result.hits:
        assert memory.get(hit.ref).text == hit.text
        assert hit.ref.revision == 1  # it read its pool before the update landed
    assert memory.get(target_id).ref.revision == 2


def test_async_searches_run_concurrently(memory: Memory) -> None:
    slow = AsyncSleepyReranker()

    async def main() -> tuple[float, float, float]:
        start = time.perf_counter()
        slow_task = asyncio.create_task(memory.asearch("lantern", 10, reranker=slow))
        while not slow.entered.is_set():
            await asyncio.sleep(0.005)
        await asyncio.to_thread(memory.add, "quokka seen at dusk", memory_id="q")
        fast = await memory.asearch("quokka", 3, reranker=None)
        fast_end = time.perf_counter()
        assert fast.hits[0].ref.memory_id == "q"
        await slow_task
        return start, fast_end, time.perf_counter()

    start, fast_end, slow_end = asyncio.run(main())
    assert slow_end - start >= SLEEP_S * 0.9
    assert fast_end - start < slow_end - start - SLEEP_S / 4
