"""RankseamRetriever against the real llama-index-core, over a real store."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import Settings
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import MetadataMode, NodeWithScore

import rankseam
from rankseam.testing import OverlapReranker
from rankseam_llamaindex import RankseamRetriever


def test_is_a_llamaindex_retriever(memory: rankseam.Memory) -> None:
    assert isinstance(RankseamRetriever(memory), BaseRetriever)


def test_hits_become_nodes_that_cite_the_stored_revision(memory: rankseam.Memory) -> None:
    nodes = RankseamRetriever(memory, similarity_top_k=2).retrieve("when is dinner with dana?")
    expected = memory.search("when is dinner with dana?", 2)
    assert [n.node.get_content() for n in nodes] == [h.text for h in expected.hits]
    for n, hit in zip(nodes, expected.hits, strict=True):
        assert isinstance(n, NodeWithScore)
        assert n.node.node_id == hit.ref.memory_id
        assert n.score == pytest.approx(hit.score)
        meta = n.node.metadata
        assert (meta["namespace"], meta["memory_id"], meta["revision"]) == (
            hit.ref.namespace,
            hit.ref.memory_id,
            1,
        )
        assert meta["score"] == meta["coarse_score"] == pytest.approx(hit.score)
        assert meta["rerank_score"] is None
        assert meta["source"] == "test"  # what was stored, flat beside our keys
        assert "memory_metadata" not in meta
        assert meta["rerank_trace"] is None
        # the trace never reaches an LLM prompt
        llm_view = n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert "rerank_trace" not in llm_view and "coarse_score" not in llm_view
        assert "memory_id" in llm_view and "source: test" in llm_view


def test_a_reranker_by_name_and_its_trace(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(
        memory, similarity_top_k=2, reranker="mmr", reranker_options={"lambda": 0.0}
    )
    nodes = retriever.retrieve("dana's birthday dinner at the thai place")
    trace = nodes[0].node.metadata["rerank_trace"]
    assert trace["policy_id"] == "rankseam.rerank.mmr.v1" and trace["status"] == "ok"
    ids = [n.node.metadata["memory_id"] for n in nodes]
    assert len({"dinner-1", "dinner-2"} & set(ids)) == 1


def test_async_gives_the_same_nodes(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory, similarity_top_k=3, reranker="mmr")
    sync = retriever.retrieve("dinner friday")
    async_nodes = asyncio.run(retriever.aretrieve("dinner friday"))
    assert [n.node.node_id for n in async_nodes] == [n.node.node_id for n in sync]


def test_bad_input_is_a_clear_error(memory: rankseam.Memory) -> None:
    with pytest.raises(rankseam.ValidationError, match="query is empty"):
        RankseamRetriever(memory).retrieve("   ")
    with pytest.raises(rankseam.ConfigurationError, match="no reranker named 'nope'"):
        RankseamRetriever(memory, reranker="nope").retrieve("dinner")


def test_none_forces_the_coarse_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker="mmr") as mem:
        mem.add("a note about lunch", memory_id="a")
        configured = RankseamRetriever(mem).retrieve("lunch")
        coarse = RankseamRetriever(mem, reranker="none").retrieve("lunch")
    assert configured[0].node.metadata["rerank_trace"]["policy_id"] == "rankseam.rerank.mmr.v1"
    assert coarse[0].node.metadata["rerank_trace"] is None


def test_similarity_top_k_and_its_deprecated_alias_k(memory: rankseam.Memory) -> None:
    assert len(RankseamRetriever(memory).retrieve("dinner")) == 4  # the default
    assert len(RankseamRetriever(memory, similarity_top_k=1).retrieve("dinner")) == 1
    with pytest.warns(DeprecationWarning, match="similarity_top_k"):
        old = RankseamRetriever(memory, k=2)
    assert old.similarity_top_k == 2 and len(old.retrieve("dinner")) == 2
    with pytest.raises(TypeError, match="pass only similarity_top_k"):
        RankseamRetriever(memory, k=2, similarity_top_k=3)


def test_from_defaults_uses_the_settings_callback_manager(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever.from_defaults(memory, similarity_top_k=2, reranker="none")
    assert retriever.callback_manager is Settings.callback_manager
    assert len(retriever.retrieve("dinner")) == 2
    own = CallbackManager()
    assert RankseamRetriever.from_defaults(memory, callback_manager=own).callback_manager is own
    # every other setting is the constructor's, checked as it checks it
    scoped = RankseamRetriever.from_defaults(memory, 4, where={"source": "test"}, pool=8)
    assert (scoped.where, scoped.pool) == ({"source": "test"}, 8)
    assert len(scoped.retrieve("dinner")) == 4
    with pytest.raises(TypeError, match="unexpected keyword argument 'top_k'"):
        RankseamRetriever.from_defaults(memory, top_k=2)


def test_stored_keys_that_are_ours_are_kept_prefixed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with rankseam.open_memory(tmp_path / "m.sqlite3") as mem:
        mem.add("a note about lunch", memory_id="a", metadata={"score": 7, "revision": "x"})
        (node,) = RankseamRetriever(mem, similarity_top_k=1).retrieve("lunch")
    meta = node.node.metadata
    assert meta["revision"] == 1 and meta["stored_revision"] == "x"
    assert meta["stored_score"] == 7 and meta["score"] == node.score != 7


def test_node_score_is_the_score_that_ordered_the_result(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory, similarity_top_k=3, reranker=OverlapReranker())
    nodes = retriever.retrieve("the thai place")
    assert nodes
    for n in nodes:
        meta = n.node.metadata
        assert n.score == meta["score"] == meta["rerank_score"] is not None
        assert meta["coarse_score"] != n.score  # the coarse score is kept in the metadata
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    # a reranker without scores of its own (mmr) orders; the nodes keep the coarse score
    for n in RankseamRetriever(memory, reranker="mmr").retrieve("dinner"):
        assert n.score == n.node.metadata["coarse_score"]


def test_a_chain_of_rerankers(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(
        memory,
        similarity_top_k=2,
        reranker=["identity", {"name": "mmr", "options": {"lambda": 0.0}}],
    )
    nodes = retriever.retrieve("dana's birthday dinner at the thai place")
    trace = nodes[0].node.metadata["rerank_trace"]
    assert [s["policy_id"] for s in trace["stages"]] == [
        "rankseam.rerank.identity.v1",
        "rankseam.rerank.mmr.v1",
    ]
