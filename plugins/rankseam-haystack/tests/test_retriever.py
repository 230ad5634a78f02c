"""RankseamRetriever: rankseam's search as a Haystack retriever component."""

from __future__ import annotations

import asyncio

import pytest
from haystack.dataclasses import Document
from haystack.document_stores.types import FilterPolicy

from rankseam.errors import ValidationError
from rankseam.testing import SAMPLE_MEMORIES
from rankseam_haystack import RankseamDocumentStore, RankseamRetriever
from rankseam_haystack.filters import FilterError

DINNER = "when is dana's birthday dinner"


@pytest.fixture
def store(document_store: RankseamDocumentStore) -> RankseamDocumentStore:
    document_store.write_documents(
        [
            Document(id=key, content=text, meta={"kind": "dinner" if "dinner" in key else "other"})
            for key, text in SAMPLE_MEMORIES
        ]
        + [
            Document(
                id="emb", content="Dana's dinner budget", embedding=[0.5, 0.25], meta={"n": None}
            )
        ]
    )
    return document_store


def test_run_returns_scored_documents_best_first(store: RankseamDocumentStore) -> None:
    docs = RankseamRetriever(store, top_k=2).run(DINNER)["documents"]
    assert [d.id for d in docs] == ["dinner-1", "dinner-2"]
    scores = [d.score for d in docs]
    assert all(isinstance(s, float) for s in scores) and scores == sorted(scores, reverse=True)
    first = docs[0]
    assert first.content == dict(SAMPLE_MEMORIES)["dinner-1"]
    assert first.meta["kind"] == "dinner"  # the stored meta
    assert first.meta["memory_id"] == "dinner-1" and first.meta["revision"] == 1  # the citation
    assert first.meta["score"] == first.score and first.meta["rerank_trace"] is None


def test_a_document_keeps_its_embedding_and_none_values(store: RankseamDocumentStore) -> None:
    docs = RankseamRetriever(store, top_k=5).run("budget")["documents"]
    [emb] = [d for d in docs if d.id == "emb"]
    assert emb.embedding == [0.5, 0.25] and emb.meta["n"] is None
    assert "_haystack" not in emb.meta


def test_filters_and_the_filter_policy(store: RankseamDocumentStore) -> None:
    others = {"field": "meta.kind", "operator": "==", "value": "other"}
    cat = {"field": "id", "operator": "==", "value": "cat"}
    retriever = RankseamRetriever(store, filters=others, top_k=5)
    assert {d.id for d in retriever.run(DINNER)["documents"]} == {"standup", "cat"}
    no_dinner = {"field": "meta.kind", "operator": "!=", "value": "dinner"}
    replaced = retriever.run(DINNER, filters=no_dinner)["documents"]  # REPLACE
    assert {d.id for d in replaced} == {"standup", "cat", "emb"}
    merged = RankseamRetriever(store, filters=others, filter_policy=FilterPolicy.MERGE, top_k=5)
    assert [d.id for d in merged.run(DINNER, filters=cat)["documents"]] == ["cat"]
    with pytest.raises(FilterError, match="do not look into the text"):
        RankseamRetriever(store, filters={"field": "content", "operator": "==", "value": "x"})
    with pytest.raises(FilterError, match="unknown comparison operator"):
        retriever.run(DINNER, filters={"field": "id", "operator": "like", "value": "c%"})


def test_top_k_and_a_reranker(store: RankseamDocumentStore) -> None:
    retriever = RankseamRetriever(store, top_k=3, reranker="mmr", reranker_options={"lambda": 0.0})
    docs = retriever.run(DINNER)["documents"]
    assert len(docs) == 3 and docs[0].id == "dinner-1" and "dinner-2" not in [d.id for d in docs]
    trace = docs[0].meta["rerank_trace"]
    assert trace["policy_id"] == "rankseam.rerank.mmr.v1" and trace["status"] == "ok"
    assert len(retriever.run(DINNER, top_k=1)["documents"]) == 1
    with pytest.raises(ValidationError, match="top_k must be a positive"):
        retriever.run(DINNER, top_k=0)
    with pytest.raises(ValidationError, match="top_k must be a positive"):
        RankseamRetriever(store, top_k=True)  # type: ignore[arg-type]


def test_run_async_answers_as_run(store: RankseamDocumentStore) -> None:
    retriever = RankseamRetriever(store, top_k=3)
    sync = retriever.run(DINNER)["documents"]
    async_ = asyncio.run(retriever.run_async(DINNER))["documents"]
    assert [(d.id, d.score) for d in async_] == [(d.id, d.score) for d in sync]


def test_to_dict_and_from_dict(
    store: RankseamDocumentStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Haystack deserialises only modules its user trusts (its allowlist, README)."""
    monkeypatch.setenv("HAYSTACK_DESERIALIZATION_ALLOWLIST", "rankseam_haystack")
    retriever = RankseamRetriever(
        store,
        filters={"field": "meta.kind", "operator": "==", "value": "other"},
        top_k=4,
        filter_policy="merge",
        reranker="mmr",
    )
    data = retriever.to_dict()
    assert data["type"] == "rankseam_haystack.retriever.RankseamRetriever"
    params = data["init_parameters"]
    assert params["document_store"] == store.to_dict()
    assert params["filter_policy"] == "merge" and params["top_k"] == 4
    again = RankseamRetriever.from_dict(data)
    try:
        assert again.filter_policy == FilterPolicy.MERGE and again.reranker == "mmr"
        assert [d.id for d in again.run(DINNER)["documents"]] == [
            d.id for d in retriever.run(DINNER)["documents"]
        ]
    finally:
        again.document_store.close()


def test_needs_a_rankseam_store() -> None:
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    with pytest.raises(TypeError, match="must be a RankseamDocumentStore"):
        RankseamRetriever(InMemoryDocumentStore())  # type: ignore[arg-type]
