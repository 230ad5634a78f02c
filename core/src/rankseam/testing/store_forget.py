"""The store contract's history and hard-delete tests: ``Store.history`` answers every
revision oldest first; ``Store.forget`` and ``Store.reset`` remove every revision's row,
text, metadata and vectors (no read, search, filter, vector lookup, bulk read or later
snapshot finds any of it), leave the id and the time (``get`` says when it was forgotten),
touch nothing else, and a forgotten id may be stored anew from revision 1.

:class:`~rankseam.testing.StoreContract` runs them (docs/store.md, "History" and
"Forgetting")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rankseam.errors import ValidationError
from rankseam.testing.base import StoreContractPart
from rankseam.types import MemoryRef

__all__ = ["ForgetContract"]

#: A word no other memory of the kit holds: where it is found, a forgotten text is.
MARKER = "quokkazebra"
#: The namespace the kit's memories live in (``open_kit``).
_NS = "kit"


def _write_history(m: Any, memory_id: str, namespace: str = _NS) -> list[MemoryRef]:
    """A memory of three revisions that carry the marker in text and metadata."""
    first = m.add(
        f"{MARKER} one: the lighthouse keeper's first note",
        memory_id=memory_id,
        namespace=namespace,
        metadata={"secret": f"{MARKER}-meta", "n": 1},
    ).ref
    second = m.update(memory_id, f"{MARKER} two: a revised note", namespace=namespace)
    third = m.update(
        memory_id,
        f"{MARKER} three: the final note",
        namespace=namespace,
        metadata={"secret": f"{MARKER}-meta3", "n": 3},
    )
    return [first, second, third]


def _bulk_ids(m: Any) -> set[tuple[str, str]]:
    """Every (namespace, memory id) a bulk read of the whole store holds."""
    with m.store.bulk_read() as bulk:
        spaces = [row.key for row in bulk.spaces()]
        return {(r.namespace, r.memory_id) for r in bulk.revisions(spaces)}


class ForgetContract(StoreContractPart):
    """Standard tests of a store's history, ``forget`` and ``reset``;
    :class:`~rankseam.testing.StoreContract` runs them."""

    _is_contract = True

    def test_history_is_every_revision_oldest_first(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            refs = _write_history(m, "h")
            revisions = m.history("h")
            assert [r.ref for r in revisions] == refs
            assert [r.text for r in revisions] == [m.get(ref).text for ref in refs]
            assert [dict(r.metadata)["n"] for r in revisions] == [1, 1, 3]
            assert not any(r.deleted for r in revisions)
            m.delete("h")
            assert [r.deleted for r in m.history("h")] == [True, True, True]
            with pytest.raises(KeyError, match="no memory 'nope'"):
                m.history("nope")

    def test_forget_removes_every_revision_everywhere(
        self, store_target: str, tmp_path: Path
    ) -> None:
        with self.memory(store_target) as m:
            m.add("a memory that stays: the lighthouse at night", memory_id="keep")
            refs = _write_history(m, "gone")
            with m.store.read() as reader:
                keys = [reader.resolve(ref) for ref in refs]
            assert all(k is not None for k in keys)
            before = m.stats()["namespaces"][_NS]["revisions"]
            assert [h.ref.memory_id for h in m.search(MARKER, reranker=None).hits][:1] == ["gone"]

            done = m.forget("gone")
            assert (done.namespace, done.memories, done.revisions) == (_NS, 1, 3)

            with pytest.raises(KeyError, match="was forgotten"):
                m.get("gone")
            with pytest.raises(KeyError, match="was forgotten"):
                m.history("gone")
            for ref in refs:
                with pytest.raises(KeyError, match="was forgotten"):
                    m.get(ref)
            with m.store.read() as reader:
                assert [reader.resolve(ref) for ref in refs] == [None, None, None]
                assert reader.memories([k for k in keys if k is not None]) == {}
            vectors = m.store.vectors_of(keys, m.embedder.descriptor)
            assert all(v is None for v in vectors), "a forgotten revision kept its vector"
            hits = m.search(MARKER, reranker=None).hits
            assert all(MARKER not in h.text for h in hits)
            assert "gone" not in {h.ref.memory_id for h in hits}
            assert list(m.list(where={"secret": f"{MARKER}-meta3"})) == []
            assert [s.ref.memory_id for s in m.list(include_deleted=True)] == ["keep"]
            assert m.stats()["namespaces"][_NS]["revisions"] == before - 3
            assert (_NS, "gone") not in _bulk_ids(m)
            out = tmp_path / "after-forget"
            m.export_snapshot(out)
            for file in out.iterdir():
                assert MARKER.encode() not in file.read_bytes(), f"{file.name} holds it"
            assert m.get("keep").text.startswith("a memory that stays")

    def test_a_forgotten_id_can_be_stored_anew(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            _write_history(m, "again")
            m.delete("again")  # a tombstoned memory is forgotten too
            assert m.forget("again").revisions == 3
            with pytest.raises(KeyError, match="was forgotten"):
                m.forget("again")
            with pytest.raises(KeyError, match="no memory 'never'"):
                m.forget("never")
            assert m.store.forget(_NS, ["never", "again"]).memories == 0
            ref = m.add("a new memory under an old id", memory_id="again").ref
            assert ref.revision == 1
            assert [r.text for r in m.history("again")] == ["a new memory under an old id"]
            hits = m.search("new memory old id", reranker=None).hits
            assert [h.ref for h in hits] == [ref]

    def test_reset_forgets_one_namespace_after_confirmation(self, store_target: str) -> None:
        with self.memory(store_target) as m:
            _write_history(m, "a")
            m.add(f"{MARKER} and more", memory_id="b")
            _write_history(m, "a", namespace="other")
            with pytest.raises(ValidationError, match=r"confirm=True"):
                m.reset(_NS)
            assert len(list(m.list())) == 2, "a refused reset removed something"
            done = m.reset(_NS, confirm=True)
            assert (done.memories, done.revisions) == (2, 4)
            assert list(m.list(include_deleted=True)) == []
            assert m.search(MARKER, reranker=None).hits == ()
            with pytest.raises(KeyError, match="was forgotten"):
                m.get("b")
            assert {ns for ns, _mid in _bulk_ids(m)} == {"other"}
            assert _NS not in m.namespaces()
            kept = m.search(MARKER, namespace="other", reranker=None).hits
            assert [h.ref.memory_id for h in kept] == ["a"]
            assert m.reset("empty-namespace", confirm=True).memories == 0
            m.add("the namespace is usable again", memory_id="a")
            assert m.get("a").ref.revision == 1
