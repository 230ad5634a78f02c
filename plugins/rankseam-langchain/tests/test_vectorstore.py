"""RankseamVectorStore against the real langchain-core over a real store: writes (ids,
revisions, importance), deletes (tombstone and hard), reads by id, similarity search with
scores and filters (read exactly as the retriever reads them), MMR through the mmr reranker,
the async twins, ``from_texts`` and ``as_retriever``. LangChain's own standard suite runs in
standard_tests/ (``nox -s langchain-standard``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores import VectorStoreRetriever

import rankseam
from rankseam.testing import SAMPLE_MEMORIES, sample_memory
from rankseam_langchain import LangChainEmbedder, RankseamRetriever, RankseamVectorStore

DOCS = [
    Document("Dana's birthday dinner is at Luigi's", metadata={"user": "dana", "year": 2026}),
    Document("Dana prefers window seats at dinner", metadata={"user": "dana", "year": 2024}),
    Document("Sam's birthday dinner is in May", metadata={"user": "sam", "year": 2026}),
]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    with rankseam.open_memory(tmp_path / "m.sqlite3") as mem:
        yield mem


@pytest.fixture
def store(memory: rankseam.Memory) -> RankseamVectorStore:
    return RankseamVectorStore(memory)


def ids_of(docs: list[Document]) -> list[str | None]:
    return [d.id for d in docs]


def test_documents_are_memories_with_their_own_metadata(
    store: RankseamVectorStore, memory: rankseam.Memory
) -> None:
    ids = store.add_documents(DOCS, ids=["d1", "d2", "s1"])
    assert ids == ["d1", "d2", "s1"]
    assert memory.get("d1").text == DOCS[0].page_content
    assert dict(memory.get("s1").metadata) == {"user": "sam", "year": 2026}
    docs = store.similarity_search("Sam's birthday dinner", k=1)
    assert docs == [Document(DOCS[2].page_content, metadata=DOCS[2].metadata, id="s1")]
    # ids: ids= first, else each document's own, else a new random one per document
    own = store.add_documents([Document("own id", id="mine"), Document("no id")])
    assert own[0] == "mine" and len(own[1]) == 32 and own[1] != "mine"
    assert store.add_texts(["a text"], [{"k": 1}], ids=["t1"]) == ["t1"]
    assert store.get_by_ids(["t1"]) == [Document("a text", metadata={"k": 1}, id="t1")]


def test_adding_an_existing_id_writes_a_new_revision(
    store: RankseamVectorStore, memory: rankseam.Memory
) -> None:
    store.add_texts(["first"], [{"v": 1}], ids=["x"])
    store.add_texts(["first"], [{"v": 1}], ids=["x"])  # the same: left alone
    assert memory.get("x").ref.revision == 1
    store.add_texts(["second"], [{"v": 2}], ids=["x"])
    assert [(m.text, dict(m.metadata)) for m in memory.history("x")] == [
        ("first", {"v": 1}),
        ("second", {"v": 2}),
    ]
    assert store.get_by_ids(["x"]) == [Document("second", metadata={"v": 2}, id="x")]


def test_importance_from_the_keyword_or_the_metadata(
    store: RankseamVectorStore, memory: rankseam.Memory
) -> None:
    store.add_texts(["a", "b"], [{"importance": 0.9}, {"importance": "high"}], ids=["a", "b"])
    assert memory.get("a").importance == 0.9  # a number under importance_key
    assert memory.get("b").importance == 0.5  # not a number: rankseam's default
    assert dict(memory.get("a").metadata) == {"importance": 0.9}  # kept in the metadata too
    store.add_documents([Document("c"), Document("d")], ids=["c", "d"], importance=[0.2, 0.7])
    assert (memory.get("c").importance, memory.get("d").importance) == (0.2, 0.7)
    store.add_texts(["e"], [{"importance": 0.9}], ids=["e"], importance=0.1)
    assert memory.get("e").importance == 0.1  # the keyword wins
    store.add_texts(["e", "a"], [{}, {"importance": 0.9}], ids=["e", "a"])
    assert memory.get("e").importance == 0.1  # none given: the previous importance stays
    plain = RankseamVectorStore(memory, importance_key=None)
    plain.add_texts(["f"], [{"importance": 0.9}], ids=["f"])
    assert memory.get("f").importance == 0.5
    with pytest.raises(ValueError, match="1 importances for 2 texts"):
        store.add_texts(["g", "h"], importance=[0.3])
    with pytest.raises(TypeError, match="importance must be a number"):
        store.add_texts(["g"], importance="high")  # type: ignore[arg-type]
    with pytest.raises(rankseam.ValidationError, match="importance"):
        store.add_texts(["g"], importance=1.5)


def test_a_wrong_argument_is_an_error_naming_it(store: RankseamVectorStore) -> None:
    with pytest.raises(ValueError, match="2 ids for 1 texts"):
        store.add_texts(["a"], ids=["1", "2"])
    with pytest.raises(ValueError, match="2 metadatas for 1 texts"):
        store.add_texts(["a"], [{}, {}])
    with pytest.raises(TypeError, match=r"add_documents got unexpected .*\['batch'\]"):
        store.add_documents([Document("a")], batch=3)
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['kk'\]"):
        store.similarity_search("a", kk=2)
    with pytest.raises(TypeError, match="accepts forget"):
        store.delete(["a"], hard=True)
    with pytest.raises(ValueError, match=r"Memory.reset\(namespace, confirm=True\)"):
        store.delete()
    with pytest.raises(TypeError, match="needs an open rankseam Memory"):
        RankseamVectorStore("m.sqlite3")  # type: ignore[arg-type]


def test_delete_tombstones_and_forget_hard_deletes(
    store: RankseamVectorStore, memory: rankseam.Memory
) -> None:
    store.add_documents(DOCS, ids=["d1", "d2", "s1"])
    assert store.delete(["d1", "never-stored"]) is True
    assert store.delete(["d1"]) is True  # already deleted: nothing to do
    assert "d1" not in ids_of(store.similarity_search("Dana's birthday dinner", k=3))
    assert store.get_by_ids(["d1", "d2"]) == [
        Document(DOCS[1].page_content, metadata=DOCS[1].metadata, id="d2")
    ]
    assert memory.get("d1").deleted and memory.history("d1")[0].text == DOCS[0].page_content
    store.add_documents([DOCS[0]], ids=["d1"])  # written again: live again, a new revision
    assert ids_of(store.get_by_ids(["d1"])) == ["d1"] and memory.get("d1").ref.revision == 2
    store.delete(["d1"])
    store.delete(["d2"], forget=True)
    with pytest.raises(KeyError, match="forgotten"):
        memory.history("d2")
    assert store.get_by_ids(["d2"]) == []


def test_get_by_ids_keeps_the_order_given(store: RankseamVectorStore) -> None:
    store.add_documents(DOCS, ids=["d1", "d2", "s1"])
    assert ids_of(store.get_by_ids(["s1", "missing", "d1"])) == ["s1", "d1"]
    assert ids_of(store.get_by_ids(["d1", "d1"])) == ["d1"]  # each once
    many = [f"x{i}" for i in range(1500)] + ["d2", "s1"]  # rankseam's $in takes 1,000 at most
    assert ids_of(store.get_by_ids(many)) == ["d2", "s1"]
    assert ids_of(asyncio.run(store.aget_by_ids(many))) == ["d2", "s1"]
    assert store.get_by_ids([]) == []


def test_scores_are_the_searchs_and_relevance_uses_them(
    store: RankseamVectorStore, memory: rankseam.Memory
) -> None:
    store.add_documents(DOCS, ids=["d1", "d2", "s1"])
    scored = store.similarity_search_with_score("Dana's birthday dinner", k=3)
    hits = memory.search("Dana's birthday dinner", 3, reranker="none").hits
    assert [(d.id, s) for d, s in scored] == [(h.ref.memory_id, h.score) for h in hits]
    assert [s for _, s in scored] == sorted((s for _, s in scored), reverse=True)
    relevance = store.similarity_search_with_relevance_scores("Dana's birthday dinner", k=3)
    assert relevance == scored
    best = scored[0][1]
    above = store.similarity_search_with_relevance_scores(
        "Dana's birthday dinner", k=3, score_threshold=best
    )
    assert ids_of([d for d, _ in above]) == ["d1"]


def test_filters_are_read_as_the_retrievers(
    store: RankseamVectorStore, memory: rankseam.Memory
) -> None:
    store.add_documents(DOCS, ids=["d1", "d2", "s1"])
    query = "birthday dinner"
    assert sorted(ids_of(store.similarity_search(query, filter={"user": "dana"}))) == ["d1", "d2"]
    newer = store.similarity_search(
        query, filter={"$and": [{"user": "dana"}, {"year": {"$gte": 2025}}]}
    )
    assert ids_of(newer) == ["d1"]
    assert ids_of(store.similarity_search(query, where={"user": "sam"})) == ["s1"]
    with pytest.raises(TypeError, match="both filter and where"):
        store.similarity_search(query, filter={"user": "dana"}, where={"user": "sam"})
    # the same mistake, the same words, from the store and from the retriever
    bad = {"user": {"$like": "da%"}}
    with pytest.raises(rankseam.ValidationError) as from_store:
        store.similarity_search(query, filter=bad)
    with pytest.raises(rankseam.ValidationError) as from_retriever:
        RankseamRetriever(memory=memory).invoke(query, filter=bad)
    assert "filter['user']['$like']" in str(from_store.value)
    assert str(from_store.value) == str(from_retriever.value)


def test_search_settings_of_the_store_and_of_a_call(memory: rankseam.Memory) -> None:
    for memory_id, text in SAMPLE_MEMORIES:
        memory.add(text, memory_id=memory_id)
        memory.add(text, memory_id=memory_id, namespace="other")
    memory.delete("cat", namespace="other")
    other = RankseamVectorStore(memory, namespace="other")
    assert "cat" not in ids_of(other.similarity_search("Bob's cat", k=4))
    assert "cat" in ids_of(RankseamVectorStore(memory).similarity_search("Bob's cat", k=4))
    assert "cat" in ids_of(other.similarity_search("Bob's cat", k=4, namespace="default"))
    # a reranker for the store, and one call's own
    mmr = RankseamVectorStore(memory, reranker="mmr", reranker_options={"lambda": 0.0})
    assert ids_of(mmr.similarity_search("Dana's birthday dinner", k=2))[1] != "dinner-2"
    coarse = mmr.similarity_search("Dana's birthday dinner", k=2, reranker="none")
    assert ids_of(coarse) == ["dinner-1", "dinner-2"]


def test_mmr_search_runs_the_mmr_reranker(tmp_path: Path) -> None:
    with sample_memory(tmp_path / "s.sqlite3") as memory:
        store = RankseamVectorStore(memory)
        query = "Dana's birthday dinner"
        relevant = store.max_marginal_relevance_search(query, k=2, lambda_mult=1.0)
        assert ids_of(relevant) == ["dinner-1", "dinner-2"]  # 1: pure relevance
        diverse = store.max_marginal_relevance_search(query, k=2, fetch_k=4, lambda_mult=0.0)
        assert ids_of(diverse)[0] == "dinner-1" and ids_of(diverse)[1] != "dinner-2"
        direct = memory.search(query, 2, reranker="mmr", reranker_options={"lambda": 0.0}, pool=4)
        assert ids_of(diverse) == [h.ref.memory_id for h in direct]
        assert direct.trace.rerank is not None and direct.trace.rerank.policy_id.startswith(
            "rankseam.rerank.mmr"
        )
        cats = store.max_marginal_relevance_search(query, k=2, filter={"source": "test"})
        assert len(cats) == 2
        with pytest.raises(TypeError, match=r"got \[.reranker.\]: it runs the .mmr. reranker"):
            store.max_marginal_relevance_search(query, reranker="identity")
        with pytest.raises(TypeError, match=r"got \['pool'\]"):
            store.max_marginal_relevance_search(query, pool=10)  # fetch_k is the pool
        with pytest.raises(rankseam.ValidationError):
            store.max_marginal_relevance_search(query, fetch_k=201)  # the pool's bound
        fetched = asyncio.run(store.amax_marginal_relevance_search(query, k=2, lambda_mult=0.0))
        assert ids_of(fetched) == ids_of(diverse)


def test_mmr_search_without_the_mmr_plugin_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import rankseam, sys\n"
        "from rankseam_langchain import RankseamVectorStore\n"
        f"with RankseamVectorStore.open({str(tmp_path / 'n.sqlite3')!r}) as store:\n"
        "    store.add_texts(['a text'])\n"
        "    try:\n"
        "        store.max_marginal_relevance_search('text')\n"
        "    except rankseam.ConfigurationError as exc:\n"
        "        print(exc)\n"
    )
    env = {**os.environ, "RANKSEAM_DISABLE_PLUGINS": "mmr"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert "pip install rankseam-mmr" in out.stdout, out.stderr


def test_search_by_vector_is_refused_with_the_way_to_search() -> None:
    with pytest.raises(NotImplementedError, match="searches by query text"):
        RankseamVectorStore.similarity_search_by_vector(None, [0.1, 0.2])  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError, match="use similarity_search"):
        RankseamVectorStore.max_marginal_relevance_search_by_vector(None, [0.1])  # type: ignore[arg-type]


def test_the_async_twins(store: RankseamVectorStore, memory: rankseam.Memory) -> None:
    async def run() -> dict[str, Any]:
        ids = await store.aadd_documents(DOCS, ids=["d1", "d2", "s1"])
        texts = await store.aadd_texts(["async text"], [{"a": 1}], ids=["t"], importance=0.8)
        found = await store.asimilarity_search("Sam's birthday dinner", k=1)
        scored = await store.asimilarity_search_with_score("Sam's birthday dinner", k=1)
        await store.adelete(["s1", "never-stored"])
        after = await store.asimilarity_search("Sam's birthday dinner", k=3, filter={"user": "sam"})
        got = await store.aget_by_ids(["t", "s1", "d1"])
        await store.adelete(["t"], forget=True)
        return {"ids": ids + texts, "found": found, "scored": scored, "after": after, "got": got}

    out = asyncio.run(run())
    assert out["ids"] == ["d1", "d2", "s1", "t"]
    assert ids_of(out["found"]) == ["s1"] and out["scored"][0][0] == out["found"][0]
    assert out["after"] == []
    assert ids_of(out["got"]) == ["t", "d1"]
    assert out["got"][0] == Document("async text", metadata={"a": 1}, id="t")
    with pytest.raises(KeyError, match="forgotten"):
        memory.get("t")


def test_open_and_from_texts_embed_with_the_langchain_embeddings(tmp_path: Path) -> None:
    fake = DeterministicFakeEmbedding(size=6)
    with RankseamVectorStore.from_texts(
        ["foo", "bar"], fake, [{"n": 1}, {"n": 2}], ids=["1", "2"], target=tmp_path / "a.sqlite3"
    ) as store:
        assert store.embeddings is fake
        assert isinstance(store.memory.embedder, LangChainEmbedder)
        assert store.memory.embedder.descriptor.dimensions == 6
        assert ids_of(store.similarity_search("bar", k=2)) == ["2", "1"]
    # the store closes the memory it opened; reopened with the same embeddings, same space
    with RankseamVectorStore.open(tmp_path / "a.sqlite3", embedding=fake) as again:
        assert ids_of(again.similarity_search("foo", k=1)) == ["1"]
        assert again.memory.stats()["vector_coverage"] == 1.0
    with pytest.raises(TypeError, match="both embedding= and embedder='hashed'"):
        RankseamVectorStore.open(tmp_path / "b.sqlite3", embedding=fake, embedder="hashed")


def test_from_texts_on_a_memory_you_own(memory: rankseam.Memory) -> None:
    store = RankseamVectorStore.from_texts(["foo"], memory=memory, ids=["f"], importance=0.7)
    assert store.embeddings is None  # rankseam's own embedder
    store.close()  # not the store's memory to close
    assert memory.get("f").importance == 0.7
    with pytest.raises(TypeError, match="leave embedding out"):
        RankseamVectorStore.from_texts(["foo"], DeterministicFakeEmbedding(size=3), memory=memory)


def test_as_retriever_is_langchains_vector_store_retriever(store: RankseamVectorStore) -> None:
    store.add_documents(DOCS, ids=["d1", "d2", "s1"])
    retriever = store.as_retriever(search_kwargs={"k": 1, "filter": {"user": "sam"}})
    assert isinstance(retriever, VectorStoreRetriever) and retriever.vectorstore is store
    assert ids_of(retriever.invoke("birthday dinner")) == ["s1"]
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "lambda_mult": 1.0})
    assert len(mmr.invoke("Dana's birthday dinner")) == 2
    threshold = store.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.99}
    )
    assert all(d.metadata["user"] == "dana" for d in threshold.invoke("Dana's birthday dinner"))
    assert ids_of(asyncio.run(retriever.ainvoke("birthday dinner"))) == ["s1"]
