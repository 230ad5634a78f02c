"""The store contract: what a store backend implements (docs/writing-plugins.md, "Writing a
store"). The embedded SQLite store (:class:`rankseam.sqlite.SQLiteStore`) is one
implementation; a plugin registers others with the ``register_stores`` hook.

Words used throughout:

- A **memory** is ``(namespace, memory_id)``; each write of it is an immutable **revision**
  ``1, 2, 3, ...`` (a :class:`~rankseam.types.MemoryRef` names one). The newest revision is the
  memory's **head**; it is **live** (searchable) unless the memory is **tombstoned**
  (deleted). Every revision stays readable by its ref forever.
- A **row key** (``key``) is an integer the store assigns to each revision: unique in the
  store, never reused, growing with write order, stable while the store exists. Candidate
  sources answer with row keys; the host turns them into refs through the snapshot they came
  from (:meth:`StoreReader.identities`), so a hit always cites an exact stored revision.
- To **forget** a memory is to hard-delete it: every revision's text, metadata and vectors
  leave the store and its indexes, and only the id with the time it was forgotten stays
  (so that ``get`` can say so); a tombstone (``delete``) keeps every revision readable.
- An **embedder space** is an :class:`~rankseam.plugin.embedders.EmbedderDescriptor`'s
  ``key``: a vector is stored with the space it belongs to and is compared only with vectors of
  that space.

Every method may be called from several threads at once; several processes may write the
same store at once (a server store) or one at a time (the SQLite file's write lock).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rankseam.embedding import EmbedderDescriptor, Vectors
from rankseam.store import rows
from rankseam.store.filters import Filter
from rankseam.store.readers import (
    ImportanceReader,
    LexicalQuery,
    LexicalReader,
    StoreReader,
    VectorReader,
)
from rankseam.store.records import MemoryRows, PreparedRecord, RevisionRow, StoredMemory, WritePlan
from rankseam.store.rows import Forgotten
from rankseam.types import MemoryRef

__all__ = [
    "BatchWriter",
    "BulkReader",
    "BulkWriter",
    "ImportanceReader",
    "LexicalQuery",
    "LexicalReader",
    "Store",
    "StoreReader",
    "VectorReader",
    "Vectors",
]


@runtime_checkable
class BulkReader(Protocol):
    """The whole store in one read transaction: what a snapshot export reads."""

    def spaces(self) -> list[rows.SpaceRow]:
        """Every registered embedder space, sorted by key."""
        ...

    def vectors_outside(self, spaces: Sequence[str], /) -> int:
        """How many stored vectors belong to none of ``spaces``."""
        ...

    def write_order(self) -> rows.WriteOrder:
        """The row key of every revision in write order and the number of revisions."""
        ...

    def revisions(self, spaces: Sequence[str], /) -> Iterator[rows.BulkRevision]:
        """Every revision of every memory, ordered by (namespace, memory id, revision), with
        one vector per space of ``spaces`` (little-endian float32 bytes, or None)."""
        ...


@runtime_checkable
class BulkWriter(Protocol):
    """Bulk rows written in ONE write transaction (what a snapshot import writes): all or
    nothing. The store commits it when the ``bulk_write()`` block ends without an exception
    (and makes searches of every namespace written to see the change)."""

    @property
    def revisions_written(self) -> int:
        """Revisions written so far."""
        ...

    @property
    def vectors_written(self) -> int:
        """Vectors written so far."""
        ...

    def counts(self) -> rows.StoreCounts:
        """How many memories and revisions the store holds now."""
        ...

    def register_space(self, descriptor: EmbedderDescriptor, /) -> None:
        """Record an embedder space (a known key is left alone)."""
        ...

    def insert(self, memory: MemoryRows, /) -> None:
        """Insert a memory the store does not hold, with its whole history and tombstone. Each
        revision's row key is its ``seq`` (so a clone keeps the source's write order); its
        head is live unless the memory is deleted."""
        ...

    def head(self, namespace: str, memory_id: str, /) -> rows.MemoryHead | None:
        """A memory's head, or None when the store does not hold it."""
        ...

    def history(self, namespace: str, memory_id: str, upto: int, /) -> list[rows.RevisionDigest]:
        """Revisions ``1..upto`` of a memory, oldest first."""
        ...

    def retire(self, key: int, /) -> None:
        """Take the revision ``key`` out of search (it stays readable by its ref)."""
        ...

    def append(self, memory: MemoryRows, revisions: Sequence[RevisionRow], /) -> None:
        """Add ``revisions`` (the newest part of ``memory``'s history) under fresh row keys
        and set the memory's head and tombstone to ``memory``'s."""
        ...


@runtime_checkable
class BatchWriter(Protocol):
    """The writes of one batch (``Store.batch``). The host reads the heads of the batch's
    memories, plans each record over its memory's head (``plan_write``) and applies the plans
    here, in input order (an id may occur several times)."""

    def heads(self, keys: Sequence[rows.MemoryKey], /) -> Sequence[rows.MemoryHead]:
        """The current head of every memory of ``keys`` (distinct) the store holds, read
        together (an unknown memory has none)."""
        ...

    def retire(self, namespace: str, key: int, /) -> None:
        """Take the live revision ``key`` of ``namespace`` out of search (written before or
        earlier in this batch; it stays readable by its ref)."""
        ...

    def write(
        self,
        record: PreparedRecord,
        plan: WritePlan,
        /,
        *,
        space: str | None,
        vector: np.ndarray | None,
    ) -> int:
        """Write revision ``plan.revision`` of ``record`` (with ``plan.importance`` and
        ``plan.metadata``, and ``vector`` in ``space`` when both are given) as its memory's
        live head, not deleted; its new row key."""
        ...

    def tombstone(self, namespace: str, memory_id: str, /) -> None:
        """Mark the memory deleted, now (its live head was retired in this transaction)."""
        ...


@runtime_checkable
class Store(Protocol):
    """A memory store: namespaces, immutable revisions, tombstones, embedder spaces, a read
    snapshot for search, bulk reads and writes for snapshots. See the module docstring."""

    @property
    def kind(self) -> str:
        """The name the store backend is registered under (``"sqlite"``, ``"postgres"``)."""
        ...

    @property
    def location(self) -> str:
        """Where the store is, safe to show (no password): a path or a redacted URL."""
        ...

    @property
    def tokenizer(self) -> str:
        """The store's lexical analysis (SQLite: the FTS5 tokenizer, e.g. ``"porter"``). A
        snapshot records it; importing into a store of the same kind with another one is
        refused (lexical scores would differ)."""
        ...

    @property
    def schema_version(self) -> int:
        """The version of the store's schema (snapshots record it)."""
        ...

    def close(self) -> None:
        """Release connections and threads; the store is unusable afterwards."""
        ...

    # -- embedder spaces -------------------------------------------------------------------

    def register_space(self, descriptor: EmbedderDescriptor, /) -> None:
        """Record an embedder space (``descriptor.key``; a known key is left alone)."""
        ...

    # -- writes: each is ONE transaction, planned by the host ------------------------------

    def batch(self, namespaces: Sequence[str], /) -> AbstractContextManager[BatchWriter]:
        """ONE write transaction for a batch of records of ``namespaces`` (an add, an
        update, a delete or an ingest batch; the host plans every record,
        :mod:`rankseam.writing.plan`): all
        or nothing, committed when the block ends without an exception, after which searches
        of every namespace written to see the change. A process killed during it leaves the
        batch wholly written or not at all."""
        ...

    def put_vectors(self, items: Sequence[rows.VectorItem], /, *, space: str) -> None:
        """Store each item's vector for its revision in ``space`` (replacing one the revision
        had in that space), in one transaction."""
        ...

    def forget(self, namespace: str, memory_ids: Sequence[str], /) -> Forgotten:
        """Hard-delete the memories ``memory_ids`` of ``namespace`` (tombstoned ones too), in
        ONE write transaction: every revision's row, text, metadata and vectors, and their
        entries in every index the store keeps (full text, metadata values, vector caches
        and ANN indexes: no search, read or later snapshot can find them again), leaving
        only each id and the time (``get``, ``get_ref`` and ``history`` of it then raise
        :meth:`~rankseam.plugin.stores.MemoryNotFoundError.forgotten`). Ids the store does
        not hold are skipped. Searches of ``namespace`` see the change when it commits. A
        later write of a forgotten id stores a new memory from revision 1."""
        ...

    def reset(self, namespace: str, /) -> Forgotten:
        """:meth:`forget` every memory of ``namespace`` (the host asks its user to confirm
        first)."""
        ...

    # -- reads -----------------------------------------------------------------------------

    def history(self, namespace: str, memory_id: str, /) -> list[StoredMemory]:
        """Every revision of a memory, oldest first, each with the memory's ``deleted``
        (tombstone) state; :class:`~rankseam.plugin.stores.MemoryNotFoundError` when the id
        is unknown (``no_memory``) or was forgotten (``forgotten``)."""
        ...

    def iter_missing_vectors(
        self, space: str, /, *, page: int = 500
    ) -> Iterator[list[rows.PendingText]]:
        """Pages (at most ``page`` long, key order) of live revisions that have no vector in
        ``space``; nothing is held open between pages."""
        ...

    def get(self, namespace: str, memory_id: str, /) -> StoredMemory:
        """A memory's head revision (``deleted`` set when it is tombstoned);
        :class:`~rankseam.plugin.stores.MemoryNotFoundError` when the id is unknown, or
        ``MemoryNotFoundError.forgotten`` when it was forgotten."""
        ...

    def get_ref(self, ref: MemoryRef, /) -> StoredMemory:
        """Exactly the revision ``ref`` cites (``deleted``: the memory is tombstoned);
        :class:`~rankseam.plugin.stores.MemoryNotFoundError` when there is no such revision."""
        ...

    def iter_memories(
        self, namespace: str, /, *, include_deleted: bool = False, where: Filter | None = None
    ) -> Iterator[StoredMemory]:
        """The live heads of ``namespace`` (with tombstoned heads too when
        ``include_deleted``), in write order, streamed page by page; with ``where`` (never
        given with ``include_deleted``), the live heads that pass the filter, in the store's
        own query (``rankseam.plugin.stores.matches`` is what it means)."""
        ...

    def namespaces(self) -> list[str]:
        """Every namespace that holds a memory, sorted."""
        ...

    def stats(self) -> dict[str, Any]:
        """At least ``namespaces`` (``{name: {"memories", "deleted", "revisions"}}``),
        ``memories`` (live memories in all namespaces) and ``vectors_by_space`` (``{space
        key: vectors of live revisions}``); anything else the store wants to show (no
        secrets)."""
        ...

    def read(self) -> AbstractContextManager[StoreReader]:
        """One short read transaction: a consistent snapshot in which a search's candidate
        sources run and its pool is read. Held only while the coarse pool is built, never
        while a reranker runs; writers are not blocked by it."""
        ...

    def vectors_of(self, keys: Sequence[int | None], descriptor: EmbedderDescriptor, /) -> Vectors:
        """The stored vectors of revisions ``keys`` in ``descriptor``'s space (None for a key
        that is None or has no vector there), read together (what a reranker that asks for
        embeddings gets). Use ``decode_vectors`` on the stored bytes."""
        ...

    def maintain_index(
        self, namespace: str, descriptor: EmbedderDescriptor, /, *, force: bool = False
    ) -> Any:
        """Bring the vector index of ``namespace`` × ``descriptor``'s space up to date now
        (``Memory.maintain_index``); a description of the index, or None when the store has
        nothing to do (a server that maintains its index itself answers None)."""
        ...

    # -- snapshots -------------------------------------------------------------------------

    def bulk_read(self) -> AbstractContextManager[BulkReader]:
        """The whole store in one read transaction (what an export reads); writers carry on."""
        ...

    def bulk_write(self) -> AbstractContextManager[BulkWriter]:
        """One write transaction for bulk rows (what an import writes): all or nothing."""
        ...
