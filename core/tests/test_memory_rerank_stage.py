"""The rerank stage through Memory: skipped entirely when no reranker is assembled or the pool
is empty, and called exactly once otherwise (a recording reranker installed as a real plugin)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import rankseam

RECORDING = """
import rankseam
from rankseam.types import RerankDecision

CALLS = []
BUILT = []

class Recording:
    policy_id = "test.recording.v1"

    async def rerank(self, query, candidates, limit, /):
        CALLS.append((query, len(candidates), limit))
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])

def make(options, context):
    BUILT.append(dict(options))
    return Recording()

@rankseam.hookimpl
def register_rerankers(register):
    register("recording", make)
"""

TEXTS = [
    "the spare key is under the blue flowerpot",
    "the spare tyre is in the boot of the car",
    "the blue jacket is at the dry cleaner",
    "key lime pie recipe from grandma",
]


def test_no_reranker_means_coarse_order_and_no_call(
    tmp_path: Path, install: Callable[..., None]
) -> None:
    install("recording", RECORDING, module="rs_test_recording")
    module = sys.modules.get("rs_test_recording")
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        for text in TEXTS:
            memory.add(text)
        plain = memory.search("spare key blue", limit=3)
        module = sys.modules["rs_test_recording"] if module is None else module
        assert plain.trace.rerank is None and plain.status.value == "skipped"
        assert [h.ref for h in plain.hits] == [c.ref for c in plain.trace.coarse][:3]
        assert [h.score for h in plain.hits] == [c.score for c in plain.trace.coarse][:3]

        reranked = memory.search("spare key blue", limit=3, reranker="recording")
        assert len(module.CALLS) == 1
        assert [h.ref for h in reranked.hits] == [c.ref for c in reranked.trace.coarse][::-1][:3]

        explicit_none = memory.search("spare key blue", limit=3, reranker=None)
        assert explicit_none.hits == plain.hits and len(module.CALLS) == 1

        empty = memory.search("spare key blue", limit=3, reranker="recording", namespace="empty")
        assert empty.hits == () and empty.trace.rerank is None
        assert len(module.CALLS) == 1  # an empty pool never calls the reranker

    configured = tmp_path / "rankseam.toml"
    configured.write_text('[search]\nreranker = "recording"\n')
    with rankseam.open_memory(tmp_path / "m.sqlite3", config_file=configured) as memory:
        result = memory.search("spare key blue", limit=3)
        assert result.trace.rerank is not None
        assert result.trace.rerank.policy_id == "test.recording.v1"
        assert len(module.CALLS) == 2
        memory.search("spare key blue", limit=3, reranker=None)
        assert len(module.CALLS) == 2


def test_a_limit_above_the_pool_size_widens_the_pool(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "wide.sqlite3", pool=5) as memory:
        memory.ingest({"text": f"note {i} about the garden and the spare key"} for i in range(40))
        assert len(memory.search("garden key", limit=3).hits) == 3
        wide = memory.search("garden key", limit=25)
        assert len(wide.hits) == 25 and wide.trace.pool_size == 25
        assert len(memory.search("garden key", limit=25, reranker="identity").hits) == 25
