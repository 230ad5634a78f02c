"""RankseamRetriever against the real llama-index-core, over a real store."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore

import rankseam
from rankseam_llamaindex import RankseamRetriever


def test_is_a_llamaindex_retriever(memory: rankseam.Memory) -> None:
    assert isinstance(RankseamRetriever(memory), BaseRetriever)


def test_hits_become_nodes_that_cite_the_stored_revision(memory: rankseam.Memory) -> None:
    nodes = RankseamRetriever(memory, k=2).retrieve("when is dinner with dana?")
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
        assert meta["memory_metadata"] == {"source": "test"}
        assert meta["rerank_trace"] is None
        # the trace never reaches an LLM prompt
        assert "rerank_trace" not in n.node.get_content(metadata_mode=MetadataMode.LLM)
        assert "memory_id" in n.node.get_content(metadata_mode=MetadataMode.LLM)


def test_a_reranker_by_name_and_its_trace(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory, k=2, reranker="mmr", reranker_options={"lambda": 0.0})
    nodes = retriever.retrieve("dana's birthday dinner at the thai place")
    trace = nodes[0].node.metadata["rerank_trace"]
    assert trace["policy_id"] == "rankseam.rerank.mmr.v1" and trace["status"] == "ok"
    ids = [n.node.metadata["memory_id"] for n in nodes]
    assert len({"dinner-1", "dinner-2"} & set(ids)) == 1


def test_async_gives_the_same_nodes(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory, k=3, reranker="mmr")
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
