"""The store contract: what every store backend must do, as a pytest base class.

    import pytest
    from rankseam.testing import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_target(self, tmp_path):
            return "mystore://..."      # a fresh, EMPTY store per test

The standard tests open the target with :func:`rankseam.open_memory` (so the store is found
through its plugin, by the target's URL scheme) and check, through the public API only:
revisions (immutable, exactly readable by ref, idempotent adds), write batches (all or
nothing), tombstones, namespaces (isolated), identity exactness (every hit is an exact stored
revision, also while other threads write), concurrent writers in threads and in processes (no
write lost; a writer killed with SIGKILL mid-ingest leaves only whole batches), the
mixed-space guard (vectors of another embedder space are never compared nor handed to a
reranker), re-embedding (a re-embed killed with SIGKILL mid-batch resumes with exactly the
rest; one running beside searches, writes of the same Memory and a writer process loses no
write, fails no search, answers from the old space until complete and then switches;
:mod:`rankseam.testing.store_reembed`), bad input (refused with nothing stored; odd text
stored byte for byte), secrets (the target's password appears in no ``repr``, path or
report), a reader that lends its snapshot (its siblings answer from exactly that snapshot, in
other threads; :mod:`rankseam.testing.store_reader`), a memory's thread, position and
source stored exactly and its reader's neighbours in thread order from its own snapshot
(:mod:`rankseam.testing.store_structure`), a memory's history and the hard deletes (``forget``
and ``reset`` leave no row, text, vector or index entry of it, and no trace in a later
snapshot; :mod:`rankseam.testing.store_forget`), feedback on search results (stored
exactly, never memory state, bounded, deletable, in snapshots only when asked;
:mod:`rankseam.testing.store_feedback`), and snapshot round trips through the
embedded SQLite store in both directions (every id, revision, text, tombstone and vector
kept; same searches on a clone of the same kind).

Each test gets the fixture's target once; it must be empty. Give processes-based tests a
target every process can open (a file or a server URL, not ``":memory:"``).
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import pytest

from rankseam.errors import ValidationError
from rankseam.store.target import parse_target
from rankseam.testing.base import Capability
from rankseam.testing.store_feedback import FeedbackContract
from rankseam.testing.store_filters import FilterContract
from rankseam.testing.store_forget import ForgetContract
from rankseam.testing.store_ranking import check_same_ranking
from rankseam.testing.store_reader import ReaderContract
from rankseam.testing.store_reembed import ReembedContract
from rankseam.testing.store_structure import StructureContract
from rankseam.testing.store_vectors import VectorLimitContract
from rankseam.testing.store_workers import (
    KILL_BATCH,
    OTHER_SPACE,
    EmbeddingProbe,
    endless_ingest,
    open_kit,
    process_writer,
)
from rankseam.types import MemoryRef

__all__ = ["StoreContract"]

#: Texts a store must keep byte for byte (quotes, SQL and query syntax are plain text).
ODD_TEXTS = (
    "emoji 🙂 and accents: café, naïve, Ærøskøbing",
    "日本語のテキストも保存できる",
    "quotes ' \" ` and a semicolon; DROP TABLE memories; --",
    "fts syntax: NEAR(a b) AND OR NOT * ^ : (unbalanced",
    "line one\r\nline two\ttabbed   trailing spaces   ",
    "percent %s %% and backslash \\ and $1 placeholders ?",
    "x" * 5000,
)


class StoreContract(
    ReaderContract,
    StructureContract,
    FilterContract,
    ForgetContract,
    FeedbackContract,
    VectorLimitContract,
    ReembedContract,
):
    """Subclass and provide the ``store_target`` fixture: a fresh, empty store target (a path
    or URL string) per test."""

    _is_contract = True
    capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.PROCESSES})
    known_capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.PROCESSES})
    #: Writer threads and processes of the concurrency tests, and memories each writes.
    writers: ClassVar[int] = 4
    per_writer: ClassVar[int] = 25

    @pytest.fixture
    def store_target(self) -> str:
        raise NotImplementedError(
            "define a pytest fixture named store_target in your StoreContract subclass that "
            "returns a fresh, empty store target (a path or a URL)"
        )

    @contextmanager
    def memory(self, target: str, **overrides: Any) -> Iterator[Any]:
        """The store of ``target`` opened for the kit (hashed embedder, no reranker)."""
        memory = open_kit(target, **overrides)
        try:
            yield memory
        finally:
            memory.close()

    # -- revisions ---------------------------------------------------------------------------

    def test_revisions_are_immutable_and_exact(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            assert m.stats()["memories"] == 0, "store_target must be an empty store"
            r1 = m.add(
                "Ada drinks green tea", memory_id="ada", importance=0.8, metadata={"k": 1}
            ).ref
            assert (r1.namespace, r1.memory_id, r1.revision) == ("kit", "ada", 1)
            r2 = m.update("ada", "Ada switched to black coffee")
            assert r2.revision == 2
            r3 = m.update("ada", "Ada now drinks water", importance=0.3, metadata={"k": 3})
            assert r3.revision == 3
            first, second, head = m.get(r1), m.get(r2), m.get("ada")
            assert first.text == "Ada drinks green tea" and first.ref == r1
            assert (first.importance, dict(first.metadata)) == (0.8, {"k": 1})
            # left out, importance and metadata are the previous revision's
            assert second.text == "Ada switched to black coffee"
            assert (second.importance, dict(second.metadata)) == (0.8, {"k": 1})
            assert head.ref == r3 and head.text == "Ada now drinks water"
            assert (head.importance, dict(head.metadata)) == (0.3, {"k": 3})
            assert first.content_hash != head.content_hash
            # only the head is searchable
            refs = [h.ref for h in m.search("Ada drinks", 10)]
            assert refs == [r3]
            with pytest.raises(ValidationError):
                m.get(MemoryRef("kit", "ada", 4))

    def test_add_with_an_id_is_idempotent(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            a = m.add("a note about kites", memory_id="n1", metadata={"x": [1, 2]})
            again = m.add("a note about kites", memory_id="n1", metadata={"x": [1, 2]})
            assert a.stored and not again.stored and again.unchanged
            assert again.ref == a.ref
            with pytest.raises(ValidationError, match="update"):
                m.add("another text", memory_id="n1")
            with pytest.raises(ValidationError):
                m.update("unknown-id", "text")
            assert m.get("n1").ref.revision == 1
            assert m.stats()["namespaces"]["kit"]["revisions"] == 1

    def test_write_batches(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            records = [{"id": f"b{i}", "text": f"batch memory {i} about owls"} for i in range(12)]
            records += [
                {"id": "b0", "text": "batch memory 0 about owls"},  # unchanged
                {"id": "b1", "text": "batch memory 1 rewritten"},  # updated
                {"id": "b1", "text": "batch memory 1 rewritten twice"},  # same batch again
            ]
            report = m.ingest(records, batch_size=5)
            assert (report.added, report.updated, report.unchanged) == (12, 2, 1)
            assert m.get("b1").ref.revision == 3
            assert m.get(MemoryRef("kit", "b1", 2)).text == "batch memory 1 rewritten"
            # a bad record: its whole batch is refused, earlier batches are kept
            bad = [{"id": f"c{i}", "text": f"c {i}"} for i in range(6)] + [{"id": "c6", "text": ""}]
            with pytest.raises(ValidationError):
                m.ingest(bad, batch_size=5)
            kept = {mem.ref.memory_id for mem in m.list()}
            assert {f"c{i}" for i in range(5)} <= kept
            assert "c5" not in kept and "c6" not in kept

    # -- tombstones --------------------------------------------------------------------------

    def test_tombstones(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            r1 = m.add("the pelican nests on the pier", memory_id="pel").ref
            r2 = m.update("pel", "the pelican moved to the harbour pier")
            m.add("a gull also lives on the pier", memory_id="gull")
            gone = m.delete("pel")
            assert gone == r2
            assert m.get("pel").deleted and m.get("pel").ref == r2
            assert m.get(r1).text == "the pelican nests on the pier"  # still readable
            assert m.get(r1).deleted
            assert all(h.ref.memory_id != "pel" for h in m.search("pelican pier", 10))
            assert [x.ref.memory_id for x in m.list()] == ["gull"]
            listed = {x.ref.memory_id: x.deleted for x in m.list(include_deleted=True)}
            assert listed == {"gull": False, "pel": True}
            with pytest.raises(ValidationError):
                m.delete("pel")
            with pytest.raises(ValidationError):
                m.update("pel", "too late")
            back = m.add("the pelican came back", memory_id="pel")
            assert back.ref == MemoryRef("kit", "pel", 3)
            assert m.search("pelican came back", 10).hits[0].ref == back.ref
            stats = m.stats()["namespaces"]["kit"]
            assert (stats["memories"], stats["deleted"], stats["revisions"]) == (2, 0, 4)

    # -- namespaces --------------------------------------------------------------------------

    def test_namespaces_are_isolated(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            a = m.add("shared id, walrus text", memory_id="same", namespace="alpha").ref
            b = m.add("shared id, walrus story", memory_id="same", namespace="beta").ref
            m.update("same", "beta's walrus, revised", namespace="beta")
            assert a == MemoryRef("alpha", "same", 1)
            assert m.get("same", namespace="alpha").text == "shared id, walrus text"
            assert m.get("same", namespace="beta").ref.revision == 2
            assert m.get(b).text == "shared id, walrus story"
            for ns in ("alpha", "beta"):
                hits = m.search("walrus", 10, namespace=ns)
                assert hits and all(h.ref.namespace == ns for h in hits)
            assert m.search("walrus", 10, namespace="gamma").hits == ()
            m.delete("same", namespace="alpha")
            assert m.get("same", namespace="beta").deleted is False
            assert m.namespaces() == ["alpha", "beta"]
            per_ns = m.stats()["namespaces"]
            assert per_ns["alpha"]["deleted"] == 1 and per_ns["beta"]["revisions"] == 2

    # -- identity exactness ------------------------------------------------------------------

    def test_every_hit_is_an_exact_stored_revision(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            for i in range(30):
                m.add(f"lighthouse keeper log {i}: the lamp was trimmed", memory_id=f"log{i}")
            for i in range(0, 30, 3):
                m.update(f"log{i}", f"lighthouse keeper log {i}: the lamp was replaced")
            for query in ("lighthouse lamp", "keeper log 3", "replaced lamp"):
                result = m.search(query, 20)
                assert result.hits
                for hit in result:
                    stored = m.get(hit.ref)
                    assert (stored.text, stored.content_hash) == (hit.text, hit.content_hash)
                    assert stored.ref == m.get(hit.ref.memory_id).ref  # the live head
                assert [h.ref for h in m.search(query, 20)] == [h.ref for h in result]

    def test_hits_stay_exact_while_others_write(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            for i in range(20):
                m.add(f"tide table entry {i} high water", memory_id=f"t{i}")
            errors: list[BaseException] = []

            def writer(w: int) -> None:
                try:
                    for round_ in range(15):
                        m.update(
                            f"t{(w * 5 + round_) % 20}",
                            f"tide table entry w{w} r{round_} high water",
                        )
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
            for t in threads:
                t.start()
            for _ in range(30):
                for hit in m.search("tide high water", 10):
                    assert m.get(hit.ref).text == hit.text, "a hit mixed revisions"
            for t in threads:
                t.join()
            assert not errors, errors
            assert m.stats()["namespaces"]["kit"]["revisions"] == 20 + 2 * 15

    # -- concurrent writers ------------------------------------------------------------------

    def test_concurrent_writers_in_threads_lose_nothing(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            errors: list[BaseException] = []

            def writer(w: int) -> None:
                try:
                    for i in range(self.per_writer):
                        m.add(f"thread {w} memory {i} about badgers", memory_id=f"w{w}-{i}")
                        if i % 4 == 0:
                            m.update(f"w{w}-{i}", f"thread {w} memory {i} revised")
                    m.ingest(
                        [{"id": f"w{w}-bulk{i}", "text": f"bulk {w} {i}"} for i in range(10)],
                        batch_size=3,
                    )
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=writer, args=(w,)) for w in range(self.writers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors
            for w in range(self.writers):
                for i in range(self.per_writer):
                    assert m.get(f"w{w}-{i}").ref.revision == (2 if i % 4 == 0 else 1)
            updated = len(range(0, self.per_writer, 4))
            stats = m.stats()["namespaces"]["kit"]
            assert stats["memories"] == self.writers * (self.per_writer + 10)
            assert stats["revisions"] == self.writers * (self.per_writer + 10 + updated)

    def test_concurrent_writers_in_processes_lose_nothing(self, store_target: str) -> None:
        self.require(Capability.PROCESSES)
        with self.memory(store_target) as m:
            m.add("opened before the writers start", memory_id="seed")
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(self.writers) as pool:
            results = pool.starmap(
                process_writer,
                [(store_target, w, self.per_writer) for w in range(self.writers)],
            )
        with self.memory(store_target) as m:
            for expected in results:
                for mid, rev in expected.items():
                    stored = m.get(mid)
                    assert stored.ref.revision == abs(rev), mid
                    assert stored.deleted == (rev < 0), mid
            live = sum(1 for e in results for r in e.values() if r > 0) + 1
            assert m.stats()["namespaces"]["kit"]["memories"] == live

    def test_a_killed_writer_leaves_only_whole_batches(self, store_target: str) -> None:
        self.require(Capability.PROCESSES)
        with self.memory(store_target) as m:
            m.add("opened before the writer starts", memory_id="seed", namespace="seed")
            process = multiprocessing.get_context("spawn").Process(
                target=endless_ingest, args=(store_target,), daemon=True
            )
            process.start()
            try:
                deadline = time.monotonic() + 300  # progress, not speed: any machine gets there
                while m.stats()["memories"] < 1 + 3 * KILL_BATCH:
                    assert process.is_alive(), f"the writer died (exit code {process.exitcode})"
                    assert time.monotonic() < deadline, "the writer made no progress in 300 s"
                    time.sleep(0.05)
            finally:
                process.kill()  # SIGKILL: no clean-up, mid-batch whenever that falls
                process.join(60)
        with self.memory(store_target) as m:
            ids = sorted(x.ref.memory_id for x in m.list())
            assert len(ids) % KILL_BATCH == 0, f"{len(ids)} memories: a batch was cut"
            assert ids == [f"k{i:07d}" for i in range(len(ids))], "a batch was skipped"
            for mid in ids[:: KILL_BATCH // 2]:
                assert m.get(mid).text.startswith("killed writer memory")
            assert m.get("seed", namespace="seed").ref.revision == 1

    # -- embedder spaces ---------------------------------------------------------------------

    def test_mixed_space_guard(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            old_space = m.embedder.descriptor.key
            for i in range(5):
                m.add(f"otter sighting number {i} by the river", memory_id=f"old{i}")
        with self.memory(store_target, embedders=OTHER_SPACE) as m:
            new_space = m.embedder.descriptor.key
            assert new_space != old_space
            for i in range(5):
                m.add(f"otter sighting number {i + 5} by the river", memory_id=f"new{i}")
            stats = m.stats()
            assert stats["vectors_by_space"].get(old_space) == 5
            assert stats["vectors_by_space"].get(new_space) == 5
            assert stats["vector_coverage"] == 0.5
            probe = EmbeddingProbe()
            result = m.search("otter sighting river", 10, reranker=probe)
            assert len(result.hits) == 10
            for hit in result:
                if hit.ref.memory_id.startswith("old"):
                    assert "vector" not in hit.matched_by, "a vector of another space was compared"
            for ref, embedding, _space in probe.seen:
                if ref.memory_id.startswith("old"):
                    assert embedding is None, "a vector of another space reached a reranker"
                else:
                    assert embedding is not None and embedding.shape == (128,)
            report = m.reembed()
            assert report.embedded == 5
            assert m.stats()["vector_coverage"] == 1.0
            probe = EmbeddingProbe()
            m.search("otter sighting river", 10, reranker=probe)
            assert all(e is not None and e.shape == (128,) for _r, e, _s in probe.seen)

    def test_index_maintenance_changes_no_answer(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            m.ingest({"text": f"heath moth record {i} at the light trap"} for i in range(60))
            before = [(h.ref, round(h.score, 6)) for h in m.search("moth light trap", 20)]
            m.maintain_index()  # whatever the store does (or None: nothing to do) ...
            after = [(h.ref, round(h.score, 6)) for h in m.search("moth light trap", 20)]
            assert after == before  # ... the answers stay the same

    # -- same data, same ranking ---------------------------------------------------------------

    def test_ranks_like_the_embedded_store(self, store_target: str, tmp_path: Path) -> None:
        """The same records and queries rank the same here and in the embedded SQLite store:
        identical memories and scores (6 decimals) over vector + importance, with the hashed
        embedder and with one that declares the ``minmax`` fusion scale; top-10 overlap of at
        least 95 % for the full default search (see ``rankseam.testing.store_ranking``)."""
        check_same_ranking(self.memory, store_target, str(tmp_path / "reference.sqlite3"))

    # -- bad input ---------------------------------------------------------------------------

    def test_bad_input_is_refused_and_nothing_is_stored(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            bad_calls = [
                lambda: m.add(""),
                lambda: m.add("   "),
                lambda: m.add("nul \x00 inside"),
                lambda: m.add("lone surrogate \ud800"),
                lambda: m.add("ok", memory_id=" padded "),
                lambda: m.add("ok", memory_id=""),
                lambda: m.add("ok", memory_id=7),
                lambda: m.add("ok", namespace="x" * 600),
                lambda: m.add("ok", importance=1.5),
                lambda: m.add("ok", importance=float("nan")),
                lambda: m.add("ok", metadata={"x": {1, 2}}),
                lambda: m.add("ok", metadata=["not", "a", "mapping"]),
                lambda: m.ingest([{"text": "ok", "unknown": 1}]),
                lambda: m.search("", 5),
                lambda: m.search("fine", 0),
                lambda: m.get("missing"),
            ]
            for call in bad_calls:
                with pytest.raises(ValidationError):
                    call()
            assert m.stats()["memories"] == 0
            assert m.namespaces() == []

    def test_odd_text_is_stored_byte_for_byte(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            refs = [m.add(text, metadata={"text": text}).ref for text in ODD_TEXTS]
            for ref, text in zip(refs, ODD_TEXTS, strict=True):
                stored = m.get(ref)
                assert stored.text == text and stored.metadata["text"] == text
            for text in ODD_TEXTS[:6]:
                result = m.search(text, 10)  # query syntax is plain text, never an error
                assert all(m.get(h.ref).text == h.text for h in result)

    # -- secrets ----------------------------------------------------------------------------

    def test_the_targets_password_is_never_shown(self, store_target: str) -> None:
        target = parse_target(store_target)
        if target.scrub(target.redacted) != target.redacted:
            pytest.skip(
                "the target's password also occurs elsewhere in its URL (e.g. it equals the user "
                "name): use a distinctive password so that a leak can be told apart"
            )
        with self.memory(store_target) as m:
            m.add("a memory so that stats have something to say")
            shown = [repr(m), m.path, json.dumps(m.stats(), default=str), repr(m.config)]
            for text in shown:
                assert target.scrub(text) == text, f"a secret of the target shows in {text!r}"

    # -- snapshots ---------------------------------------------------------------------------

    @staticmethod
    def _populate(m: Any) -> None:
        m.add("the heron fishes at dawn", memory_id="heron", importance=0.9, metadata={"a": 1})
        m.update("heron", "the heron fishes at dusk")
        m.add("the kingfisher dives", memory_id="king")
        m.delete("king")
        m.add("a second namespace holds the coot", memory_id="coot", namespace="other")
        m.ingest({"id": f"bulk{i}", "text": f"wetland bird census entry {i}"} for i in range(40))
        m.update("bulk3", "wetland bird census entry 3, corrected")

    @staticmethod
    def _records(snapshot: Path) -> list[Any]:
        manifest = json.loads((snapshot / "manifest.json").read_text("utf-8"))
        data = snapshot / manifest["files"][0]["path"]
        lines = data.read_text("utf-8").splitlines()
        return [json.loads(line) for line in lines]

    @staticmethod
    def _searches(m: Any) -> list[list[tuple[MemoryRef, str]]]:
        out = []
        for ns in ("kit", "other"):
            for query in ("heron dusk", "wetland census entry", "coot namespace", "kingfisher"):
                out.append([(h.ref, h.text) for h in m.search(query, 10, namespace=ns)])
        return out

    def test_snapshot_round_trip_through_sqlite(self, store_target: str, tmp_path: Path) -> None:
        # SQLite -> this store: every memory, revision, tombstone and vector arrives
        source_db = str(tmp_path / "source.sqlite3")
        with self.memory(source_db) as src:
            self._populate(src)
            src.export_snapshot(tmp_path / "from-sqlite")
            source_searches = self._searches(src)
            with self.memory(store_target) as m:
                report = m.import_snapshot(tmp_path / "from-sqlite")
                assert (report.memories, report.revisions_written) == (43, 45)
                if m.store.kind == "sqlite":  # a clone of the same kind answers identically
                    assert self._searches(m) == source_searches
                else:  # lexical scoring may differ: every hit still cites a revision of the source
                    for query_hits in self._searches(m):
                        for ref, text in query_hits:
                            assert src.get(ref).text == text
                # this store -> a snapshot again: nothing lost or changed on the way
                m.export_snapshot(tmp_path / "from-store")
                with pytest.raises(ValidationError):
                    m.import_snapshot(tmp_path / "from-sqlite")  # not empty: refused ...
                assert m.stats()["namespaces"]["kit"]["revisions"] == 44  # ... and unchanged
        assert self._records(tmp_path / "from-store") == self._records(tmp_path / "from-sqlite")
        # ... and back into SQLite: the same store as the source
        with self.memory(str(tmp_path / "back.sqlite3")) as back:
            back.import_snapshot(tmp_path / "from-store")
            back.export_snapshot(tmp_path / "back")
            assert self._searches(back) == source_searches
        assert self._records(tmp_path / "back") == self._records(tmp_path / "from-sqlite")
