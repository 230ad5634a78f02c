"""RankseamCompressor against the real langchain-core, alone and inside LangChain's
ContextualCompressionRetriever (langchain-classic); sync and async."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.documents import BaseDocumentCompressor, Document

import rankseam
from rankseam.types import RerankDecision
from rankseam_langchain import RankseamCompressor, RankseamRetriever

DOCS = [
    Document("Dana's birthday dinner is on Friday at the Thai place", metadata={"src": "a"}),
    Document(
        "Dana's birthday dinner is Friday at the Thai place on Main St", metadata={"src": "b"}
    ),
    Document("Moved the weekly standup to 9:30", metadata={"src": "c"}),
    Document("Bob's cat only eats salmon-flavoured food", metadata={"src": "d"}),
]


def test_is_a_langchain_document_compressor() -> None:
    assert isinstance(RankseamCompressor(reranker="identity"), BaseDocumentCompressor)


def test_runs_an_installed_reranker_and_never_touches_the_inputs() -> None:
    before = copy.deepcopy(DOCS)
    compressor = RankseamCompressor(reranker="mmr", options={"lambda": 0.0}, top_n=3)
    out = compressor.compress_documents(DOCS, "dana's birthday dinner")
    assert DOCS == before  # inputs unchanged
    srcs = [d.metadata["src"] for d in out]
    assert len(out) == 3 and srcs[0] == "a"
    assert "b" not in srcs  # the near-duplicate is pushed out by pure diversity
    for doc in out:
        rerank = doc.metadata["rerank"]
        assert DOCS[rerank["coarse_rank"] - 1].page_content == doc.page_content
        assert rerank["trace"]["policy_id"] == "rankseam.rerank.mmr.v1"
        assert rerank["trace"]["status"] == "ok"
        assert rerank["trace"]["selected_ranks"] == [
            d.metadata["rerank"]["coarse_rank"] for d in out
        ]


def test_identity_keeps_the_input_order_up_to_top_n() -> None:
    out = RankseamCompressor(reranker="identity", top_n=2).compress_documents(DOCS, "dinner")
    assert [d.page_content for d in out] == [d.page_content for d in DOCS[:2]]


def test_async_matches_sync() -> None:
    compressor = RankseamCompressor(reranker="mmr", options={"lambda": 0.3}, top_n=4)
    sync = compressor.compress_documents(DOCS, "dinner friday")
    async_out = asyncio.run(compressor.acompress_documents(DOCS, "dinner friday"))
    assert [d.metadata["src"] for d in async_out] == [d.metadata["src"] for d in sync]


def test_empty_input_calls_no_reranker() -> None:
    assert RankseamCompressor(reranker="mmr").compress_documents([], "anything") == []


class _Misbehaving:
    """A third-party reranker that answers out-of-range and repeated ranks."""

    policy_id = "test.misbehaving.v1"

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        return RerankDecision(selected_ranks=(3, 3, 99, 0, 1))


def test_the_seam_validates_the_rerankers_positions() -> None:
    out = RankseamCompressor(reranker=_Misbehaving(), top_n=3).compress_documents(DOCS, "q")
    assert [d.metadata["src"] for d in out] == ["c", "a"]
    trace = out[0].metadata["rerank"]["trace"]
    assert trace["status"] == "repaired"
    assert trace["discarded_rank_count"] == 3


class _Failing:
    policy_id = "test.failing.v1"

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        raise RuntimeError("backend down")


def test_a_failing_reranker_fails_closed_or_visibly_degraded() -> None:
    with pytest.raises(rankseam.RerankError, match="backend down"):
        RankseamCompressor(reranker=_Failing()).compress_documents(DOCS, "q")
    out = RankseamCompressor(reranker=_Failing(), on_error="coarse", top_n=2).compress_documents(
        DOCS, "q"
    )
    assert [d.metadata["src"] for d in out] == ["a", "b"]
    assert out[0].metadata["rerank"]["trace"]["status"] == "degraded"


def test_an_unknown_reranker_fails_when_built() -> None:
    with pytest.raises(rankseam.ConfigurationError, match="no reranker named 'nope'"):
        RankseamCompressor(reranker="nope")


def test_inside_a_contextual_compression_retriever(memory: rankseam.Memory) -> None:
    pipeline = ContextualCompressionRetriever(
        base_compressor=RankseamCompressor(reranker="mmr", options={"lambda": 0.0}, top_n=2),
        base_retriever=RankseamRetriever(memory=memory, k=4),
    )
    docs = pipeline.invoke("dana's birthday dinner at the thai place")
    assert len(docs) == 2
    ids = [d.metadata["memory_id"] for d in docs]
    assert len({"dinner-1", "dinner-2"} & set(ids)) == 1
    for doc in docs:  # the retriever's citation survives the compressor
        assert doc.metadata["revision"] == 1
        assert doc.metadata["rerank"]["trace"]["policy_id"] == "rankseam.rerank.mmr.v1"
    async_docs = asyncio.run(pipeline.ainvoke("dana's birthday dinner at the thai place"))
    assert [d.metadata["memory_id"] for d in async_docs] == ids


class _Reverse:
    policy_id = "test.reverse.v1"

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


def test_documents_with_the_same_text_are_told_apart_by_position() -> None:
    same = [Document("the same words", metadata={"src": key}) for key in ("1st", "2nd", "3rd")]
    out = RankseamCompressor(reranker=_Reverse(), top_n=3).compress_documents(same, "q")
    assert [d.metadata["src"] for d in out] == ["3rd", "2nd", "1st"]
    assert [d.metadata["rerank"]["coarse_rank"] for d in out] == [3, 2, 1]


def test_none_keeps_the_input_order_without_a_reranker() -> None:
    out = RankseamCompressor(reranker="none", top_n=2).compress_documents(DOCS, "dinner")
    assert [d.metadata["src"] for d in out] == ["a", "b"]
    assert [d.metadata["rerank"] for d in out] == [
        {"coarse_rank": 1, "coarse_score": None, "rerank_score": None, "trace": None},
        {"coarse_rank": 2, "coarse_score": None, "rerank_score": None, "trace": None},
    ]
    assert all("score" not in d.metadata for d in out)  # none upstream, none from a reranker


def scored(scores: list[Any]) -> list[Document]:
    return [
        Document(d.page_content, metadata={**d.metadata, "score": score})
        for d, score in zip(DOCS, scores, strict=True)
    ]


def test_upstream_scores_are_the_relevance_the_reranker_sees() -> None:
    given = scored([1.0, 0.9, 0.8, 5.0])  # the upstream retriever says "d" is by far the best
    out = RankseamCompressor(reranker="mmr", options={"lambda": 1.0}, top_n=2)
    picked = out.compress_documents(given, "q")
    assert [d.metadata["src"] for d in picked] == ["d", "a"]
    assert [d.metadata["rerank"]["coarse_score"] for d in picked] == [5.0, 1.0]
    assert [d.metadata["score"] for d in picked] == [5.0, 1.0]  # mmr gives no score: kept
    # without a score on every document, the input order is the relevance
    partial = [*given[:3], DOCS[3]]
    assert [d.metadata["src"] for d in out.compress_documents(partial, "q")] == ["a", "b"]
    assert out.compress_documents(partial, "q")[0].metadata["rerank"]["coarse_score"] is None


class _ScoredReverse:
    policy_id = "test.scored-reverse.v1"

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        ranks = tuple(c.rank for c in reversed(candidates))[:limit]
        return RerankDecision(ranks, scores=tuple(10.0 + r for r in ranks))


def test_a_rerankers_own_score_becomes_the_documents_score() -> None:
    given = scored([0.4, 0.3, 0.2, 0.1])
    out = RankseamCompressor(reranker=_ScoredReverse(), top_n=2).compress_documents(given, "q")
    assert [d.metadata["src"] for d in out] == ["d", "c"]
    assert [d.metadata["score"] for d in out] == [14.0, 13.0]
    assert [d.metadata["rerank"]["coarse_score"] for d in out] == [0.1, 0.2]
    assert [d.metadata["score"] for d in given] == [0.4, 0.3, 0.2, 0.1]  # inputs untouched


def test_a_chain_of_rerankers() -> None:
    compressor = RankseamCompressor(
        reranker=["identity", {"name": "mmr", "options": {"lambda": 0.0}}], top_n=3
    )
    out = compressor.compress_documents(DOCS, "dinner")
    trace = out[0].metadata["rerank"]["trace"]
    assert [s["policy_id"] for s in trace["stages"]] == [
        "rankseam.rerank.identity.v1",
        "rankseam.rerank.mmr.v1",
    ]
    assert len(out) == 3
