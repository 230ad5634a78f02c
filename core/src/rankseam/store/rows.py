"""The typed rows of the store contract: what store methods take and answer besides records
(:mod:`rankseam.store.records`). No store method takes or returns a positional tuple."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from rankseam.types import MemoryRef, frozen_mapping, to_bool, to_float, to_int

__all__ = [
    "Added",
    "BulkRevision",
    "Forgotten",
    "MemoryHead",
    "MemoryKey",
    "Neighbours",
    "PendingText",
    "RevisionDigest",
    "SpaceRow",
    "StoreCounts",
    "VectorItem",
    "WriteOrder",
]


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


@attrs.frozen
class MemoryKey:
    """A memory's identity: ``namespace`` and ``memory_id``."""

    namespace: str
    memory_id: str


@attrs.frozen
class MemoryHead:
    """A memory's current head as a write sees it: ``key`` and ``revision`` of the head,
    ``deleted`` (tombstoned), and the head's ``content_hash``, ``importance``, ``metadata``
    (canonical JSON), ``thread``, ``position`` and ``derived_from``. A store builds one from a
    row of its head query (:attr:`COLUMNS`) with :meth:`from_row`."""

    #: The columns of a memory ``m`` joined to its head revision ``r`` that make a head, in
    #: field order.
    COLUMNS: ClassVar[str] = (
        "m.namespace, m.memory_id, m.head_rid, m.head_revision, m.deleted, r.content_hash, "
        "r.importance, r.metadata, r.thread, r.position, r.derived_from"
    )

    namespace: str
    memory_id: str
    key: int
    revision: int
    deleted: bool
    content_hash: str
    importance: float
    metadata: str
    thread: str | None = None
    position: float | None = None
    derived_from: str | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> MemoryHead:
        """A head from a row of :attr:`COLUMNS` (whatever types the driver answers with)."""
        (
            namespace,
            memory_id,
            key,
            revision,
            deleted,
            content_hash,
            importance,
            metadata,
            thread,
            position,
            derived_from,
        ) = row
        return cls(
            namespace,
            memory_id,
            int(key),
            int(revision),
            bool(deleted),
            content_hash,
            float(importance),
            metadata,
            thread,
            None if position is None else float(position),
            derived_from,
        )

    def structure(self) -> tuple[str | None, float | None, str | None]:
        """The head's ``(thread, position, derived_from)``."""
        return (self.thread, self.position, self.derived_from)


@attrs.frozen
class Forgotten:
    """What a hard delete (``Store.forget``, ``Store.reset``) removed from ``namespace``:
    ``memories`` memories with their ``revisions`` revisions (text, metadata, vectors and
    index entries), at ``forgotten_at`` (POSIX seconds). What it leaves behind is each
    memory's id and that time (docs/store.md, "Forgetting")."""

    namespace: str
    memories: int = attrs.field(validator=attrs.validators.ge(0))
    revisions: int = attrs.field(validator=attrs.validators.ge(0))
    forgotten_at: float

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Added:
    """What ``Store.add`` did: the memory's ``ref`` and whether a revision was ``written``
    (False: the id already held exactly this memory)."""

    ref: MemoryRef
    written: bool


@attrs.frozen
class VectorItem:
    """A vector for the revision ``key`` of ``namespace`` (``Store.put_vectors``)."""

    key: int
    namespace: str
    vector: np.ndarray = attrs.field(eq=False)


@attrs.frozen
class PendingText:
    """A live revision that has no vector in a space yet (``Store.iter_missing_vectors``)."""

    key: int
    namespace: str
    text: str


@attrs.frozen
class SpaceRow:
    """A registered embedder space: its ``key`` and ``EmbedderDescriptor.to_dict()``."""

    key: str
    descriptor: Mapping[str, Any] = attrs.field(converter=frozen_mapping)


@attrs.frozen
class WriteOrder:
    """The row key of every revision in write order (ascending, an int64 array) and the
    number of revisions; ``keys`` is None when they are exactly ``1..count`` (a revision's
    position in write order is then its key)."""

    keys: np.ndarray | None = attrs.field(eq=False)
    count: int

    @classmethod
    def of(
        cls, count: int, low: int | None, high: int | None, keys: Callable[[], Iterable[int]]
    ) -> WriteOrder:
        """The write order of ``count`` revisions whose keys run from ``low`` to ``high``;
        ``keys()`` (ascending) is read only when they are not exactly ``1..count``."""
        if count == 0 or (low == 1 and high == count):
            return cls(None, int(count))
        return cls(np.fromiter(keys(), dtype=np.int64, count=int(count)), int(count))


@attrs.frozen
class StoreCounts:
    """How many memories and revisions a store holds."""

    memories: int
    revisions: int


@attrs.frozen
class RevisionDigest:
    """What a merge compares of a stored revision: number, content hash, importance,
    metadata (canonical JSON), thread, position and source."""

    revision: int = attrs.field(converter=to_int)
    content_hash: str
    importance: float = attrs.field(converter=to_float)
    metadata: str
    thread: str | None = None
    position: float | None = attrs.field(default=None, converter=_optional_float)
    derived_from: str | None = None


def _int_tuple(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


@attrs.frozen
class Neighbours:
    """The neighbours of one revision in its thread (``NeighbourReader.neighbours``): the row
    keys of the live revisions just ``before`` it and just ``after`` it, each in thread order
    (``before[-1]`` and ``after[0]`` are the nearest). Thread order is by position, then row
    key (docs/store.md, "Threads, positions and sources")."""

    before: tuple[int, ...] = attrs.field(converter=_int_tuple)
    after: tuple[int, ...] = attrs.field(converter=_int_tuple)

    def keys(self) -> tuple[int, ...]:
        """Every neighbour's row key, in thread order."""
        return self.before + self.after


def _vector_tuple(value: Iterable[bytes | None]) -> tuple[bytes | None, ...]:
    return tuple(value)


@attrs.frozen
class BulkRevision:
    """One revision as a snapshot export reads it, with its memory's tombstone and head:
    ``key`` is its row key, ``live`` whether it is searchable, ``thread``, ``position`` and
    ``derived_from`` its structure (docs/store.md), ``vectors`` one entry per space asked for
    (little-endian float32 bytes, or None)."""

    namespace: str
    memory_id: str
    deleted: bool = attrs.field(converter=to_bool)
    deleted_at: float | None
    head_revision: int = attrs.field(converter=to_int)
    key: int = attrs.field(converter=to_int)
    revision: int = attrs.field(converter=to_int)
    text: str
    importance: float
    metadata: str
    created_at: float
    content_hash: str
    live: bool = attrs.field(converter=to_bool)
    thread: str | None
    position: float | None = attrs.field(converter=_optional_float)
    derived_from: str | None
    vectors: tuple[bytes | None, ...] = attrs.field(converter=_vector_tuple)

    #: How many columns of a bulk query come before the vectors.
    WIDTH: ClassVar[int] = 16

    @classmethod
    def from_columns(cls, columns: Sequence[Any], vectors: Iterable[bytes | None]) -> BulkRevision:
        """A revision from a row of a store's bulk query: ``columns`` are the 16 fields
        before ``vectors``, in their order (``namespace`` ... ``live``, ``thread``,
        ``position``, ``derived_from``)."""
        if len(columns) != cls.WIDTH:
            raise ValueError(
                f"a bulk revision has {cls.WIDTH} columns before its vectors, got {columns!r}"
            )
        return cls(*columns, vectors=tuple(vectors))  # type: ignore[misc, arg-type]
