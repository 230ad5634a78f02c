"""The LangChain and LlamaIndex adapters follow one score rule (docs/integrations.md, "Scores
and metadata"): over the same store, with the same reranker, they return the same items in the
same order, with the same scores and the same metadata."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="needs rankseam-langchain (langchain-core)")
pytest.importorskip("llama_index.core", reason="needs rankseam-llamaindex (llama-index-core)")

import rankseam
from rankseam.testing import OverlapReranker, sample_memory
from rankseam_langchain import RankseamCompressor
from rankseam_langchain import RankseamRetriever as LangChainRetriever
from rankseam_llamaindex import RankseamNodePostprocessor
from rankseam_llamaindex import RankseamRetriever as LlamaIndexRetriever

QUERY = "when is dana's birthday dinner at the thai place?"


RERANKERS: dict[str, tuple[Any, dict[str, Any] | None]] = {
    "none": ("none", None),
    "mmr": ("mmr", {"lambda": 0.5}),
    "scores": (OverlapReranker(), None),
}


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    with sample_memory(tmp_path / "memories.sqlite3") as mem:
        mem.add("Dana prefers the window table at the Thai place", memory_id="table")
        yield mem


def _timeless(value: Any) -> Any:
    """``value`` without the traces' latencies (two runs never take the same time)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "latency_ms"}
    return value


@pytest.mark.parametrize("name", sorted(RERANKERS))
def test_the_retrievers_agree(memory: rankseam.Memory, name: str) -> None:
    reranker, options = RERANKERS[name]
    docs = LangChainRetriever(
        memory=memory, k=4, reranker=reranker, reranker_options=options
    ).invoke(QUERY)
    nodes = LlamaIndexRetriever(
        memory, similarity_top_k=4, reranker=reranker, reranker_options=options
    ).retrieve(QUERY)
    assert [d.id for d in docs] == [n.node.node_id for n in nodes]
    assert [d.metadata["score"] for d in docs] == [n.score for n in nodes]
    assert [_timeless(d.metadata) for d in docs] == [_timeless(n.node.metadata) for n in nodes]


@pytest.mark.parametrize("name", sorted(RERANKERS))
def test_the_compressor_and_the_postprocessor_agree(memory: rankseam.Memory, name: str) -> None:
    reranker, options = RERANKERS[name]
    docs = LangChainRetriever(memory=memory, k=5, reranker="none").invoke(QUERY)
    nodes = LlamaIndexRetriever(memory, similarity_top_k=5, reranker="none").retrieve(QUERY)
    compressed = RankseamCompressor(reranker=reranker, options=options, top_n=3)
    post = RankseamNodePostprocessor(reranker=reranker, options=options, top_n=3)
    got_docs = compressed.compress_documents(docs, QUERY)
    got_nodes = post.postprocess_nodes(nodes, query_str=QUERY)
    assert [d.id for d in got_docs] == [n.node.node_id for n in got_nodes]
    assert [d.metadata["score"] for d in got_docs] == [n.score for n in got_nodes]
    assert [_timeless(d.metadata["rerank"]) for d in got_docs] == [
        _timeless(n.node.metadata["rerank"]) for n in got_nodes
    ]
    # both gave the reranker the retriever's scores as the coarse relevance: the selection
    # of a rerank with those scores (for mmr at lambda 0.5 here, the input order alone as
    # the relevance picks another second memory)
    coarse = [d.metadata["score"] for d in docs]
    texts = [d.page_content for d in docs]
    direct = rankseam.open_reranker(reranker, options=options).rerank(
        QUERY, texts, 3, scores=coarse
    )
    assert [docs[p].id for p in direct.positions] == [d.id for d in got_docs]
    for doc in got_docs:
        assert (
            doc.metadata["rerank"]["coarse_score"]
            == coarse[doc.metadata["rerank"]["coarse_rank"] - 1]
        )


def test_the_retrievers_filter_alike(memory: rankseam.Memory) -> None:
    """A LangChain filter dict and the LlamaIndex MetadataFilters that say the same select
    the same memories, in the same order (rankseam docs/filters.md)."""
    from llama_index.core.vector_stores.types import (
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
    )

    memory.add("Dana's dinner at the Thai place was moved", memory_id="moved",
               metadata={"source": "chat", "year": 2026})  # fmt: skip
    langchain = {"$or": [{"source": {"$ne": "test"}}, {"memory_id": {"$in": ["cat"]}}]}
    llamaindex = MetadataFilters(
        filters=[
            MetadataFilter(key="source", value="test", operator=FilterOperator.NE),
            MetadataFilter(key="memory_id", value=["cat"], operator=FilterOperator.IN),
        ],
        condition=FilterCondition.OR,
    )
    docs = LangChainRetriever(memory=memory, k=6, search_kwargs={"filter": langchain}).invoke(QUERY)
    nodes = LlamaIndexRetriever(memory, similarity_top_k=6, filters=llamaindex).retrieve(QUERY)
    assert sorted(d.id for d in docs) == ["cat", "moved", "table"]
    assert [d.id for d in docs] == [n.node.node_id for n in nodes]
    assert [_timeless(d.metadata) for d in docs] == [_timeless(n.node.metadata) for n in nodes]
