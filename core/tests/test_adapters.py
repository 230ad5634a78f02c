"""What the framework adapters share (``rankseam.plugin``: search_arguments, hits_metadata,
reranked_items), against a real store and a real DocumentReranker."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.plugin import hits_metadata, reranked_items, search_arguments
from rankseam.types import Candidate, RerankDecision


class Reverse:
    policy_id = "test.reverse.v1"

    async def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


def test_search_arguments_leave_the_configured_default_alone() -> None:
    assert search_arguments() == {"namespace": None, "pool": None, "on_error": None}
    chosen = search_arguments(namespace="n", reranker="none", reranker_options={"x": 1}, pool=5)
    assert chosen == {
        "namespace": "n",
        "pool": 5,
        "on_error": None,
        "reranker": "none",
        "reranker_options": {"x": 1},
    }
    assert "reranker_options" not in search_arguments(reranker="mmr", reranker_options={})


def test_search_arguments_drive_a_real_search(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker="identity") as memory:
        memory.add("a note about lunch", memory_id="a", metadata={"revision": "not mine"})
        configured = memory.search("lunch", 1, **search_arguments())
        coarse = memory.search("lunch", 1, **search_arguments(reranker="none"))
    assert configured.trace.rerank is not None and coarse.trace.rerank is None
    (meta,) = hits_metadata(configured)
    hit = configured.hits[0]
    assert meta == {
        "namespace": hit.ref.namespace,
        "memory_id": "a",
        "revision": 1,  # the memory's own metadata can never overwrite the citation
        "score": hit.score,
        "rerank_score": None,
        "matched_by": list(hit.matched_by),
        "memory_metadata": {"revision": "not mine"},
        "rerank_trace": configured.trace.rerank.to_dict(),
    }
    assert "rerank_trace" not in hits_metadata(configured, with_trace=False)[0]
    assert hits_metadata(coarse)[0]["rerank_trace"] is None


def test_reranked_items_follow_positions_never_texts() -> None:
    items = [{"src": "first"}, {"src": "second"}, {"src": "third"}]
    result = rankseam.open_reranker(Reverse()).rerank("q", ["same"] * 3, 2)
    selected = reranked_items(items, result)
    assert [item["src"] for item, _ in selected] == ["third", "second"]
    trace = result.trace.rerank
    assert trace is not None
    assert [rerank for _, rerank in selected] == [
        {"coarse_rank": 3, "rerank_score": None, "trace": trace.to_dict()},
        {"coarse_rank": 2, "rerank_score": None, "trace": trace.to_dict()},
    ]


def test_reranked_items_refuse_what_is_not_a_document_rerank(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("a note")
        searched = memory.search("note")
    with pytest.raises(TypeError, match="DocumentReranker.rerank"):
        reranked_items(["x"], searched)  # type: ignore[arg-type]
    result = rankseam.open_reranker(Reverse()).rerank("q", ["a", "b", "c"])
    with pytest.raises(ValueError, match="outside the 2 items"):
        reranked_items(["a", "b"], result)
