"""The store contract's reader tests: a reader that lends its snapshot to other threads
(``rankseam.plugin.stores.ConcurrentReader``) lends exactly that snapshot.

:class:`~rankseam.testing.StoreContract` runs them; a store whose reader does not lend its
snapshot skips them (the host then calls its channels one after another)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from rankseam.store.readers import ConcurrentReader, LexicalQuery
from rankseam.testing.base import StoreContractPart

__all__ = ["ReaderContract"]

#: The namespace the kit's memories live in (``open_kit``).
_NS = "kit"


def _answers(reader: Any, space: Any, query: Any) -> tuple[Any, ...]:
    """What the host's channels ask of a reader for one search."""
    return (
        reader.live_count(_NS),
        reader.document_frequency(_NS, "harbour", 1000),
        reader.lexical(LexicalQuery(_NS, 10, ("harbour", "tide"))),
        reader.vector(_NS, space, query, 10),
        reader.top_importance(_NS, 10),
    )


class ReaderContract(StoreContractPart):
    """Standard tests of a store's reader; :class:`~rankseam.testing.StoreContract` runs them."""

    _is_contract = True

    def test_the_declared_reader_type_is_what_read_yields(self, store_target: str) -> None:
        """A store that declares the class of its snapshots (``reader_type``: the host checks
        channels' reader capabilities against it when a Memory opens the store) yields
        instances of it from ``read()``."""
        with self.memory(store_target) as m:
            declared = getattr(m.store, "reader_type", None)
            if declared is None:
                pytest.skip("this store does not declare its reader_type")
            assert isinstance(declared, type), declared
            with m.store.read() as reader:
                assert isinstance(reader, declared), (type(reader), declared)

    def test_required_scoring_words_hold_for_every_finding_word(self, store_target: str) -> None:
        """A lexical query with ``require_scoring`` finds the memories that hold one of its
        words *and* one of its scoring words, whichever finding word they hold (never a
        memory with a finding word alone)."""
        texts = {"a": "alpha", "b": "beta", "ag": "alpha gamma", "bg": "beta gamma"}
        with self.memory(store_target) as m:
            m.ingest({"id": key, "text": text} for key, text in texts.items())
            query = LexicalQuery(_NS, 10, ("alpha", "beta"), ("gamma",), require_scoring=True)
            with m.store.read() as reader:
                keys = reader.lexical(query).row_keys.tolist()
                found = {ref.memory_id for ref in reader.identities(keys).values()}
        assert found == {"ag", "bg"}, found

    def test_siblings_read_the_readers_snapshot(self, store_target: str) -> None:
        """Siblings used from other threads answer every channel exactly as their reader
        does, and none sees what was committed after the reader's snapshot was taken."""
        with self.memory(store_target) as m:
            m.ingest(
                {"id": f"s{i}", "text": f"harbour log {i}: tide and wind", "importance": i / 40}
                for i in range(30)
            )
            space = m.embedder.descriptor
            query = np.asarray(m.embedder.embed(["harbour tide"])[0], dtype=np.float32)
            if space.normalization != "l2":  # the host hands a unit vector
                query = query / np.linalg.norm(query)
            with m.store.read() as reader:
                if not isinstance(reader, ConcurrentReader):
                    pytest.skip("this store's reader does not lend its snapshot (no siblings)")
                before = _answers(reader, space, query)
                # committed by other transactions after the snapshot was taken
                m.ingest(
                    {"id": f"n{i}", "text": f"harbour tide {i}", "importance": 1.0}
                    for i in range(10)
                )
                got: dict[int, tuple[Any, ...]] = {}
                errors: list[BaseException] = []
                with reader.siblings(2) as others:
                    assert len(others) == 2, "siblings(2) must give two readers"

                    def run(i: int, other: Any) -> None:
                        try:
                            got[i] = _answers(other, space, query)
                        except BaseException as exc:  # reported below
                            errors.append(exc)

                    threads = [
                        threading.Thread(target=run, args=(i, o)) for i, o in enumerate(others)
                    ]
                    for t in threads:
                        t.start()
                    here = _answers(reader, space, query)
                    for t in threads:
                        t.join()
                assert not errors, errors
                assert here == before, "the reader's answers changed within its snapshot"
                for i in range(2):
                    assert got[i] == before, "a sibling answered from another snapshot"
            with m.store.read() as reader:
                assert reader.live_count(_NS) == 40  # a new snapshot sees the new memories
