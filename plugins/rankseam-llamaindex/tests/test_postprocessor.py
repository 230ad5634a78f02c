"""RankseamNodePostprocessor against the real llama-index-core, alone and inside a
RetrieverQueryEngine; sync and async."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from llama_index.core import Settings
from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

import rankseam
from rankseam.testing import OverlapReranker
from rankseam.types import RerankDecision
from rankseam_llamaindex import RankseamNodePostprocessor, RankseamRetriever

TEXTS = [
    ("a", "Dana's birthday dinner is on Friday at the Thai place"),
    ("b", "Dana's birthday dinner is Friday at the Thai place on Main St"),
    ("c", "Moved the weekly standup to 9:30"),
    ("d", "Bob's cat only eats salmon-flavoured food"),
]


def nodes(scores: bool = True) -> list[NodeWithScore]:
    return [
        NodeWithScore(
            node=TextNode(text=text, id_=key, metadata={"src": key}),
            score=1.0 - i * 0.1 if scores else None,
        )
        for i, (key, text) in enumerate(TEXTS)
    ]


def test_is_a_node_postprocessor() -> None:
    assert isinstance(RankseamNodePostprocessor(reranker="identity"), BaseNodePostprocessor)


def test_runs_an_installed_reranker_and_never_touches_the_inputs() -> None:
    given = nodes()
    before = copy.deepcopy(given)
    post = RankseamNodePostprocessor(reranker="mmr", options={"lambda": 0.0}, top_n=3)
    out = post.postprocess_nodes(given, query_str="dana's birthday dinner")
    assert [n.node.metadata for n in given] == [n.node.metadata for n in before]
    assert [n.score for n in given] == [n.score for n in before]
    keys = [n.node.node_id for n in out]
    assert len(out) == 3 and keys[0] == "a" and "b" not in keys
    trace = out[0].node.metadata["rerank"]["trace"]
    assert trace["policy_id"] == "rankseam.rerank.mmr.v1" and trace["status"] == "ok"
    assert trace["selected_ranks"] == [n.node.metadata["rerank"]["coarse_rank"] for n in out]
    for n in out:  # input score kept; the trace stays out of the LLM's view
        position = n.node.metadata["rerank"]["coarse_rank"]
        assert n.score == given[position - 1].score
        assert "trace" not in n.node.get_content(metadata_mode=MetadataMode.LLM)


def test_node_scores_are_the_relevance_the_reranker_sees() -> None:
    given = nodes()
    given[3].score = 5.0  # the caller says "d" is by far the most relevant
    out = RankseamNodePostprocessor(reranker="mmr", options={"lambda": 1.0}, top_n=1)
    assert [n.node.node_id for n in out.postprocess_nodes(given, query_str="q")] == ["d"]


def test_async_matches_sync() -> None:
    post = RankseamNodePostprocessor(reranker="mmr", options={"lambda": 0.3}, top_n=4)
    sync = post.postprocess_nodes(nodes(), query_str="dinner friday")
    async_out = asyncio.run(post.apostprocess_nodes(nodes(), query_str="dinner friday"))
    assert [n.node.node_id for n in async_out] == [n.node.node_id for n in sync]


class _Misbehaving:
    policy_id = "test.misbehaving.v1"

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        return RerankDecision(selected_ranks=(3, 3, 99, 0, 1))


def test_the_seam_validates_the_rerankers_positions() -> None:
    out = RankseamNodePostprocessor(reranker=_Misbehaving(), top_n=3).postprocess_nodes(
        nodes(), query_str="q"
    )
    assert [n.node.node_id for n in out] == ["c", "a"]
    trace = out[0].node.metadata["rerank"]["trace"]
    assert trace["status"] == "repaired" and trace["discarded_rank_count"] == 3


def test_missing_query_and_unknown_reranker_are_clear_errors() -> None:
    with pytest.raises(rankseam.ValidationError, match="needs the query"):
        RankseamNodePostprocessor(reranker="identity").postprocess_nodes(nodes())
    with pytest.raises(rankseam.ConfigurationError, match="no reranker named 'nope'"):
        RankseamNodePostprocessor(reranker="nope")


def test_inside_a_retriever_query_engine(memory: rankseam.Memory) -> None:
    engine = RetrieverQueryEngine.from_args(
        RankseamRetriever(memory, similarity_top_k=4),
        llm=MockLLM(),
        node_postprocessors=[
            RankseamNodePostprocessor(reranker="mmr", options={"lambda": 0.0}, top_n=2)
        ],
    )
    query = QueryBundle("dana's birthday dinner at the thai place")
    got = engine.retrieve(query)
    ids = [n.node.metadata["memory_id"] for n in got]
    assert len(ids) == 2 and len({"dinner-1", "dinner-2"} & set(ids)) == 1
    assert all(n.node.metadata["revision"] == 1 for n in got)
    assert [n.node.metadata["memory_id"] for n in asyncio.run(engine.aretrieve(query))] == ids
    response = engine.query("dana's birthday dinner at the thai place")
    assert [n.node.metadata["memory_id"] for n in response.source_nodes] == ids


class _Reverse:
    policy_id = "test.reverse.v1"

    def rerank(self, query: str, candidates: Any, limit: int) -> RerankDecision:
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


def test_nodes_with_the_same_text_are_told_apart_by_position() -> None:
    same = [
        NodeWithScore(node=TextNode(text="the same words", id_=key, metadata={"src": key}))
        for key in ("first", "second", "third")
    ]
    out = RankseamNodePostprocessor(reranker=_Reverse(), top_n=3).postprocess_nodes(
        same, query_str="q"
    )
    assert [n.node.metadata["src"] for n in out] == ["third", "second", "first"]
    assert [n.node.metadata["rerank"]["coarse_rank"] for n in out] == [3, 2, 1]


def test_none_keeps_the_input_order_without_a_reranker() -> None:
    out = RankseamNodePostprocessor(reranker="none", top_n=2).postprocess_nodes(
        nodes(), query_str="q"
    )
    assert [n.node.node_id for n in out] == ["a", "b"]
    assert [n.node.metadata["rerank"]["trace"] for n in out] == [None, None]


def test_a_rerankers_own_score_becomes_the_nodes_score() -> None:
    given = nodes()
    out = RankseamNodePostprocessor(reranker=OverlapReranker(), top_n=2).postprocess_nodes(
        given, query_str="weekly standup moved"
    )
    assert [n.node.node_id for n in out] == ["c", "a"]
    assert [n.score for n in out] == [1.0, 0.0]
    assert [n.node.metadata["rerank"]["rerank_score"] for n in out] == [1.0, 0.0]
    assert [n.node.metadata["rerank"]["coarse_score"] for n in out] == [0.8, 1.0]
    assert [n.score for n in given] == [1.0, 0.9, 0.8, 0.7]  # inputs untouched


def test_without_a_score_on_every_node_the_input_order_is_the_relevance() -> None:
    given = nodes()
    given[3].score = None
    given[2].score = 5.0
    post = RankseamNodePostprocessor(reranker="mmr", options={"lambda": 1.0}, top_n=1)
    (top,) = post.postprocess_nodes(given, query_str="q")
    assert top.node.node_id == "a" and top.node.metadata["rerank"]["coarse_score"] is None


def test_from_defaults_and_the_reranking_event() -> None:
    debug = LlamaDebugHandler()
    post = RankseamNodePostprocessor.from_defaults(
        "mmr", top_n=2, options={"lambda": 0.5}, callback_manager=CallbackManager([debug])
    )
    assert post.top_n == 2 and post.document_reranker.policy_id == "rankseam.rerank.mmr.v1"
    out = post.postprocess_nodes(nodes(), query_str="dinner")
    asyncio.run(post.apostprocess_nodes(nodes(), query_str="dinner"))
    pairs = debug.get_event_pairs(CBEventType.RERANKING)
    assert len(pairs) == 2
    start, end = pairs[0]
    assert start.payload is not None and end.payload is not None
    assert start.payload["model_name"] == "rankseam.rerank.mmr.v1"
    assert [n.node.node_id for n in end.payload["nodes"]] == [n.node.node_id for n in out]
    default = RankseamNodePostprocessor.from_defaults("identity")
    assert default.callback_manager is Settings.callback_manager and default.top_n == 3


def test_a_query_engine_gives_nodes_scored_by_the_reranker(memory: rankseam.Memory) -> None:
    """The retriever reranks (its scores become node.score) and so does the postprocessor:
    what the engine hands the LLM and returns as sources carry the rerank score."""
    engine = RetrieverQueryEngine.from_args(
        RankseamRetriever.from_defaults(memory, similarity_top_k=4, reranker=OverlapReranker()),
        llm=MockLLM(),
        node_postprocessors=[RankseamNodePostprocessor.from_defaults(OverlapReranker(), top_n=2)],
    )
    query = "when is dana's birthday dinner at the thai place?"
    direct = memory.search(query, 4, reranker="none")
    coarse = {h.ref.memory_id: h.score for h in direct.hits}
    for got in (engine.retrieve(QueryBundle(query)), engine.query(query).source_nodes):
        assert len(got) == 2
        for n in got:
            rerank = n.node.metadata["rerank"]
            assert n.score == rerank["rerank_score"] is not None
            # the postprocessor saw the retriever's rerank score as the upstream score ...
            assert rerank["coarse_score"] == n.node.metadata["rerank_score"]
            # ... and the coarse score stays in the metadata
            assert n.node.metadata["coarse_score"] == pytest.approx(coarse[n.node.node_id])
            assert n.score != n.node.metadata["coarse_score"]
        assert [n.score for n in got] == sorted((n.score for n in got), reverse=True)


def test_a_chain_of_rerankers() -> None:
    post = RankseamNodePostprocessor(
        reranker=["identity", {"name": "mmr", "options": {"lambda": 0.0}}], top_n=3
    )
    out = post.postprocess_nodes(nodes(), query_str="dinner")
    trace = out[0].node.metadata["rerank"]["trace"]
    assert [s["policy_id"] for s in trace["stages"]] == [
        "rankseam.rerank.identity.v1",
        "rankseam.rerank.mmr.v1",
    ]
    assert len(out) == 3
