"""The coarse pool as a reranker sees it: read-only candidate views (docs/seam.md,
"Candidate views")."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import overload

import numpy as np

from rankseam.embedding import Vectors
from rankseam.errors import ValidationError
from rankseam.seam.validation import DEFAULT_MAX_CHARS
from rankseam.types import (
    Candidate,
    Hit,
    MemoryRef,
    Neighbour,
    readonly_float32,
    readonly_vector,
)

__all__ = ["CandidateViews", "NeighbourTable", "VectorFetcher", "Vectors", "make_candidates"]

#: The neighbours the host read for a pool, by the ref of the candidate they surround, each
#: tuple in thread order (docs/seam.md, "Neighbours").
NeighbourTable = Mapping[MemoryRef, tuple[Neighbour, ...]]

#: Fetches stored vectors for a batch of identities in one call.
VectorFetcher = Callable[[Sequence[MemoryRef]], Vectors]


def _cut(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars]


class CandidateViews(Sequence[Candidate]):
    """The coarse pool as the seam hands it to a reranker.

    A read-only sequence of :class:`~rankseam.types.Candidate` views in coarse order
    (``views[i].rank == i + 1``, text cut to ``max_chars``); each view is built on first
    access. Vectorised rerankers can read the whole pool as arrays instead, without building
    a view per candidate: :meth:`scores` and :meth:`embeddings`.

    Build one with :func:`make_candidates`. A reranker must still accept any
    ``Sequence[Candidate]`` (a caller may pass a plain tuple), so these methods are a fast
    path, never a requirement.

    A reranker that declares ``needs_neighbours`` also gets each candidate's neighbours in
    its thread: :meth:`neighbours`.
    """

    __slots__ = (
        "_embeddings",
        "_hits",
        "_max_chars",
        "_metadata",
        "_neighbours",
        "_scores",
        "_space",
        "_vectors",
        "_views",
    )

    def __init__(
        self,
        hits: tuple[Hit, ...],
        max_chars: int,
        vectors: tuple[np.ndarray | None, ...] | np.ndarray | None,
        embedding_space: str | None,
        metadata: bool = False,
        neighbours: NeighbourTable | None = None,
    ) -> None:
        self._hits = hits
        self._max_chars = max_chars
        self._vectors = vectors
        self._space = embedding_space
        self._metadata = metadata
        self._neighbours = neighbours
        self._views: list[Candidate | None] = [None] * len(hits)
        self._scores: np.ndarray | None = None
        self._embeddings: np.ndarray | bool | None = False  # False: not computed yet

    def __len__(self) -> int:
        return len(self._hits)

    @overload
    def __getitem__(self, index: int) -> Candidate: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Candidate, ...]: ...

    def __getitem__(self, index: int | slice) -> Candidate | tuple[Candidate, ...]:
        if isinstance(index, slice):
            return tuple(self._view(i) for i in range(len(self._hits))[index])
        n = len(self._hits)
        i = operator.index(index)
        if not -n <= i < n:
            raise IndexError(f"candidate index {index} out of range for a pool of {n}")
        return self._view(i % n)

    def __iter__(self) -> Iterator[Candidate]:
        return (self._view(i) for i in range(len(self._hits)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CandidateViews | tuple):  # equal views, like a tuple of them
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CandidateViews({len(self._hits)} candidates, embedding_space={self._space!r})"

    def _view(self, i: int) -> Candidate:
        view = self._views[i]
        if view is None:
            hit = self._hits[i]
            vec = self._vectors[i] if self._vectors is not None else None
            view = Candidate(
                rank=i + 1,
                ref=hit.ref,
                text=_cut(hit.text, self._max_chars),
                score=hit.score,
                importance=hit.importance,
                matched_by=hit.matched_by,
                channel_scores=hit.channel_scores,
                embedding=vec,
                embedding_space=self._space if vec is not None else None,
                thread=hit.thread,
                position=hit.position,
                derived_from=hit.derived_from,
                metadata=hit.metadata if self._metadata else None,
            )
            self._views[i] = view
        return view

    def neighbours(self, index: int) -> tuple[Neighbour, ...]:
        """The neighbours of ``self[index]`` in its thread, in thread order (each
        :class:`~rankseam.types.Neighbour`'s ``offset`` says where it stands: ``-1`` just
        before, ``1`` just after), read from the search's own snapshot; empty for a memory
        without a thread. Only for a reranker that declares ``needs_neighbours``: otherwise a
        :class:`~rankseam.errors.ValidationError` that says so."""
        if self._neighbours is None:
            raise ValidationError(
                "this pool carries no neighbours: a reranker that reads them declares "
                "needs_neighbours = N (N before and N after each candidate) or (BEFORE, AFTER) "
                "(docs/seam.md, 'Neighbours')"
            )
        n = len(self._hits)
        i = operator.index(index)
        if not -n <= i < n:
            raise IndexError(f"candidate index {index} out of range for a pool of {n}")
        return self._neighbours.get(self._hits[i % n].ref, ())

    def scores(self) -> np.ndarray:
        """The coarse (fused) scores, ``scores()[i] == self[i].score``: read-only float64."""
        if self._scores is None:
            scores = np.fromiter((h.score for h in self._hits), np.float64, len(self._hits))
            scores.setflags(write=False)
            self._scores = scores
        return self._scores

    def embeddings(self) -> np.ndarray | None:
        """The ``n × d`` float32 matrix of the candidates' vectors (read-only; row ``i`` equals
        ``self[i].embedding``) when every candidate has a vector and all have one dimension;
        ``None`` otherwise (no vectors attached, or some missing: read each view's
        ``embedding`` then). All vectors the seam attaches come from one embedding space.
        """
        if self._embeddings is False:
            self._embeddings = _stack(self._vectors)
        return self._embeddings  # type: ignore[return-value]


def _stack(vectors: tuple[np.ndarray | None, ...] | np.ndarray | None) -> np.ndarray | None:
    if isinstance(vectors, np.ndarray):  # already one read-only matrix (make_candidates)
        return vectors if vectors.shape[1] else None
    if not vectors:
        return None
    try:
        dims = set(map(len, vectors))  # type: ignore[arg-type]
    except TypeError:  # a missing vector (None)
        return None
    if len(dims) != 1 or 0 in dims:
        return None
    present: tuple[np.ndarray, ...] = vectors  # type: ignore[assignment]  # no None: len() worked
    matrix: np.ndarray = np.concatenate(present).reshape(len(present), dims.pop())
    matrix.setflags(write=False)
    return matrix


def make_candidates(
    pool: Sequence[Hit],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    vectors: Vectors | None = None,
    embedding_space: str | None = None,
    metadata: bool = False,
    neighbours: NeighbourTable | None = None,
) -> CandidateViews:
    """Build the read-only candidate views for a pool (text cut to ``max_chars``).

    ``vectors``: one per hit (``None`` where a hit has none), or the ``n × d`` matrix of them.
    They become read-only float32; vectors that already are (the store's) are shared, not
    copied. ``metadata``: each view carries its hit's metadata (else ``None``).
    ``neighbours``: what :meth:`CandidateViews.neighbours` answers (None: the pool carries
    none).
    """
    hits = tuple(pool)
    readonly: tuple[np.ndarray | None, ...] | np.ndarray | None = None
    if vectors is not None:
        if len(vectors) != len(hits):
            raise ValidationError(
                f"{len(vectors)} vectors for a pool of {len(hits)} hits; a vector fetcher must "
                "answer one vector (or None) per identity, in order"
            )
        if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
            readonly = readonly_float32(vectors)
        else:
            readonly = tuple(map(readonly_vector, vectors))
    return CandidateViews(hits, max_chars, readonly, embedding_space, metadata, neighbours)
