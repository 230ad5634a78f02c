"""RankseamDocumentStore beyond Haystack's suites: what a document keeps, the duplicate
policies on a batch, soft and hard deletes, and serialisation."""

from __future__ import annotations

import inspect
import random
import sqlite3
from pathlib import Path

import pytest
from haystack.dataclasses import ByteStream, Document, SparseEmbedding
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.document_stores.types import DocumentStore, DuplicatePolicy

from rankseam.errors import ValidationError
from rankseam_haystack import RankseamDocumentStore


def test_has_every_method_of_haystacks_protocol_with_its_parameters() -> None:
    for name, method in inspect.getmembers(DocumentStore, inspect.isfunction):
        if name.startswith("_"):
            continue
        ours = getattr(RankseamDocumentStore, name)
        assert list(inspect.signature(ours).parameters) == list(
            inspect.signature(method).parameters
        ), name


def test_a_document_reads_back_exactly_but_its_score(
    document_store: RankseamDocumentStore,
) -> None:
    rng = random.Random(7)
    embedding = [rng.uniform(-1, 1) for _ in range(384)]
    sparse = SparseEmbedding(indices=[3, 17], values=[0.25, 1.5])
    doc = Document(
        id="dinner",
        content="Dana's birthday dinner is on Friday",
        meta={"user": "dana", "nested": {"a": [1, 2]}, "gone": None, "year": 2026},
        embedding=embedding,
        sparse_embedding=sparse,
        score=0.9,
    )
    assert document_store.write_documents([doc]) == 1
    [back] = document_store.filter_documents()
    assert back.embedding == embedding  # float64, bit for bit
    assert back.sparse_embedding == sparse
    assert back.meta == doc.meta
    assert back.score is None  # a score belongs to a query's answer
    assert back == Document(**{**doc.__dict__, "score": None})
    stored = document_store.memory.get("dinner")
    assert stored.text == doc.content and stored.metadata["user"] == "dana"
    assert "gone" not in stored.metadata  # a None value is kept as absent


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (Document(content=None), "has no text content"),
        (Document(content="   "), "has no text content"),
        (Document(content="x", blob=ByteStream(b"raw")), "has a blob"),
        (Document(content="x", meta={"_haystack": 1}), "is reserved"),
        ("text", "must be a haystack Document, got str"),
    ],
)
def test_what_cannot_be_stored_is_refused_and_nothing_is_written(
    document_store: RankseamDocumentStore, document: object, message: str
) -> None:
    good = Document(content="fine")
    with pytest.raises(ValidationError, match=message):
        document_store.write_documents([good, document])  # type: ignore[list-item]
    assert document_store.count_documents() == 0


def test_fail_refuses_the_whole_batch(document_store: RankseamDocumentStore) -> None:
    first = Document(id="1", content="one")
    document_store.write_documents([first])
    with pytest.raises(DuplicateDocumentError, match="'1'"):
        document_store.write_documents(
            [Document(id="2", content="two"), Document(id="1", content="uno")],
            policy=DuplicatePolicy.FAIL,
        )
    with pytest.raises(DuplicateDocumentError, match="repeated in the batch"):
        document_store.write_documents(
            [Document(id="3", content="three"), Document(id="3", content="tres")]
        )
    assert document_store.filter_documents() == [first]


def test_skip_and_overwrite_on_a_batch(document_store: RankseamDocumentStore) -> None:
    document_store.write_documents([Document(id="1", content="one", meta={"v": 1})])
    batch = [
        Document(id="1", content="uno", meta={"v": 2}),
        Document(id="2", content="two"),
        Document(id="2", content="dos"),
    ]
    assert document_store.write_documents(batch, policy=DuplicatePolicy.SKIP) == 1
    texts = {d.id: d.content for d in document_store.filter_documents()}
    assert texts == {"1": "one", "2": "two"}  # the stored one and the batch's first kept
    assert document_store.write_documents(batch, policy=DuplicatePolicy.OVERWRITE) == 2
    docs = {d.id: d for d in document_store.filter_documents()}
    assert docs["1"].content == "uno" and docs["1"].meta == {"v": 2}
    assert docs["2"].content == "dos"  # the batch's last one wins
    # OVERWRITE is a new revision: rankseam keeps the previous one readable
    assert [m.text for m in document_store.memory.history("1")] == ["one", "uno"]


def test_overwrite_replaces_the_meta_whole(document_store: RankseamDocumentStore) -> None:
    document_store.write_documents([Document(id="1", content="one", meta={"a": 1, "b": 2})])
    document_store.write_documents(
        [Document(id="1", content="one", meta={"a": 3})], policy=DuplicatePolicy.OVERWRITE
    )
    assert document_store.filter_documents()[0].meta == {"a": 3}


def test_delete_tombstones_and_a_deleted_id_can_be_written_again(
    document_store: RankseamDocumentStore,
) -> None:
    document_store.write_documents(
        [Document(id="1", content="one"), Document(id="2", content="two")]
    )
    document_store.delete_documents(["1", "1", "missing"])
    assert [d.id for d in document_store.filter_documents()] == ["2"]
    assert document_store.memory.get("1").deleted  # the revision stays readable
    document_store.write_documents([Document(id="1", content="one again")])  # FAIL: not stored
    assert document_store.count_documents() == 2


def test_hard_delete_forgets_the_text(store_path: Path) -> None:
    secret = "the door code is 4417"
    store = RankseamDocumentStore(store_path, hard_delete=True)
    try:
        store.write_documents([Document(id="s", content=secret), Document(content="other")])
        store.delete_documents(["s"])
        assert store.count_documents() == 1
        with pytest.raises(KeyError, match="'s'"):  # rankseam's MemoryNotFoundError
            store.memory.get("s")
    finally:
        store.close()
    with sqlite3.connect(store_path) as db:
        dump = "\n".join(db.iterdump())
    assert secret not in dump


def test_namespaces_keep_documents_apart(store_path: Path) -> None:
    a = RankseamDocumentStore(store_path, namespace="a")
    b = RankseamDocumentStore(memory=a.memory, namespace="b")
    try:
        a.write_documents([Document(id="1", content="in a")])
        b.write_documents([Document(id="1", content="in b")])
        assert [d.content for d in a.filter_documents()] == ["in a"]
        assert [d.content for d in b.filter_documents()] == ["in b"]
        b.delete_documents(["1"])
        assert (a.count_documents(), b.count_documents()) == (1, 0)
    finally:
        b.close()  # does not close a memory it was given
        a.filter_documents()
        a.close()


def test_to_dict_and_from_dict(store_path: Path) -> None:
    store = RankseamDocumentStore(
        store_path, namespace="docs", open_options={"pool": 40}, hard_delete=True
    )
    try:
        store.write_documents([Document(id="1", content="one")])
        data = store.to_dict()
        assert data == {
            "type": "rankseam_haystack.document_store.RankseamDocumentStore",
            "init_parameters": {
                "target": str(store_path),
                "namespace": "docs",
                "config_file": None,
                "open_options": {"pool": 40},
                "hard_delete": True,
            },
        }
    finally:
        store.close()
    again = RankseamDocumentStore.from_dict(data)
    try:
        assert [d.id for d in again.filter_documents()] == ["1"]
        assert again.hard_delete and again.memory.config.search.pool == 40
    finally:
        again.close()


def test_memory_and_target_together_is_a_mistake(document_store: RankseamDocumentStore) -> None:
    with pytest.raises(TypeError, match="not both"):
        RankseamDocumentStore("x.sqlite3", memory=document_store.memory)


def test_invalid_arguments(document_store: RankseamDocumentStore) -> None:
    with pytest.raises(ValidationError, match="must be a list of haystack Documents"):
        document_store.write_documents("not a list")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="must be a list of ids"):
        document_store.delete_documents("1")  # type: ignore[arg-type]


def test_update_by_filter_writes_new_revisions_with_the_meta_merged(
    document_store: RankseamDocumentStore,
) -> None:
    document_store.write_documents(
        [Document(id="1", content="one", meta={"k": "a", "n": 1}), Document(id="2", content="two")]
    )
    kept = {"field": "meta.k", "operator": "==", "value": "a"}
    assert document_store.update_by_filter(kept, {"n": None, "new": True}) == 1
    assert document_store.filter_documents(kept)[0].meta == {"k": "a", "n": None, "new": True}
    assert [m.ref.revision for m in document_store.memory.history("1")] == [1, 2]
    with pytest.raises(ValidationError, match="meta must be a mapping"):
        document_store.update_by_filter(kept, ["n"])  # type: ignore[arg-type]


def test_delete_all_tombstones_and_recreate_index_forgets_the_namespace(
    store_path: Path,
) -> None:
    store = RankseamDocumentStore(store_path, namespace="a")
    other = RankseamDocumentStore(memory=store.memory, namespace="b")
    try:
        store.write_documents([Document(id="1", content="one")])
        other.write_documents([Document(id="1", content="kept in b")])
        store.delete_all_documents()
        assert store.count_documents() == 0 and store.memory.get("1", namespace="a").deleted
        store.delete_all_documents(recreate_index=True)
        with pytest.raises(KeyError):  # history and tombstone gone too
            store.memory.get("1", namespace="a")
        assert [d.content for d in other.filter_documents()] == ["kept in b"]
    finally:
        store.close()
