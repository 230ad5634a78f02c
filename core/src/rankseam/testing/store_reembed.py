"""The re-embedding part of :class:`rankseam.testing.StoreContract` (``Memory.reembed``,
docs/store.md, "Re-embedding"): a re-embed killed in the middle of a batch continues where it
stopped, and one running beside writes (of the same Memory and of another process) and
searches loses no write, fails no search, answers from the old space until it completes and
switches atomically."""

from __future__ import annotations

import multiprocessing
import threading
import time
from typing import Any

import numpy as np

from rankseam.testing.base import Capability, StoreContractPart
from rankseam.testing.store_workers import (
    OTHER_SPACE,
    REEMBED_BATCH,
    EmbeddingProbe,
    StallingEmbedder,
    process_writer,
    stalled_reembed,
)

__all__ = ["ReembedContract"]

_BIRDS = ("heron", "bittern", "curlew", "dunlin", "avocet")


def _records(count: int) -> list[dict[str, Any]]:
    return [
        {"id": f"r{i:03d}", "text": f"reembed memory {i} about a {_BIRDS[i % len(_BIRDS)]}"}
        for i in range(count)
    ]


def _wait_for(condition: Any, process: Any, what: str) -> None:
    deadline = time.monotonic() + 300  # progress, not speed: any machine gets there
    while not condition():
        assert process is None or process.is_alive(), f"the re-embed process died ({what})"
        assert time.monotonic() < deadline, f"no progress in 300 s: {what}"
        time.sleep(0.05)


def _check_vectors(memory: Any, query: str, dims: int) -> list[Any]:
    """Every candidate of a search for ``query`` carries its own text's vector of the active
    space (``dims`` long); the candidates' refs."""
    probe = EmbeddingProbe()
    memory.search(query, 50, pool=50, reranker=probe)
    assert probe.seen, "the search found nothing"
    for ref, embedding, space in probe.seen:
        assert space == memory.embedder.descriptor.key
        assert embedding is not None and embedding.shape == (dims,), ref
        want = memory.embedder.embed([memory.get(ref).text])[0]
        np.testing.assert_allclose(embedding, want, atol=1e-5, err_msg=str(ref))
    return [ref for ref, _e, _s in probe.seen]


class ReembedContract(StoreContractPart):
    """Standard tests of re-embedding; :class:`~rankseam.testing.StoreContract` runs them."""

    _is_contract = True

    def test_a_killed_reembed_resumes_where_it_stopped(self, store_target: str) -> None:
        self.require(Capability.PROCESSES)
        count = 12 * REEMBED_BATCH
        with self.memory(store_target) as m:
            m.ingest(_records(count))
        # a process re-embeds into another space and stalls in the middle of its 4th batch
        process = multiprocessing.get_context("spawn").Process(
            target=stalled_reembed, args=(store_target, 4), daemon=True
        )
        process.start()
        done = 3 * REEMBED_BATCH
        try:
            with self.memory(store_target, embedders=OTHER_SPACE) as m:
                space = m.embedder.descriptor.key

                def stored() -> bool:
                    return bool(m.stats()["vectors_by_space"].get(space, 0) >= done)

                _wait_for(stored, process, "3 batches re-embedded")
        finally:
            process.kill()  # SIGKILL in the middle of a batch: no clean-up
            process.join(60)
        with self.memory(store_target, embedders=OTHER_SPACE) as m:
            assert m.stats()["vectors_by_space"][space] == done, "the killed batch was kept"
            seen: list[Any] = []
            report = m.reembed(batch_size=REEMBED_BATCH, progress=seen.append)
            assert report.complete and report.embedded == count - done, report
            assert (seen[0].embedded, seen[0].remaining) == (0, count - done)
            assert (seen[-1].embedded, seen[-1].remaining) == (count - done, 0)
            assert [p.embedded for p in seen] == sorted(p.embedded for p in seen)
            assert m.stats()["vector_coverage"] == 1.0
            assert len(_check_vectors(m, "reembed memory heron curlew", 128)) == 50
            assert m.reembed().embedded == 0

    def test_reembed_beside_writes_and_searches_loses_nothing(self, store_target: str) -> None:
        count = 8 * REEMBED_BATCH
        with self.memory(store_target, embedders=OTHER_SPACE) as other:
            new = other.embedder
        release = threading.Event()
        stalling = StallingEmbedder(new, 3, release)  # stalls in its 3rd batch until released
        failures: list[BaseException] = []
        searches = [0]
        stop = threading.Event()
        with self.memory(store_target) as m:
            old_key = m.embedder.descriptor.key
            m.ingest(_records(count))

            def search_loop() -> None:
                while not stop.is_set():
                    try:
                        assert len(m.search("reembed memory heron", 5).hits) == 5
                        searches[0] += 1
                    except BaseException as exc:  # reported below
                        failures.append(exc)

            result: dict[str, Any] = {}

            def run() -> None:
                try:
                    result["report"] = m.reembed(stalling, batch_size=REEMBED_BATCH, switch=True)
                except BaseException as exc:  # reported below
                    failures.append(exc)

            searcher = threading.Thread(target=search_loop)
            runner = threading.Thread(target=run)
            searcher.start()
            runner.start()
            try:
                assert stalling.stalled.wait(300), "the re-embed never reached its 3rd batch"
                # while it runs, the old space answers
                assert m.embedder.descriptor.key == old_key
                assert _check_vectors(m, "reembed memory heron", 256)
                # writes of this Memory store a vector in both spaces at once
                m.add("written during the re-embed: a grey heron", memory_id="during-add")
                m.update("r001", "r001 rewritten during the re-embed, a heron")
                m.ingest(
                    [
                        {"id": f"during{i}", "text": f"ingested during the re-embed {i}"}
                        for i in range(15)
                    ],
                    batch_size=4,
                )
                m.delete("r002")
                with self.memory(store_target, embedders=OTHER_SPACE) as view:
                    have = view.stats()["vectors_by_space"][new.descriptor.key]
                    # 2 batches, the add, r001's new head for its old one, 15, less r002
                    assert have == 2 * REEMBED_BATCH + 1 + 15 - 1, have
                # writes of another process are picked up before the re-embed completes
                expected: dict[str, int] = {}
                if Capability.PROCESSES in self.capabilities:
                    ctx = multiprocessing.get_context("spawn")
                    with ctx.Pool(1) as pool:
                        expected = pool.apply(process_writer, (store_target, 0, 20))
            finally:
                release.set()
                runner.join(300)
                stop.set()
                searcher.join(60)
            assert not failures, failures
            report = result["report"]
            assert report.complete and report.switched, report
            # the switch: this Memory searches and writes in the new space, which is complete
            assert m.embedder.descriptor.key == new.descriptor.key
            assert m.stats()["vector_coverage"] == 1.0
            m.add("written after the switch, a heron", memory_id="after")
            assert m.stats()["vector_coverage"] == 1.0
            refs = {r.memory_id for r in _check_vectors(m, "written during after heron", 128)}
            assert {"during-add", "after"} <= refs, refs
            assert m.get("r001").ref.revision == 2 and m.get("r002").deleted
            assert all(m.get(f"during{i}").ref.revision == 1 for i in range(15))
            for mid, rev in expected.items():
                assert m.get(mid).ref.revision == abs(rev) and m.get(mid).deleted == (rev < 0)
            live = count - 1 + 1 + 15 + 1 + sum(1 for r in expected.values() if r > 0)
            assert m.stats()["memories"] == live
