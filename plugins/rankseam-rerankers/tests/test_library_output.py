"""Whatever the library answers goes through the seam's rules: missing documents, repeated or
foreign ids, NaN scores, a wrong answer type and exceptions. The misbehaving rankers are real
subclasses of the library's ``BaseRanker`` (its extension point), run through the real seam."""

from __future__ import annotations

import math
from typing import Any

import pytest
from rerankers.documents import Document
from rerankers.models.ranker import BaseRanker
from rerankers.results import RankedResults, Result

from rankseam.errors import RerankError
from rankseam.testing import run_reranker, synthetic_pool
from rankseam.types import RerankStatus
from rankseam_rerankers import RerankersOptions, RerankersReranker
from rankseam_rerankers.library import LoadedRanker

POOL, _ = synthetic_pool(6)


class Scripted(BaseRanker):
    """Answers ``(doc_id, score)`` pairs in the given order, or raises."""

    def __init__(self, answer: Any = (), *, raises: Exception | None = None) -> None:
        self.answer = answer
        self.raises = raises

    def score(self, query: str, doc: str) -> float:
        return 0.0

    def rank(self, query: str, docs: Any, doc_ids: Any = None) -> Any:
        if self.raises is not None:
            raise self.raises
        if not isinstance(self.answer, tuple):
            return self.answer
        by_id = {i: Document(text, doc_id=i) for i, text in zip(doc_ids, docs, strict=True)}
        results = [
            Result(by_id.get(doc_id) or Document("foreign", doc_id=doc_id), score=s, rank=n + 1)
            for n, (doc_id, s) in enumerate(self.answer)
        ]
        return RankedResults(results=results, query=query, has_scores=True)


def run(ranker: BaseRanker, limit: int = 3, **kw: Any) -> Any:
    reranker = RerankersReranker(
        RerankersOptions.from_mapping({"model": "scripted"}),
        loaded=LoadedRanker(ranker, "test"),
    )
    result = run_reranker(reranker, "q", POOL, limit, **kw)
    return result.hits, result.trace


ALL = tuple((i, 0.5 + i / 10) for i in (5, 4, 3, 2, 1, 0))


def test_a_well_behaved_answer_keeps_order_and_scores() -> None:
    hits, trace = run(Scripted(ALL))
    assert trace.status is RerankStatus.OK and trace.selected_ranks == (6, 5, 4)
    assert trace.scores == (1.0, 0.9, 0.8)
    assert [h.rerank_score for h in hits] == [1.0, 0.9, 0.8]


def test_missing_documents_are_counted_and_marked_repaired() -> None:
    hits, trace = run(Scripted(ALL[:2]))  # the library dropped four of six documents
    assert trace.status is RerankStatus.REPAIRED
    assert trace.discarded_rank_count == 4
    assert "4 of them counted by the reranker" in (trace.reason or "")
    assert trace.selected_ranks == (6, 5) and len(hits) == 2


def test_a_nan_score_discards_its_rank() -> None:
    answer = ((5, 1.0), (4, math.nan), (3, 0.8), (2, 0.7), (1, 0.6), (0, 0.5))
    hits, trace = run(Scripted(answer))
    assert trace.status is RerankStatus.REPAIRED and trace.discarded_rank_count == 1
    assert trace.selected_ranks == (6, 4) and trace.scores == (1.0, 0.8)
    assert all(h.rerank_score is not None and math.isfinite(h.rerank_score) for h in hits)


def test_every_score_nan_falls_back_to_the_coarse_order_without_scores() -> None:
    hits, trace = run(Scripted(tuple((i, math.nan) for i in range(6))))
    assert trace.status is RerankStatus.FELL_BACK and trace.used_fallback
    assert hits == POOL[:3] and trace.scores is None
    assert all(h.rerank_score is None for h in hits)


def test_a_repeated_document_and_a_foreign_id_are_discarded() -> None:
    answer = ((5, 1.0), (5, 0.95), ("zz", 0.9), (99, 0.85), (4, 0.8), (3, 0.7))
    _, trace = run(Scripted(answer), limit=6)
    assert trace.selected_ranks == (6, 5, 4)
    assert trace.scores == (1.0, 0.8, 0.7)
    # seam: the repeat, "zz" and 99 (rank 100); plugin: documents 0, 1, 2 never named
    assert trace.discarded_rank_count == 3 + 3
    assert trace.status is RerankStatus.REPAIRED


@pytest.mark.parametrize(
    "error", [RuntimeError("CUDA out of memory"), ValueError("bad input"), KeyError("index")]
)
def test_a_library_exception_fails_closed_or_degrades(error: Exception) -> None:
    with pytest.raises(RerankError) as info:
        run(Scripted(raises=error))
    assert info.value.reason == "exception"
    assert info.value.__cause__ is error
    hits, trace = run(Scripted(raises=error), on_error="coarse")
    assert trace.status is RerankStatus.DEGRADED and hits == POOL[:3]
    assert trace.scores is None and all(h.rerank_score is None for h in hits)


def test_an_answer_that_is_not_ranked_results_is_invalid_output() -> None:
    with pytest.raises(RerankError) as info:
        run(Scripted(None))
    assert info.value.reason == "invalid_output"
