"""The candidate views the seam hands a reranker: a lazy read-only sequence plus the pool as
arrays (``scores()``, ``embeddings()``), and the store's one-matrix vector decode."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

import rankseam
from rankseam import Candidate, RerankDecision
from rankseam.errors import ValidationError
from rankseam.seam import CandidateViews, make_candidates, rerank_pool
from rankseam.sqlite.vector_cache import decode_vectors, encode_vector
from rankseam.testing import synthetic_pool

HITS, VECTORS = synthetic_pool(6, dims=8)


def by_hand(hits: Any, vectors: Any, space: str | None, max_chars: int = 2000) -> list[Candidate]:
    """The views as a reader of the docs would build them, one ``Candidate`` each."""
    return [
        Candidate(
            rank=i + 1,
            ref=h.ref,
            text=h.text[:max_chars],
            score=h.score,
            importance=h.importance,
            matched_by=h.matched_by,
            channel_scores=h.channel_scores,
            embedding=None if vectors is None else vectors[i],
            embedding_space=space if vectors is not None and vectors[i] is not None else None,
        )
        for i, h in enumerate(hits)
    ]


def test_views_are_the_candidates_in_coarse_order() -> None:
    views = make_candidates(HITS, vectors=VECTORS, embedding_space="s", max_chars=10)
    assert isinstance(views, CandidateViews)
    expected = by_hand(HITS, VECTORS, "s", max_chars=10)
    assert len(views) == 6
    assert list(views) == expected
    assert views == tuple(expected)
    assert views[-1] == expected[-1] and views[1:3] == tuple(expected[1:3])
    assert [c.rank for c in views] == [1, 2, 3, 4, 5, 6]
    assert all(len(c.text) <= 10 for c in views)
    for c, v in zip(views, VECTORS, strict=True):
        assert np.array_equal(c.embedding, v)
    assert views[0] is views[0]  # built once, then the same view
    with pytest.raises(IndexError, match="out of range for a pool of 6"):
        views[6]
    assert "6 candidates" in repr(views)


def test_without_vectors_every_embedding_is_none() -> None:
    views = make_candidates(HITS)
    assert all(c.embedding is None and c.embedding_space is None for c in views)
    assert views.embeddings() is None


def test_scores_are_the_coarse_scores_read_only() -> None:
    views = make_candidates(HITS)
    scores = views.scores()
    assert scores.dtype == np.float64
    assert scores.tolist() == [h.score for h in HITS]
    with pytest.raises(ValueError, match="read-only"):
        scores[0] = 9.0


def test_embeddings_matrix_matches_the_views_and_is_read_only() -> None:
    views = make_candidates(HITS, vectors=VECTORS, embedding_space="s")
    matrix = views.embeddings()
    assert matrix is not None and matrix.shape == (6, 8) and matrix.dtype == np.float32
    for i, c in enumerate(views):
        assert np.array_equal(matrix[i], c.embedding)
    with pytest.raises(ValueError, match="read-only"):
        matrix[0, 0] = 1.0
    assert views.embeddings() is matrix


@pytest.mark.parametrize(
    "vectors",
    [
        [*VECTORS[:5], None],  # one missing
        [*VECTORS[:5], np.ones(4, dtype=np.float32)],  # another dimension
    ],
)
def test_no_matrix_unless_every_candidate_has_one_of_one_dimension(vectors: Any) -> None:
    views = make_candidates(HITS, vectors=vectors, embedding_space="s")
    assert views.embeddings() is None
    assert views[5].embedding is None or views[5].embedding.shape == (4,)
    assert views[5].embedding_space == (None if vectors[5] is None else "s")


def test_a_matrix_from_the_caller_is_copied_and_isolated() -> None:
    mine = np.array(VECTORS, dtype=np.float64)  # writeable, another dtype
    views = make_candidates(HITS, vectors=mine, embedding_space="s")
    before = views.embeddings().copy()  # type: ignore[union-attr]
    mine[:] = 0.0  # the caller changes its own array afterwards
    assert np.array_equal(views.embeddings(), before)  # type: ignore[arg-type]
    assert np.array_equal(views[2].embedding, before[2])
    assert not views[2].embedding.flags.writeable  # type: ignore[union-attr]


def test_a_read_only_float32_vector_is_shared_a_writeable_one_copied() -> None:
    shared = np.arange(8, dtype=np.float32)
    shared.setflags(write=False)
    writeable = np.arange(8, dtype=np.float32)
    views = make_candidates(HITS[:2], vectors=[shared, writeable])
    assert views[0].embedding is shared
    assert views[1].embedding is not writeable and not views[1].embedding.flags.writeable
    writeable[0] = 42.0
    assert views[1].embedding[0] == 0.0


def test_a_fetcher_answering_the_wrong_number_of_vectors_is_refused() -> None:
    with pytest.raises(ValidationError, match="5 vectors for a pool of 6 hits"):
        make_candidates(HITS, vectors=VECTORS[:5])


def test_decode_vectors_one_read_only_matrix_or_rows_with_none() -> None:
    rows = [np.full(4, i, dtype=np.float32) for i in range(3)]
    blobs = [encode_vector(r) for r in rows]
    whole = decode_vectors(blobs, 4)
    assert isinstance(whole, np.ndarray) and whole.shape == (3, 4)
    assert whole.dtype == np.float32 and not whole.flags.writeable
    assert np.array_equal(whole, np.stack(rows))
    partial = decode_vectors([blobs[0], None, b"\x00" * 12, blobs[2]], 4)
    assert isinstance(partial, list) and len(partial) == 4
    assert partial[1] is None and partial[2] is None  # missing, and the wrong size
    assert np.array_equal(partial[0], rows[0]) and np.array_equal(partial[3], rows[2])
    assert not partial[3].flags.writeable  # type: ignore[union-attr]
    assert decode_vectors([None, None], 4) == [None, None]
    assert decode_vectors([], 4) == []


class ArrayReader:
    """A vectorised reranker: reverses the pool using only the arrays of the views."""

    policy_id = "test.array-reader.v1"
    needs_embeddings = True

    def __init__(self) -> None:
        self.seen: list[tuple[Any, Any]] = []

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        self.seen.append((candidates.embeddings(), candidates.scores()))
        order = np.argsort(candidates.scores(), kind="stable")  # lowest coarse score first
        return RerankDecision(tuple(int(i) + 1 for i in order[:limit]))


def test_through_memory_search_the_pool_arrives_as_arrays(tmp_path: Any) -> None:
    memory = rankseam.open_memory(tmp_path / "m.db")
    try:
        memory.ingest(
            [
                {"id": "tea", "text": "green tea in the morning"},
                {"id": "tea2", "text": "Ada drinks green tea"},
                {"id": "run", "text": "a morning run by the river"},
            ]
        )
        reader = ArrayReader()
        result = memory.search("green tea morning", 2, reranker=reader, pool=3)
        matrix, scores = reader.seen[0]
        coarse = result.trace.coarse
        assert matrix.shape == (len(coarse), memory.embedder.descriptor.dimensions)
        assert not matrix.flags.writeable
        assert np.allclose(scores, [c.score for c in coarse])
        stored = [memory.get(c.ref) for c in coarse]
        embedded = memory.embedder.embed([m.text for m in stored])
        assert np.allclose(matrix, np.asarray(embedded, dtype=np.float32), atol=1e-6)
        assert [h.ref for h in result] == [coarse[-1].ref, coarse[-2].ref]
    finally:
        memory.close()


def test_a_vectorised_reranker_through_the_seam() -> None:
    out, trace = asyncio.run(
        rerank_pool("q", HITS, 2, ArrayReader(), fetch_vectors=lambda refs: VECTORS)
    )
    # the last two candidates tie on the lowest score: the stable sort keeps coarse order
    assert trace is not None and trace.selected_ranks == (5, 6)
    assert [h.ref for h in out] == [HITS[4].ref, HITS[5].ref]
