"""The vector channel under a filter on a store searched through its ANN index: exact (the
best of the memories the filter passes, every score the stored vector's cosine) before and
after its vector file exists, after writes and deletes, and never from a vector file of
another epoch or one a hard delete removed; the filter's row keys are read once a search."""

from __future__ import annotations

import numpy as np
import pytest

import rankseam
from rankseam.bench import synthetic
from rankseam.sqlite import reader as sqlite_reader
from rankseam.store.filters import parse_where
from rankseam.store.rows import VectorItem

BUCKETS = 7


@pytest.fixture
def big(tmp_path, monkeypatch):
    """3000 memories with ``{"bucket": n % 7}``, searched through an ANN index."""
    monkeypatch.setenv("RANKSEAM_ANN", "1000")  # the index from 1000 vectors on
    # every other switch named here, whatever the environment says
    memory = rankseam.open_memory(
        tmp_path / "big.sqlite3", namespace="default", embedder="hashed", reranker=None
    )
    memory.ingest(
        {**record, "metadata": {"bucket": n % BUCKETS}}
        for n, record in enumerate(synthetic.texts(3000))
    )
    assert memory.maintain_index() is not None
    yield memory
    memory.close()


def _filtered(memory, query, bucket, k=20):
    qvec = memory.embedder.embed([query])[0]
    where = parse_where({"bucket": bucket})
    with memory.store.read() as reader:
        return list(reader.vector("default", memory.embedder.descriptor, qvec, k, where=where))


def _brute_force(memory, query, bucket, k=20):
    """The best ``k`` of the live memories of ``bucket`` by the cosine of their stored vectors,
    ties by row key, computed here over every memory."""
    descriptor = memory.embedder.descriptor
    q = np.asarray(memory.embedder.embed([query])[0], dtype=np.float32)
    with memory.store.read() as reader:
        rows = list(memory.store.iter_memories("default"))
        rids = [reader.resolve(m.ref) for m in rows if m.metadata.get("bucket") == bucket]
    vectors = memory.store.vectors_of(rids, descriptor)
    scored = sorted(
        ((float(np.dot(v, q)), rid) for rid, v in zip(rids, vectors, strict=True) if v is not None),
        key=lambda t: (-t[0], t[1]),
    )
    return [(rid, score) for score, rid in scored[:k]]


def _same(got, expected):
    assert [rid for rid, _ in got] == [rid for rid, _ in expected]
    assert [s for _, s in got] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_a_filtered_search_is_exact_before_and_after_the_vector_file(big):
    ann = big.store.ann
    space = big.embedder.descriptor.key
    assert ann.vectors("default", space) is None  # none until a filtered search asks
    queries = synthetic.queries(6)
    before = [_filtered(big, q, i % BUCKETS) for i, q in enumerate(queries)]
    ann.wait()  # the filtered search scheduled the maintenance that writes the file
    file = ann.vectors("default", space)
    assert file is not None and file.manifest.count == 3000
    for i, q in enumerate(queries):
        expected = _brute_force(big, q, i % BUCKETS)
        _same(before[i], expected)
        _same(_filtered(big, q, i % BUCKETS), expected)


def test_the_vector_file_is_taken_a_block_at_a_time(big, monkeypatch):
    _filtered(big, "warm", 0)
    big.store.ann.wait()
    monkeypatch.setattr(sqlite_reader, "_TAKE", 100)  # a bucket's 428 rows: five blocks
    for i, q in enumerate(synthetic.queries(3)):
        _same(_filtered(big, q, i, k=30), _brute_force(big, q, i, k=30))


def test_writes_after_the_vector_file_are_read_from_the_store(big):
    _filtered(big, "warm", 0)
    big.store.ann.wait()
    words = "zebulon quixotic marmalade"
    big.add(words, memory_id="new", metadata={"bucket": 3})
    big.update("m3", words + " again")  # m3 is of bucket 3: its first revision retires
    big.delete("m10")  # bucket 3
    got = _filtered(big, words, 3)
    _same(got, _brute_force(big, words, 3))
    with big.store.read() as reader:
        found = {ref.memory_id: ref for ref in reader.identities([r for r, _ in got]).values()}
    assert "new" in found and found["m3"].revision == 2 and "m10" not in found
    assert len(found) == len(got), "a retired revision came back"
    # the next maintenance writes the file again with the new base
    assert big.maintain_index() is not None
    assert big.store.ann.vectors("default", big.embedder.descriptor.key).manifest.count == 3000
    _same(_filtered(big, words, 3), _brute_force(big, words, 3))


def test_a_vector_file_of_another_epoch_is_never_read(big):
    _filtered(big, "warm", 0)
    big.store.ann.wait()
    file = big.store.ann.vectors("default", big.embedder.descriptor.key)
    assert file is not None
    # the file's rows are changed on disk: a search that reads the file answers with them
    damaged = np.memmap(file.matrix.filename, dtype="<f4", mode="r+", shape=file.matrix.shape)
    damaged[:] = -damaged[:]
    damaged.flush()
    query = synthetic.queries(1)[0]
    assert _filtered(big, query, 2) != _brute_force(big, query, 2)  # it is read
    # a vector rewritten for an existing revision: a new epoch of the space
    rid = _brute_force(big, query, 5)[0][0]
    vector = np.asarray(big.embedder.embed(["something else"])[0], dtype=np.float32)
    big.store.put_vectors([VectorItem(rid, "default", vector)], space=big.embedder.descriptor.key)
    _same(_filtered(big, query, 2), _brute_force(big, query, 2))
    _same(_filtered(big, query, 5), _brute_force(big, query, 5))


def test_a_hard_delete_removes_the_vector_file(big):
    _filtered(big, "warm", 0)
    big.store.ann.wait()
    folder = big.store.ann.folder
    assert list(folder.glob("*.vectors")) and list(folder.glob("*.vectors.json"))
    big.forget("m1")
    assert not list(folder.glob("*.vectors")) and not list(folder.glob("*.vectors.json"))
    _same(_filtered(big, "forgotten", 1), _brute_force(big, "forgotten", 1))


def test_a_filtered_search_reads_the_filters_row_keys_once(big, monkeypatch):
    reads: list[object] = []

    def counted(node, namespace):
        reads.append(node)
        return allowed_rows(node, namespace)

    allowed_rows = sqlite_reader.allowed_rows
    monkeypatch.setattr(sqlite_reader, "allowed_rows", counted)
    found = big.search(synthetic.queries(1)[0], 5, reranker=None, where={"bucket": 4})
    assert set(found.trace.to_dict()["channels"]) >= {"lexical", "vector"}
    assert found.hits and all(h.metadata["bucket"] == 4 for h in found.hits)
    assert len(reads) == 1
