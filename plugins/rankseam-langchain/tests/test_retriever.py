"""RankseamRetriever against the real langchain-core, over a real store."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

import rankseam
from rankseam.testing import OverlapReranker
from rankseam_langchain import RankseamRetriever


def test_is_a_langchain_retriever(memory: rankseam.Memory) -> None:
    assert isinstance(RankseamRetriever(memory=memory), BaseRetriever)


def test_hits_become_documents_that_cite_the_stored_revision(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory=memory, k=2)
    docs = retriever.invoke("when is dinner with dana?")
    expected = memory.search("when is dinner with dana?", 2)
    assert [d.page_content for d in docs] == [h.text for h in expected.hits]
    for doc, hit in zip(docs, expected.hits, strict=True):
        assert isinstance(doc, Document)
        assert doc.id == hit.ref.memory_id
        assert doc.metadata["namespace"] == hit.ref.namespace
        assert doc.metadata["memory_id"] == hit.ref.memory_id
        assert doc.metadata["revision"] == hit.ref.revision == 1
        assert doc.metadata["score"] == doc.metadata["coarse_score"] == pytest.approx(hit.score)
        assert doc.metadata["rerank_score"] is None
        assert doc.metadata["source"] == "test"  # what was stored, flat beside our keys
        assert "memory_metadata" not in doc.metadata
        assert doc.metadata["rerank_trace"] is None  # no reranker: the coarse order


def test_an_updated_memory_cites_its_new_revision(memory: rankseam.Memory) -> None:
    memory.update("standup", "Moved the weekly standup to 10:00")
    docs = RankseamRetriever(memory=memory, k=1).invoke("weekly standup")
    assert docs[0].metadata["memory_id"] == "standup"
    assert docs[0].metadata["revision"] == 2
    assert "10:00" in docs[0].page_content


def test_a_reranker_by_name_and_its_trace(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(
        memory=memory, k=2, reranker="mmr", reranker_options={"lambda": 0.0}
    )
    docs = retriever.invoke("dana's birthday dinner at the thai place")
    trace = docs[0].metadata["rerank_trace"]
    assert trace["policy_id"] == "rankseam.rerank.mmr.v1"
    assert trace["status"] == "ok"
    assert trace["descriptor"]["lambda"] == 0.0
    # pure diversity keeps only one of the two near-duplicate dinner memories
    ids = [d.metadata["memory_id"] for d in docs]
    assert len({"dinner-1", "dinner-2"} & set(ids)) == 1


def test_async_gives_the_same_documents(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory=memory, k=3, reranker="mmr")
    sync = retriever.invoke("dinner friday")
    async_docs = asyncio.run(retriever.ainvoke("dinner friday"))
    assert [(d.id, d.metadata["revision"]) for d in async_docs] == [
        (d.id, d.metadata["revision"]) for d in sync
    ]


def test_none_forces_the_coarse_order(tmp_path) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker="mmr") as mem:
        mem.add("a note about lunch", memory_id="a")
        configured = RankseamRetriever(memory=mem).invoke("lunch")
        coarse = RankseamRetriever(memory=mem, reranker="none").invoke("lunch")
    assert configured[0].metadata["rerank_trace"]["policy_id"] == "rankseam.rerank.mmr.v1"
    assert coarse[0].metadata["rerank_trace"] is None


def test_bad_input_is_a_clear_error(memory: rankseam.Memory) -> None:
    with pytest.raises(rankseam.ValidationError, match="query is empty"):
        RankseamRetriever(memory=memory).invoke("   ")
    with pytest.raises(rankseam.ConfigurationError, match="no reranker named 'nope'"):
        RankseamRetriever(memory=memory, reranker="nope").invoke("dinner")


def test_a_call_may_ask_for_its_own_k_and_settings(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory=memory, k=4, reranker="mmr")
    assert len(retriever.invoke("dinner friday")) == 4
    assert len(retriever.invoke("dinner friday", k=1)) == 1
    assert len(asyncio.run(retriever.ainvoke("dinner friday", k=2))) == 2
    assert retriever.k == 4  # a call's k is for that call only
    coarse = retriever.invoke("dinner friday", reranker="none", k=2)
    assert [d.metadata["rerank_trace"] for d in coarse] == [None, None]
    expected = memory.search("dinner friday", 2, reranker="none")
    assert [d.id for d in coarse] == [h.ref.memory_id for h in expected.hits]
    assert retriever.invoke("dinner friday", namespace="elsewhere") == []


def test_an_unknown_call_argument_is_refused(memory: rankseam.Memory) -> None:
    retriever = RankseamRetriever(memory=memory)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['kk'\].*'k'"):
        retriever.invoke("dinner", kk=1)
    with pytest.raises(TypeError, match="kk"):
        asyncio.run(retriever.ainvoke("dinner", kk=1))
    with pytest.raises(rankseam.ValidationError):
        retriever.invoke("dinner", k=0)


def test_the_score_is_the_rerankers_when_it_gives_one(memory: rankseam.Memory) -> None:
    docs = RankseamRetriever(memory=memory, k=3, reranker=OverlapReranker()).invoke(
        "the thai place"
    )
    assert docs
    for doc in docs:
        assert doc.metadata["score"] == doc.metadata["rerank_score"] is not None
        assert doc.metadata["coarse_score"] != doc.metadata["score"]
    assert [d.metadata["score"] for d in docs] == sorted(
        (d.metadata["score"] for d in docs), reverse=True
    )


def test_a_chain_of_rerankers(memory: rankseam.Memory) -> None:
    """``reranker`` takes a list: each stage reranks the previous one's selection, with its
    own options; the trace has one entry per stage."""
    retriever = RankseamRetriever(
        memory=memory, k=2, reranker=["identity", {"name": "mmr", "options": {"lambda": 0.0}}]
    )
    docs = retriever.invoke("dana's birthday dinner at the thai place")
    trace = docs[0].metadata["rerank_trace"]
    assert [s["policy_id"] for s in trace["stages"]] == [
        "rankseam.rerank.identity.v1",
        "rankseam.rerank.mmr.v1",
    ]
    assert trace["stages"][1]["candidate_count"] == len(trace["stages"][0]["selected_ranks"])


def test_a_call_that_names_another_reranker_gets_none_of_the_retrievers_options(
    memory: rankseam.Memory,
) -> None:
    """The retriever's ``reranker_options`` are its own reranker's: a call (or
    ``search_kwargs``) that names a reranker runs it without them, as the vector store's
    calls do; a call that names its options too gets those."""
    query = "dana's birthday dinner at the thai place"
    retriever = RankseamRetriever(
        memory=memory, k=2, reranker="mmr", reranker_options={"lambda": 0.0}
    )
    coarse = [h.ref.memory_id for h in memory.search(query, 2, reranker="none").hits]
    assert [d.id for d in retriever.invoke(query, reranker="none")] == coarse
    docs = asyncio.run(retriever.ainvoke(query, reranker="identity"))
    assert docs[0].metadata["rerank_trace"]["policy_id"] == "rankseam.rerank.identity.v1"
    configured = RankseamRetriever(
        memory=memory,
        k=2,
        reranker="mmr",
        reranker_options={"lambda": 0.0},
        search_kwargs={"reranker": "none"},
    )
    assert [d.id for d in configured.invoke(query)] == coarse
    own = retriever.invoke(query, reranker="mmr", reranker_options={"lambda": 1.0})
    assert own[0].metadata["rerank_trace"]["descriptor"]["lambda"] == 1.0
    kept = retriever.invoke(query, k=1)  # no reranker named: the retriever's own, with its options
    assert kept[0].metadata["rerank_trace"]["descriptor"]["lambda"] == 0.0
