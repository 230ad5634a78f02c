"""The embedded store through the public API: revisions, tombstones, ingest, crash safety."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import rankseam
from rankseam import ConfigurationError, MemoryRef, ValidationError
from rankseam.memory import IngestError
from rankseam.sqlite import SCHEMA_VERSION
from rankseam.store import MemoryNotFoundError


@pytest.fixture
def mem(tmp_path, monkeypatch):
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)
    memory = rankseam.open_memory(tmp_path / "m.sqlite3")
    yield memory
    memory.close()


def test_add_get_roundtrip(mem):
    result = mem.add("Ada likes green tea", memory_id="ada", importance=0.8, metadata={"k": [1]})
    assert result.stored and result.gate is None
    assert result.ref == MemoryRef("default", "ada", 1)
    got = mem.get("ada")
    assert (got.text, got.importance, dict(got.metadata), got.deleted) == (
        "Ada likes green tea",
        0.8,
        {"k": [1]},
        False,
    )
    assert got.content_hash.startswith("sha256:")
    assert got.created_at > 0


def test_revisions_are_immutable_and_citable_after_update_and_delete(mem):
    r1 = mem.add("first text", memory_id="m").ref
    r2 = mem.update("m", "second text", importance=0.9)
    assert r2 == MemoryRef("default", "m", 2)
    assert mem.get(r1).text == "first text"
    assert mem.get(r1).importance == 0.5
    assert mem.get("m").text == "second text"
    assert mem.get("m").importance == 0.9
    gone = mem.delete("m")
    assert gone == r2
    # old revisions stay readable, marked deleted; search no longer finds the memory
    assert mem.get(r1).text == "first text" and mem.get(r1).deleted
    assert mem.get(r2).text == "second text" and mem.get(r2).deleted
    assert mem.get("m").deleted
    assert len(mem.search("second text", reranker=None)) == 0
    assert len(mem.search("first text", reranker=None)) == 0


def test_update_keeps_metadata_unless_given(mem):
    mem.add("x one", memory_id="m", metadata={"a": 1})
    mem.update("m", "x two")
    assert dict(mem.get("m").metadata) == {"a": 1}
    mem.update("m", "x three", metadata={"b": 2})
    assert dict(mem.get("m").metadata) == {"b": 2}


def test_only_the_current_revision_is_searchable(mem):
    mem.add("the zebra sleeps", memory_id="z")
    mem.update("z", "the giraffe eats")
    hits = mem.search("zebra giraffe", reranker=None).hits
    assert [h.ref for h in hits] == [MemoryRef("default", "z", 2)]
    assert hits[0].text == "the giraffe eats"


def test_add_after_delete_continues_revisions(mem):
    mem.add("alpha", memory_id="m")
    mem.delete("m")
    ref = mem.add("beta", memory_id="m").ref
    assert ref.revision == 2
    assert not mem.get("m").deleted


def test_errors_are_clear(mem):
    mem.add("alpha", memory_id="m")
    with pytest.raises(ValidationError, match="already exists.*update"):
        mem.add("again", memory_id="m")
    with pytest.raises(MemoryNotFoundError, match="does not exist"):
        mem.update("nope", "x")
    with pytest.raises(KeyError):
        mem.get("nope")
    with pytest.raises(MemoryNotFoundError):
        mem.get(MemoryRef("default", "m", 7))
    mem.delete("m")
    with pytest.raises(MemoryNotFoundError, match="was deleted"):
        mem.delete("m")
    for bad in ("", "   ", "a\x00b", "x" * 1_000_001, "\ud800"):
        with pytest.raises(ValidationError):
            mem.add(bad)
    for importance in (-0.1, 1.5, float("nan"), True, "high"):
        with pytest.raises(ValidationError, match="importance"):
            mem.add("text", importance=importance)
    with pytest.raises(ValidationError, match="metadata"):
        mem.add("text", metadata={"x": object()})
    with pytest.raises(ValidationError, match="namespace"):
        mem.add("text", namespace=" padded ")


def test_namespaces_are_isolated(mem):
    mem.add("shared words here", namespace="a", memory_id="1")
    mem.add("shared words here", namespace="b", memory_id="1")
    assert mem.namespaces() == ["a", "b"]
    hits = mem.search("shared words", namespace="a", reranker=None).hits
    assert {h.ref.namespace for h in hits} == {"a"}
    assert mem.get("1", namespace="b").ref.namespace == "b"


def test_list_streams_current_revisions(mem):
    mem.ingest({"id": f"m{i:04d}", "text": f"memory number {i}"} for i in range(1203))
    mem.update("m0001", "changed")
    mem.delete("m0002")
    listing = mem.list()
    assert iter(listing) is listing  # a stream, not a list
    items = list(listing)
    assert len(items) == 1202
    assert {m.ref.memory_id for m in items} >= {"m0001", "m0000"}
    assert "m0002" not in {m.ref.memory_id for m in items}
    assert len(list(mem.list(include_deleted=True))) == 1203
    assert next(m for m in items if m.ref.memory_id == "m0001").ref.revision == 2


def test_ingest_is_idempotent_and_updates_changed_records(mem):
    recs = [{"id": f"r{i}", "text": f"text {i}", "importance": 0.3} for i in range(10)]
    first = mem.ingest(recs, batch_size=3)
    assert (first.added, first.updated, first.unchanged, first.batches) == (10, 0, 0, 4)
    recs[4] = {"id": "r4", "text": "text four, changed"}
    again = mem.ingest(recs)
    assert (again.added, again.updated, again.unchanged) == (0, 1, 9)
    assert mem.get("r4").ref.revision == 2
    assert mem.get("r4").importance == 0.3  # kept from the previous revision


def test_a_batch_that_writes_one_id_twice_indexes_only_its_last_text(mem):
    # the second record retires the first one's revision inside the same transaction
    recs = [
        {"id": "a", "text": "marmalade orchard"},
        {"id": "b", "text": "lighthouse keeper"},
        {"id": "a", "text": "copper kettle"},
        {"id": "c", "text": "orchard lighthouse"},
    ]
    report = mem.ingest(recs, batch_size=10)
    assert (report.added, report.updated, report.batches) == (3, 1, 1)
    assert mem.get("a").text == "copper kettle" and mem.get("a").ref.revision == 2
    assert mem.get(MemoryRef("default", "a", 1)).text == "marmalade orchard"

    def lexical(query: str) -> dict[str, str]:
        hits = mem.search(query, limit=5).hits
        return {h.ref.memory_id: h.text for h in hits if "lexical" in h.matched_by}

    assert lexical("marmalade kettle") == {"a": "copper kettle"}
    assert lexical("orchard") == {"c": "orchard lighthouse"}


def test_ingest_record_keys_and_created_at(mem):
    mem.ingest(
        [
            {"text": "x", "namespace": "n1", "created_at": "2024-05-01T10:00:00+00:00", "id": "a"},
            {"text": "y", "created_at": 1700000000, "id": "b", "metadata": {"t": 1}},
        ]
    )
    assert mem.get("a", namespace="n1").created_at == 1714557600.0
    assert mem.get("b").created_at == 1700000000.0
    with pytest.raises(IngestError, match="record 2: unknown key") as info:
        mem.ingest([{"text": "ok"}, {"txt": "typo"}])
    assert info.value.index == 2 and info.value.committed == 0


def test_failed_batch_writes_nothing(mem):
    good = [{"id": f"g{i}", "text": f"good {i}"} for i in range(7)]
    with pytest.raises(IngestError) as info:
        mem.ingest(
            [*good, {"id": "bad", "text": ""}, {"id": "after", "text": "after"}], batch_size=5
        )
    assert info.value.committed == 5  # first batch committed, the failing batch not at all
    ids = {m.ref.memory_id for m in mem.list()}
    assert ids == {f"g{i}" for i in range(5)}


def test_schema_version_and_foreign_files(tmp_path):
    path = tmp_path / "s.db"
    rankseam.open_memory(path).close()
    con = sqlite3.connect(path)
    assert con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(
        SCHEMA_VERSION
    )
    con.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    con.commit()
    con.close()
    with pytest.raises(ConfigurationError, match="newer"):
        rankseam.open_memory(path)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    with pytest.raises(ConfigurationError, match="not a rankseam store"):
        rankseam.open_memory(other)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(ConfigurationError, match="cannot open"):
        rankseam.open_memory(junk)


_CHILD = textwrap.dedent(
    """
    import sys, rankseam
    m = rankseam.open_memory(sys.argv[1])
    done = [0]
    def tick(n):
        done[0] += n
        print(done[0], flush=True)
    records = ({"id": f"k{i}", "text": f"record {i} " + "words " * 20} for i in range(10**6))
    m.ingest(records, batch_size=50, progress=tick)
    """
)


def test_sigkill_during_ingest_keeps_every_committed_batch(tmp_path):
    path = tmp_path / "crash.sqlite3"
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "RANKSEAM_LOAD_PLUGINS": ""},
    )
    assert proc.stdout is not None
    committed = 0
    deadline = time.monotonic() + 60
    while committed < 300 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        committed = int(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert committed >= 300, "the child never committed enough batches"
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    count = con.execute("SELECT count(*) FROM memories").fetchone()[0]
    revisions = con.execute("SELECT count(*) FROM revisions").fetchone()[0]
    fts = con.execute("SELECT count(*) FROM fts WHERE fts MATCH '\"record\"'").fetchone()[0]
    con.close()
    assert count >= committed
    assert count % 50 == 0, "a batch was half-written"
    assert revisions == count == fts
    with rankseam.open_memory(path) as again:
        assert again.get("k0").text.startswith("record 0")
        assert again.stats()["memories"] == count


def test_stats_report(mem):
    mem.add("one", memory_id="1")
    mem.add("two", memory_id="2")
    mem.delete("2")
    stats = mem.stats()
    json.dumps(stats)
    assert stats["namespaces"]["default"] == {"memories": 1, "deleted": 1, "revisions": 2}
    assert stats["vector_coverage"] == 1.0
    assert stats["embedder"]["name"] == "hashed"
    assert Path(stats["path"]).exists()


def _fetch_work(memory, refs) -> int:
    """SQLite virtual-machine steps (in hundreds) one ``fetch_vectors`` call takes. Counting
    the engine's work, not time, keeps this a behaviour test on a noisy machine; the store's
    connection is the only place to count it."""
    conn = memory.store._conn()  # noqa: SLF001 -- counting VM steps needs the connection
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    conn.set_progress_handler(tick, 100)
    try:
        found = memory.store.fetch_vectors(refs, memory.embedder.descriptor)
    finally:
        conn.set_progress_handler(None, 100)
    assert len(found) == len(refs) and all(v is not None for v in found)
    return steps[0]


def test_fetching_a_pools_vectors_costs_the_same_in_a_small_and_a_large_store(tmp_path):
    """The rerank stage's one batched fetch looks each identity up by index: its work depends
    on the pool, not on how many memories the store holds (it once scanned the whole space)."""
    small = rankseam.open_memory(tmp_path / "small.sqlite3")
    large = rankseam.open_memory(tmp_path / "large.sqlite3")
    try:
        records = [{"id": f"m{i}", "text": f"note {i} about topic {i % 17}"} for i in range(4000)]
        small.ingest(records[:100])
        large.ingest(records)
        refs = [MemoryRef("default", f"m{i}", 1) for i in range(0, 60, 2)]
        work_small = _fetch_work(small, refs)
        work_large = _fetch_work(large, refs)
        assert work_large <= 2 * work_small + 10, (work_small, work_large)
        # the vectors themselves: one read-only float32 matrix, in the order asked for
        matrix = large.store.fetch_vectors(refs, large.embedder.descriptor)
        assert matrix.shape == (30, large.embedder.descriptor.dimensions)
        assert not matrix.flags.writeable
        again = large.store.fetch_vectors(refs[::-1], large.embedder.descriptor)
        assert (again[::-1] == matrix).all()
        missing = large.store.fetch_vectors(
            [refs[0], MemoryRef("default", "nope", 1)], large.embedder.descriptor
        )
        assert missing[1] is None and (missing[0] == matrix[0]).all()
    finally:
        small.close()
        large.close()
