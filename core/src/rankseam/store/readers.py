"""What a store's read snapshot offers: the reader protocols (docs/writing-plugins.md, "Writing a
store").

The host's candidate sources (:mod:`rankseam.retrieval`: lexical, vector, importance) run on
every store through these methods, and only these. The host owns each channel's rules: which
query terms are searched (the posting budgets), how a channel's scores are scaled and weighed
in fusion. A store owns the fast way to compute an answer (BM25 in its own SQL, a vector index)
and how its text is analysed (tokenizer, stemmer); it never decides a scale or a weight.

Every method answers for the one read snapshot the reader is bound to; a row key is a revision
of that snapshot (see :mod:`rankseam.store.contract` for the words used).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Protocol, overload, runtime_checkable

import attrs
import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.store.filters import Filter
from rankseam.store.records import StoredMemory
from rankseam.store.rows import Neighbours
from rankseam.types import MemoryRef, prechecked

__all__ = [
    "ConcurrentReader",
    "Identities",
    "ImportanceReader",
    "LexicalQuery",
    "LexicalReader",
    "NeighbourReader",
    "Neighbours",
    "ScoredKey",
    "ScoredKeys",
    "StoreReader",
    "VectorReader",
]


#: ``(row_key, score)``: a revision of the store's snapshot and a channel's score for it.
ScoredKey = tuple[int, float]


def _keys(value: object) -> np.ndarray:
    return np.asarray(value, dtype=np.int64).reshape(-1)


def _scores(value: object) -> np.ndarray:
    return np.asarray(value, dtype=np.float64).reshape(-1)


@attrs.frozen(eq=False)
class ScoredKeys(Sequence[ScoredKey]):
    """A channel's answer from a reader: ``row_keys`` (int64) and their ``scores`` (float64),
    best first, ties by key. It is a sequence of ``(key, score)`` pairs (indexing, iteration,
    ``len()``) for code that wants pairs; the host's fusion reads the two arrays directly.

    Build it from arrays (``ScoredKeys(row_keys, scores)``), from pairs (:meth:`of`) or empty
    (:meth:`empty`)."""

    row_keys: np.ndarray = attrs.field(converter=_keys)
    scores: np.ndarray = attrs.field(converter=_scores)

    def __attrs_post_init__(self) -> None:
        if self.row_keys.shape != self.scores.shape:
            raise ValueError(
                f"ScoredKeys needs one score per key: got {self.row_keys.size} keys and "
                f"{self.scores.size} scores"
            )

    @classmethod
    def of(cls, pairs: Iterable[tuple[int, float]]) -> ScoredKeys:
        """The answer of ``(key, score)`` pairs (already best first), e.g. a query's rows."""
        rows = pairs if isinstance(pairs, list | tuple) else list(pairs)
        if not rows:
            return cls.empty()
        return cls([row[0] for row in rows], [row[1] for row in rows])

    @classmethod
    def empty(cls) -> ScoredKeys:
        """The answer without any key (one shared instance: it holds nothing to change)."""
        if cls is ScoredKeys:
            return _EMPTY
        return cls(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64))

    def pairs(self) -> list[ScoredKey]:
        """The answer as ``(key, score)`` pairs, best first."""
        return list(zip(self.row_keys.tolist(), self.scores.tolist(), strict=True))

    def __len__(self) -> int:
        return int(self.row_keys.shape[0])

    def __iter__(self) -> Iterator[ScoredKey]:
        return iter(self.pairs())

    @overload
    def __getitem__(self, index: int) -> ScoredKey: ...

    @overload
    def __getitem__(self, index: slice) -> ScoredKeys: ...

    def __getitem__(self, index: int | slice) -> ScoredKey | ScoredKeys:
        if isinstance(index, slice):
            return ScoredKeys(self.row_keys[index], self.scores[index])
        return (int(self.row_keys[index]), float(self.scores[index]))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ScoredKeys):
            return bool(
                np.array_equal(self.row_keys, other.row_keys)
                and np.array_equal(self.scores, other.scores, equal_nan=True)
            )
        if isinstance(other, list | tuple):
            return self.pairs() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ScoredKeys({self.pairs()!r})"


def _frozen_empty(dtype: type) -> np.ndarray:
    array: np.ndarray = np.zeros(0, dtype=dtype)
    array.flags.writeable = False
    return array


_EMPTY = ScoredKeys(_frozen_empty(np.int64), _frozen_empty(np.float64))


def _terms(value: Sequence[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class LexicalQuery:
    """One lexical search, as the host's lexical channel decided it (the store only runs it).

    ``terms`` are plain query words (``rankseam.plugin.channels.query_terms``: lower-cased,
    no syntax); a live revision of ``namespace`` that holds any of them, as the store's text
    analysis matches words, is **found**. ``scoring`` are further (frequent) words that only
    **score**: each adds its BM25 to the revisions ``terms`` found, exactly what it would add
    if it were one of ``terms``, but a revision holding only scoring words is not found. With
    ``require_scoring`` a revision must also hold one of ``scoring`` to be found.

    The answer is the best ``k`` ``(key, bm25)`` (higher is better, non-negative), ties by key:
    Okapi BM25 (``k1 = 1.2``, ``b = 0.75``) summed over the query's words.

    ``where`` (a checked filter, ``rankseam.plugin.stores.Filter``) restricts what is found
    to the revisions that pass it, inside the store's own query; the statistics BM25 uses
    stay those of every revision :meth:`LexicalReader.live_count` counts, so a filter never
    changes a revision's score.
    """

    namespace: str
    k: int
    terms: tuple[str, ...] = attrs.field(converter=_terms)
    scoring: tuple[str, ...] = attrs.field(default=(), converter=_terms)
    require_scoring: bool = False
    where: Filter | None = None


@runtime_checkable
class LexicalReader(Protocol):
    """What the host's lexical channel uses of a reader."""

    def live_count(self, namespace: str, /) -> int:
        """The number of live revisions that the store's lexical statistics (document
        frequencies, BM25's ``N``) count over for a search of ``namespace``: the namespace's
        live revisions, or every live revision of the store when its text index is shared by
        all namespaces (the SQLite store)."""
        ...

    def document_frequency(self, namespace: str, term: str, cap: int, /) -> int:
        """How many of the revisions :meth:`live_count` counts hold the query word ``term``
        (as the store's text analysis matches it), counted up to ``cap`` (the answer is at
        most ``cap``; counting may stop there)."""
        ...

    def lexical(self, query: LexicalQuery, /) -> ScoredKeys:
        """Run ``query`` (see :class:`LexicalQuery`): the best ``query.k`` ``(key, bm25)``
        as :class:`ScoredKeys`."""
        ...


@runtime_checkable
class VectorReader(Protocol):
    """What the host's vector channel uses of a reader."""

    def vector(
        self,
        namespace: str,
        descriptor: EmbedderDescriptor,
        query: np.ndarray,
        k: int,
        /,
        *,
        exact: bool = False,
        where: Filter | None = None,
    ) -> ScoredKeys:
        """Cosine similarity between ``query`` and the live vectors of ``namespace`` in
        ``descriptor``'s space only (of the revisions that pass ``where``, when given: the
        best ``k`` of those, never the best ``k`` filtered afterwards): the best ``k``
        ``(key, cosine)`` as :class:`ScoredKeys`, ties by key. The host
        hands ``query`` as float32 of the space's dimensions, divided by its norm unless the
        space is L2-normalised (``rankseam.search.channels.vector.unit_query``). An L2-normalised
        space may score the inner product (its cosine); a zero vector scores 0.
        A store may propose candidates through an approximate index; ``exact=True`` compares
        every vector. Scores are computed from the stored vectors either way."""
        ...


@runtime_checkable
class ImportanceReader(Protocol):
    """What the host's importance prior uses of a reader."""

    def importance(self, keys: Sequence[int], /) -> Mapping[int, float]:
        """The stored importance of each revision among ``keys`` that exists."""
        ...

    def top_importance(self, namespace: str, k: int, /) -> ScoredKeys:
        """The ``k`` live revisions of ``namespace`` with the highest importance,
        ``(key, importance)`` as :class:`ScoredKeys`, best first, ties by key."""
        ...


@runtime_checkable
class StoreReader(LexicalReader, VectorReader, ImportanceReader, Protocol):
    """One consistent read snapshot of a store, held for a short time (one search's coarse
    pool); candidate sources receive it as ``SourceRequest.reader``. It is the whole read
    contract: the host's channels (:class:`LexicalReader`, :class:`VectorReader`,
    :class:`ImportanceReader`) and the methods that turn row keys into revisions."""

    def identities(self, keys: Sequence[int], /) -> Mapping[int, MemoryRef]:
        """The ref of each key among ``keys`` that is a *live* revision in this snapshot; a
        key that is retired, tombstoned or unknown is left out (so no source can bring back
        a revision that is not live)."""
        ...

    def memories(self, keys: Sequence[int], /) -> Mapping[int, StoredMemory]:
        """The revisions ``keys`` exactly as stored (text, importance, metadata, created_at,
        content hash of that revision), read in this snapshot."""
        ...

    def resolve(self, ref: MemoryRef, /) -> int | None:
        """The row key of the revision ``ref`` cites, or None when the store has no such
        revision (for sources that know memories by ref)."""
        ...


@runtime_checkable
class NeighbourReader(Protocol):
    """A reader that knows threads (optional beyond :class:`StoreReader`; both built-in
    stores offer it): the neighbours of memories in their conversation. A channel that reads
    them declares ``reads = (NeighbourReader,)``; the host uses it for the neighbours it
    offers rerankers (docs/seam.md, "Neighbours").

    A thread's order is by ``position``, then by row key; every live revision of a thread
    has a position (the host places one without it at its ``created_at``)."""

    def neighbours(
        self, keys: Sequence[int], before: int, after: int, /
    ) -> Mapping[int, Neighbours]:
        """For each key among ``keys`` that is a live revision of this snapshot with a
        thread: up to ``before`` live revisions of its namespace and thread just before it
        and up to ``after`` just after it, as :class:`~rankseam.store.rows.Neighbours` (row
        keys in thread order; the key itself is in neither). A key that is not live, or has
        no thread, is left out. Each lookup is an index range, never a scan of the thread."""
        ...


@runtime_checkable
class ConcurrentReader(Protocol):
    """A reader that can lend its snapshot to other threads (optional; a server store offers
    it). The host's search then runs its admitting channels (lexical, vector) at the same
    time, each on a reader of the one snapshot: on a server, each on a connection of its own,
    so their statements run side by side. A store whose reader lacks :meth:`siblings` gets its
    channels called one after another."""

    def siblings(self, n: int, /) -> AbstractContextManager[Sequence[StoreReader]]:
        """``n`` more readers of this reader's snapshot (they answer exactly as this one
        does), each used from one other thread while this reader is used from its own;
        released when the context exits, which the host does only after every call on them
        returned."""
        ...


class Identities(Mapping[int, MemoryRef]):
    """What ``identities(keys)`` answers, built from the rows a store read: row key ->
    ``(namespace, memory_id, revision, ...)`` (columns past the third are ignored). Each
    :class:`MemoryRef` is built when first read, without validating again what the store
    holds (a search reads few of them: membership decides which keys fuse, a ref only breaks
    a tie)."""

    __slots__ = ("_facts", "_refs")

    def __init__(self, facts: Mapping[int, Sequence[object]]) -> None:
        self._facts = facts
        self._refs: dict[int, MemoryRef] = {}

    def subset(self, keys: Iterable[int]) -> Identities:
        """The identities of those of ``keys`` this mapping holds."""
        facts = self._facts
        return Identities({key: facts[key] for key in keys if key in facts})

    def __getitem__(self, key: int) -> MemoryRef:
        ref = self._refs.get(key)
        if ref is None:
            namespace, memory_id, revision = self._facts[key][:3]
            ref = self._refs[key] = prechecked(MemoryRef, namespace, memory_id, revision)
        return ref

    def __contains__(self, key: object) -> bool:
        return key in self._facts

    def __iter__(self) -> Iterator[int]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)
