"""What the framework adapters share (``rankseam.plugin.adapters``: search_arguments,
hits_metadata, result_score, upstream_scores, reranked_items), against a real store and a real
DocumentReranker."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.adapters import ADAPTER_KEYS
from rankseam.errors import ValidationError
from rankseam.plugin.adapters import (
    FILTER_ARGUMENTS,
    check_filter,
    hits_metadata,
    reranked_items,
    result_score,
    search_arguments,
    upstream_scores,
)
from rankseam.types import Candidate, RerankDecision


class Reverse:
    policy_id = "test.reverse.v1"

    async def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


class ScoredReverse:
    """Reverse, with a score of its own for each rank it selects."""

    policy_id = "test.scored-reverse.v1"

    async def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        ranks = tuple(c.rank for c in reversed(candidates))[:limit]
        return RerankDecision(ranks, scores=tuple(10.0 + r for r in ranks))


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
        stored = {"revision": "not mine", "stored_revision": "mine too", "source": "chat"}
        memory.add("a note about lunch", memory_id="a", metadata=stored)
        configured = memory.search("lunch", 1, **search_arguments())
        coarse = memory.search("lunch", 1, **search_arguments(reranker="none"))
    assert configured.trace.rerank is not None and coarse.trace.rerank is None
    (meta,) = hits_metadata(configured)
    hit = configured.hits[0]
    assert meta == {
        "namespace": hit.ref.namespace,
        "memory_id": "a",
        "revision": 1,  # the memory's own metadata can never overwrite the citation
        "score": hit.score,  # identity gives no score of its own: the coarse one
        "coarse_score": hit.score,
        "rerank_score": None,
        "matched_by": list(hit.matched_by),
        "thread": None,  # the memory's place in a conversation: it has none
        "position": None,
        "derived_from": None,
        "source": "chat",  # stored metadata sits flat beside ours
        "stored_revision": "mine too",
        "stored_stored_revision": "not mine",  # a stored key of ours, prefixed until free
        "rerank_trace": configured.trace.rerank.to_dict(),
    }
    assert "rerank_trace" not in hits_metadata(configured, with_trace=False)[0]
    assert hits_metadata(coarse)[0]["rerank_trace"] is None


def test_search_arguments_pass_the_filter_on(tmp_path: Path) -> None:
    given = {"where": {"user": "dana"}, "thread": "t", "since": 1.0, "until": "2100-01-01",
             "min_score": 0.1}  # fmt: skip
    assert set(given) == set(FILTER_ARGUMENTS)
    assert search_arguments(**given) == {
        "namespace": None, "pool": None, "on_error": None, **given
    }  # fmt: skip

    class Settings:  # a retriever object: its attributes of the same names
        namespace = reranker = reranker_options = pool = on_error = None
        where = {"user": "dana"}
        min_score = 0.0

    assert search_arguments(Settings()) == {
        "namespace": None, "pool": None, "on_error": None,
        "where": {"user": "dana"}, "min_score": 0.0,  # 0.0 is a cut-off, not "unset"
    }  # fmt: skip
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("lunch with dana", memory_id="d", metadata={"user": "dana"})
        memory.add("lunch with sam", memory_id="s", metadata={"user": "sam"})
        hits = memory.search("lunch", 5, **search_arguments(Settings())).hits
    assert [h.ref.memory_id for h in hits] == ["d"]


def test_check_filter_names_the_frameworks_word() -> None:
    assert check_filter({"user": "dana"}, "filter") == {"user": "dana"}
    assert check_filter(None, "filter") is None and check_filter({}, "filter") is None
    with pytest.raises(ValidationError, match=r"^filter\['user'\]\['\$like'\]: unknown operator"):
        check_filter({"user": {"$like": "d%"}}, "filter")
    with pytest.raises(ValidationError, match=r"^filters must be a mapping"):
        check_filter(lambda doc: True, "filters")
    with pytest.raises(ValidationError, match=r"^where\['\$or'\]: \$or takes a non-empty list"):
        check_filter({"$or": []})


def test_every_stored_key_survives_beside_ours(tmp_path: Path) -> None:
    stored = {key: f"stored {key}" for key in ADAPTER_KEYS}
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("a note about lunch", memory_id="a", metadata=stored)
        (meta,) = hits_metadata(memory.search("lunch", 1, reranker="none"))
    assert {meta[f"stored_{key}"] for key in ADAPTER_KEYS} == set(stored.values())
    assert meta["memory_id"] == "a" and meta["revision"] == 1 and meta["score"] is not None
    assert "rerank" not in meta  # a search result carries no compressor's "rerank"


def test_the_score_is_the_rerankers_when_it_gives_one(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("a note about lunch", memory_id="a")
        memory.add("lunch with bob on monday", memory_id="b")
        result = memory.search("lunch", 2, reranker=ScoredReverse())
    metas = hits_metadata(result)
    assert [m["memory_id"] for m in metas] == [h.ref.memory_id for h in result.hits]
    for meta, hit in zip(metas, result.hits, strict=True):
        assert hit.rerank_score is not None
        assert meta["score"] == meta["rerank_score"] == hit.rerank_score
        assert meta["coarse_score"] == hit.score != meta["score"]
    assert result_score(0.5, None) == 0.5 and result_score(0.5, 12.0) == 12.0
    assert result_score(None, None) is None


def test_upstream_scores_are_used_only_when_every_input_has_a_number() -> None:
    assert upstream_scores([0.9, 1, 0.1]) == [0.9, 1.0, 0.1]
    for partial in ([0.9, None], [0.9, "0.8"], [0.9, True], [0.9, float("nan")], []):
        assert upstream_scores(partial) is None, partial


def test_reranked_items_follow_positions_never_texts() -> None:
    items = [{"src": "first"}, {"src": "second"}, {"src": "third"}]
    result = rankseam.open_reranker(Reverse()).rerank("q", ["same"] * 3, 2)
    selected = reranked_items(items, result)
    assert [item["src"] for item, _ in selected] == ["third", "second"]
    trace = result.trace.rerank
    assert trace is not None
    assert [rerank for _, rerank in selected] == [
        {"coarse_rank": 3, "coarse_score": None, "rerank_score": None, "trace": trace.to_dict()},
        {"coarse_rank": 2, "coarse_score": None, "rerank_score": None, "trace": trace.to_dict()},
    ]


def test_reranked_items_carry_the_upstream_and_the_rerank_scores() -> None:
    items = ["first", "second", "third"]
    scores = [0.3, 0.2, 0.1]
    result = rankseam.open_reranker(ScoredReverse()).rerank("q", items, 2, scores=scores)
    assert [
        (item, rerank["coarse_score"], rerank["rerank_score"])
        for item, rerank in reranked_items(items, result, scores)
    ] == [("third", 0.1, 13.0), ("second", 0.2, 12.0)]
    with pytest.raises(ValueError, match="one number per item"):
        reranked_items(items, result, scores[:2])


def test_reranked_items_refuse_what_is_not_a_document_rerank(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3") as memory:
        memory.add("a note")
        searched = memory.search("note")
    with pytest.raises(TypeError, match="DocumentReranker.rerank"):
        reranked_items(["x"], searched)  # type: ignore[arg-type]
    result = rankseam.open_reranker(Reverse()).rerank("q", ["a", "b", "c"])
    with pytest.raises(ValueError, match="outside the 2 items"):
        reranked_items(["a", "b"], result)
