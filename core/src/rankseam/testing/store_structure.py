"""The store contract's structure tests: a memory's ``thread``, ``position`` and
``derived_from`` are stored exactly on every surface of a store, and its reader's
``neighbours`` (``rankseam.plugin.stores.NeighbourReader``) answers a thread's order from the
reader's own snapshot.

:class:`~rankseam.testing.StoreContract` runs them (docs/store.md, "Threads, positions and
sources")."""

from __future__ import annotations

import random
import threading
from typing import Any

from rankseam.store.readers import NeighbourReader
from rankseam.testing.base import StoreContractPart
from rankseam.types import MemoryRef

__all__ = ["StructureContract"]

#: The namespace the kit's memories live in (``open_kit``).
_NS = "kit"


def _thread_records(seed: int) -> list[dict[str, Any]]:
    """Memories of two threads in two namespaces (written out of order, with a tie of
    positions), a memory without a thread and facts derived from turns."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    for thread in ("s1", "s2"):
        for i in range(8):
            records.append(
                {
                    "id": f"{thread}-t{i}",
                    "text": f"{thread} turn {i}: the harbour at dawn",
                    "thread": thread,
                    # turns 3 and 4 share a position: ordered by row key (write order)
                    "position": 3 if i in (3, 4) else i,
                }
            )
    rng.shuffle(records)
    for thread in ("s1", "s2"):  # t3 is written before t4, so its row key is lower
        ids = [r["id"] for r in records]
        i, j = ids.index(f"{thread}-t3"), ids.index(f"{thread}-t4")
        if i > j:
            records[i], records[j] = records[j], records[i]
    records.append({"id": "loose", "text": "a memory of no thread"})
    records.append({"id": "fact-1", "text": "fact from turn 2", "derived_from": "s1-t2"})
    records.append(
        {"id": "s1-other", "text": "same thread name elsewhere", "thread": "s1", "namespace": "x"}
    )
    return records


class StructureContract(StoreContractPart):
    """Standard tests of a store's structure columns and its ``NeighbourReader``;
    :class:`~rankseam.testing.StoreContract` runs them."""

    _is_contract = True

    def test_structure_is_stored_exactly(self, store_target: str) -> None:
        """thread, position and derived_from come back from get, get by ref, list, search
        and a snapshot's bulk read exactly as written; an update that leaves them out keeps
        them, one that gives them replaces them; a memory in a thread without a position is
        placed at its created_at."""
        with self.memory(store_target) as m:
            m.add(
                "the ferry leaves at nine",
                memory_id="a",
                thread="chat-1",
                position=1_700_000_000.25,
                derived_from="src",
            )
            m.add("plain memory", memory_id="b")
            m.ingest(
                [{"id": "c", "text": "placed by time", "thread": "chat-1", "created_at": 1.6e9}]
            )
            got = m.get("a")
            assert (got.thread, got.position, got.derived_from) == (
                "chat-1",
                1_700_000_000.25,
                "src",
            )
            assert (m.get("b").thread, m.get("b").position, m.get("b").derived_from) == (
                None,
                None,
                None,
            )
            assert m.get("c").position == 1.6e9
            ref = m.update("a", "the ferry leaves at ten")
            kept = m.get(ref)
            assert (kept.thread, kept.position, kept.derived_from) == (
                "chat-1",
                1_700_000_000.25,
                "src",
            )
            ref = m.update("a", "the ferry leaves at ten", thread="chat-2", position=7)
            moved = m.get(ref)
            assert (moved.thread, moved.position, moved.derived_from) == ("chat-2", 7.0, "src")
            old = m.get(MemoryRef(_NS, "a", 1))
            assert (old.thread, old.position) == ("chat-1", 1_700_000_000.25)
            listed = {s.ref.memory_id: (s.thread, s.position, s.derived_from) for s in m.list()}
            assert listed["a"] == ("chat-2", 7.0, "src")
            assert listed["b"] == (None, None, None)
            hits = {h.ref.memory_id: h for h in m.search("ferry", limit=5, reranker=None)}
            assert (hits["a"].thread, hits["a"].position, hits["a"].derived_from) == (
                "chat-2",
                7.0,
                "src",
            )
            report = m.ingest([{"id": "b", "text": "plain memory", "thread": "t", "position": 2}])
            assert report.updated == 1
            again = m.ingest([{"id": "b", "text": "plain memory"}])  # left out: kept
            assert again.unchanged == 1
            assert (m.get("b").thread, m.get("b").position) == ("t", 2.0)
            with m.store.bulk_read() as bulk:
                rows = {
                    (r.memory_id, r.revision): (r.thread, r.position, r.derived_from)
                    for r in bulk.revisions([])
                }
            assert rows[("a", 1)] == ("chat-1", 1_700_000_000.25, "src")
            assert rows[("a", 3)] == ("chat-2", 7.0, "src")

    def test_neighbours_in_thread_order(self, store_target: str) -> None:
        """``neighbours(keys, before, after)`` answers the live revisions of the key's
        namespace and thread just before and after it, in thread order (position, then
        write order), leaving out a key that is not live or has no thread; it answers from
        the reader's snapshot, not what was committed after."""
        with self.memory(store_target) as m:
            m.ingest(_thread_records(7))
            m.update("s1-t5", "s1 turn 5, edited")  # the retired revision is nobody's neighbour
            m.delete("s2-t6")
            with m.store.read() as reader:
                capable = isinstance(reader, NeighbourReader)  # (not narrowing the reader)
                assert capable, (
                    "a store's reader implements NeighbourReader (neighbours(keys, before, after))"
                )

                def key(memory_id: str, namespace: str = _NS) -> int:
                    found = reader.resolve(m.get(memory_id, namespace=namespace).ref)
                    assert found is not None
                    return found

                def ids(keys: Any) -> list[str]:
                    return [
                        stored.ref.memory_id for k in keys for stored in [reader.memories([k])[k]]
                    ]

                t2, t3, t4, t5 = (key(f"s1-t{i}") for i in (2, 3, 4, 5))
                retired = reader.resolve(MemoryRef(_NS, "s1-t5", 1))
                wanted = [t3, t4, key("s1-t0"), key("s1-t7"), key("s2-t5"), key("loose")]
                wanted += [key("fact-1"), key("s1-other", "x"), retired or -1, 10**12]
                got = reader.neighbours(wanted, 2, 2)
                assert ids(got[t3].before) == ["s1-t1", "s1-t2"]
                assert ids(got[t3].after) == ["s1-t4", "s1-t5"]  # the tie: write order
                assert ids(got[t4].before) == ["s1-t2", "s1-t3"]
                assert ids(got[t4].after) == ["s1-t5", "s1-t6"]
                assert got[t4].after[0] == t5  # the live revision, not the retired one
                assert ids(got[key("s1-t0")].before) == []
                assert ids(got[key("s1-t0")].after) == ["s1-t1", "s1-t2"]
                assert ids(got[key("s1-t7")].after) == []
                assert ids(got[key("s2-t5")].after) == ["s2-t7"]  # s2-t6 was deleted
                assert ids(got[key("s1-other", "x")].keys()) == []  # its own namespace only
                for absent in (key("loose"), key("fact-1"), retired, 10**12):
                    assert absent not in got, "a key without a thread or not live is left out"
                one = reader.neighbours([t2], 1, 0)
                assert ids(one[t2].before) == ["s1-t1"] and one[t2].after == ()
                # committed by another transaction after the snapshot was taken: unseen
                errors: list[BaseException] = []

                def add() -> None:
                    try:
                        m.add("s1 turn 3.5", memory_id="s1-new", thread="s1", position=3.5)
                    except BaseException as exc:  # reported below
                        errors.append(exc)

                writer = threading.Thread(target=add)
                writer.start()
                writer.join()
                assert not errors, errors
                assert reader.neighbours([t4], 2, 2)[t4] == got[t4]
            with m.store.read() as reader:
                fresh = reader.neighbours([t4], 0, 1)
                (after,) = fresh[t4].after
                assert reader.memories([after])[after].ref.memory_id == "s1-new"
