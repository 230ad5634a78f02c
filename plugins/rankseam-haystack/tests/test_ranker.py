"""RankseamRanker: any installed rankseam reranker (or chain) as a Haystack ranker component."""

from __future__ import annotations

import asyncio
import copy

import pytest
from haystack.dataclasses import Document

from rankseam.errors import ConfigurationError, ValidationError
from rankseam.testing import SAMPLE_MEMORIES, OverlapReranker
from rankseam_haystack import RankseamRanker

QUERY = "dana's birthday dinner"


def documents(scores: bool = True) -> list[Document]:
    return [
        Document(
            id=key,
            content=text,
            meta={"src": key},
            score=round(1.0 - i * 0.1, 2) if scores else None,
        )
        for i, (key, text) in enumerate(SAMPLE_MEMORIES)
    ]


def ranked(out: list[Document]) -> list[tuple[str, float | None, list[int]]]:
    """What a run decided (its trace's latency differs from run to run)."""
    return [(d.id, d.score, d.meta["rerank"]["trace"]["selected_ranks"]) for d in out]


def test_runs_an_installed_reranker_and_never_touches_the_inputs() -> None:
    given = documents()
    before = copy.deepcopy(given)
    ranker = RankseamRanker("mmr", options={"lambda": 0.0}, top_k=3)
    out = ranker.run(QUERY, given)["documents"]
    assert given == before
    ids = [d.id for d in out]
    assert len(out) == 3 and ids[0] == "dinner-1" and "dinner-2" not in ids
    trace = out[0].meta["rerank"]["trace"]
    assert trace["policy_id"] == "rankseam.rerank.mmr.v1" and trace["status"] == "ok"
    assert trace["selected_ranks"] == [d.meta["rerank"]["coarse_rank"] for d in out]
    for d in out:  # mmr gives no score of its own: each keeps its input score
        source = given[d.meta["rerank"]["coarse_rank"] - 1]
        assert d.score == source.score == d.meta["rerank"]["coarse_score"]
        assert d.meta["src"] == source.meta["src"] and d.content == source.content


def test_a_rerankers_own_scores_and_no_input_scores() -> None:
    out = RankseamRanker(OverlapReranker(), top_k=2).run("standup moved", documents(False))
    [first, second] = out["documents"]
    assert first.id == "standup" and first.score == 1.0
    assert first.meta["rerank"] == {
        "coarse_rank": 3,
        "coarse_score": None,  # no input scores: the input order was the relevance
        "rerank_score": 1.0,
        "trace": first.meta["rerank"]["trace"],
    }
    assert second.score == second.meta["rerank"]["rerank_score"] < 1.0


def test_a_chain_and_top_k() -> None:
    ranker = RankseamRanker([{"name": "mmr", "options": {"lambda": 0.0}}, "identity"], top_k=3)
    assert ranker.document_reranker.policy_id.endswith(
        "rankseam.rerank.mmr.v1>rankseam.rerank.identity.v1"
    )
    assert len(ranker.run(QUERY, documents())["documents"]) == 3
    assert len(ranker.run(QUERY, documents(), top_k=1)["documents"]) == 1
    with pytest.raises(ValidationError, match="top_k must be a positive"):
        ranker.run(QUERY, documents(), top_k=-1)


def test_use_embeddings_reranks_by_the_documents_own_vectors() -> None:
    docs = [
        Document(id="a", content="apples are red", embedding=[1.0, 0.0]),
        Document(id="b", content="the train leaves at nine", embedding=[1.0, 0.0]),
        Document(id="c", content="apples are red and sweet", embedding=[0.0, 1.0]),
    ]
    by_text = RankseamRanker("mmr", options={"lambda": 0.0}, top_k=2).run("apples", docs)
    assert [d.id for d in by_text["documents"]] == ["a", "b"]  # c's text is near a's
    own = RankseamRanker("mmr", options={"lambda": 0.0}, top_k=2, use_embeddings=True)
    assert [d.id for d in own.run("apples", docs)["documents"]] == ["a", "c"]  # b's vector is a's
    with pytest.raises(ValidationError, match=r"documents \[1\] have no embedding"):
        own.run("apples", [docs[0], Document(content="no vector")])


def test_empty_input_and_mistakes() -> None:
    ranker = RankseamRanker("mmr")
    assert ranker.run(QUERY, []) == {"documents": []}
    with pytest.raises(ValidationError, match=r"documents\[0\] .* has no text content"):
        ranker.run(QUERY, [Document(content=None)])
    with pytest.raises(ConfigurationError, match="no-such-reranker"):
        RankseamRanker("no-such-reranker")


def test_run_async_answers_as_run() -> None:
    ranker = RankseamRanker("mmr", options={"lambda": 0.3}, top_k=3)
    sync = ranker.run(QUERY, documents())["documents"]
    async_ = asyncio.run(ranker.run_async(QUERY, documents()))["documents"]
    assert ranked(async_) == ranked(sync)


def test_to_dict_and_from_dict() -> None:
    ranker = RankseamRanker("mmr", options={"lambda": 0.5}, top_k=4, on_error="fail_open")
    data = ranker.to_dict()
    assert data == {
        "type": "rankseam_haystack.ranker.RankseamRanker",
        "init_parameters": {
            "reranker": "mmr",
            "options": {"lambda": 0.5},
            "top_k": 4,
            "on_error": "fail_open",
            "config_file": None,
            "use_embeddings": False,
        },
    }
    again = RankseamRanker.from_dict(data)
    first, second = (r.run(QUERY, documents())["documents"] for r in (again, ranker))
    assert ranked(first) == ranked(second)
    with pytest.raises(ValidationError, match="cannot serialise the reranker object"):
        RankseamRanker(OverlapReranker()).to_dict()
