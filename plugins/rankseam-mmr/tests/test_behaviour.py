"""λ edge cases, missing and incompatible vectors, ties, the pool bound, and the seam."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from rankseam.errors import RerankError, ValidationError
from rankseam.testing import run_reranker
from rankseam.types import Candidate, Hit, MemoryRef, RerankDecision, RerankStatus
from rankseam_mmr import MAX_CANDIDATES, MMROptions, MMRReranker

X = [1.0, 0.0, 0.0]
Y = [0.0, 1.0, 0.0]
Z = [0.0, 0.0, 1.0]


def _cands(
    vectors: Sequence[Sequence[float] | None],
    scores: Sequence[float] | None = None,
    space: str | None = "s",
) -> tuple[Candidate, ...]:
    scores = scores or [1.0 - i * 0.1 for i in range(len(vectors))]
    return tuple(
        Candidate(
            i + 1,
            MemoryRef("ns", f"m{i}", 1),
            f"t{i}",
            scores[i],
            embedding=v,
            embedding_space=space if v is not None else None,
        )
        for i, v in enumerate(vectors)
    )


def _ranks(lam: float, candidates: Sequence[Candidate], limit: int) -> tuple[int, ...]:
    decision = asyncio.run(MMRReranker(MMROptions(lam=lam)).rerank("q", candidates, limit))
    assert isinstance(decision, RerankDecision)
    assert decision.discarded_rank_count == 0 and not decision.used_fallback
    return tuple(decision.selected_ranks)


# near-duplicate pairs: (1, 2) point along X, (3, 4) along Y, 5 along Z
PAIRS = _cands([X, X, Y, Y, Z])


def test_lambda_one_is_the_relevance_order() -> None:
    assert _ranks(1.0, PAIRS, 5) == (1, 2, 3, 4, 5)


def test_lambda_zero_is_honoured_pure_diversity() -> None:
    # first pick: all relevance terms are 0, so coarse position 1 wins the tie; then the
    # candidates least similar to everything picked so far
    assert _ranks(0.0, PAIRS, 3) == (1, 3, 5)


def test_middle_lambda_skips_near_duplicates() -> None:
    assert _ranks(0.5, PAIRS, 3) == (1, 3, 5)
    assert _ranks(0.95, PAIRS, 3) == (1, 2, 3)  # relevance dominates at high λ


def test_default_lambda_is_051_by_its_selection() -> None:
    # Scores 1, 1, 0.5, 0 give relevance 1, 1, 0.5, 0. Pick 1: rank 1 (tie with rank 2 goes
    # to the coarse position). Pick 2: rank 2 has redundancy cos(v, X) = 0.51, rank 3 none:
    #   λ = 0.5:  rank 2 0.5 - 0.5 * 0.51 = 0.245  <  rank 3 0.5 * 0.5 = 0.25
    #   λ = 0.51: rank 2 0.51 - 0.49 * 0.51 = 0.2601  >  rank 3 0.51 * 0.5 = 0.255
    v = [0.51, (1 - 0.51**2) ** 0.5, 0.0]
    candidates = _cands([X, v, Z, Y], scores=[1.0, 1.0, 0.5, 0.0])
    assert _ranks(0.5, candidates, 2) == (1, 3)
    assert _ranks(0.51, candidates, 2) == (1, 2)
    decision = asyncio.run(MMRReranker().rerank("q", candidates, 2))
    assert decision.selected_ranks == (1, 2)
    assert decision.records[1].detail == (
        "rel=1.000000 redundancy=0.510000 mmr=0.260100 rel_source=coarse"
    )


def test_redundancy_is_the_max_over_all_selected_not_the_last() -> None:
    candidates = _cands([X, Y, X, [1.0, 1.0, 0.0], X], scores=[1.0, 0.9, 0.8, 0.7, 0.0])
    assert _ranks(0.5, candidates, 3) == (1, 2, 4)


def test_missing_vectors_have_similarity_zero_and_never_crash() -> None:
    candidates = _cands([X, None, X, None, Y])
    # None never counts as a duplicate: rank 2 keeps its place; rank 3 (dup of 1) is pushed down
    assert _ranks(0.5, candidates, 3) == (1, 2, 4)
    assert _ranks(0.5, _cands([None] * 6), 4) == (1, 2, 3, 4)  # relevance order


@pytest.mark.parametrize(
    "odd",
    [
        [0.0, 0.0, 0.0],  # zero norm
        [float("nan"), 1.0, 0.0],  # non-finite
        [float("inf"), 0.0, 0.0],  # non-finite: its norm is +inf, not NaN
        [1.0, 0.0],  # wrong dimension
    ],
)
def test_unusable_vectors_count_as_missing(odd: list[float]) -> None:
    candidates = _cands([X, odd, X, Y])
    decision = asyncio.run(MMRReranker(MMROptions(lam=0.5)).rerank("q", candidates, 3))
    assert decision.selected_ranks == (1, 2, 4)
    assert "vector=missing" in (decision.records[1].detail or "")
    assert "vector=missing" not in (decision.records[0].detail or "")


def test_vectors_of_another_space_count_as_missing() -> None:
    main = _cands([X, X, X, Y], space="main")
    other = Candidate(2, MemoryRef("ns", "m1", 1), "t1", 0.9, embedding=X, embedding_space="old")
    candidates = (main[0], other, main[2], main[3])
    # the 'old' vector is not compared: rank 2 is not a duplicate of rank 1; rank 3 is
    assert _ranks(0.5, candidates, 3) == (1, 2, 4)


def test_ties_go_to_the_coarse_position_whatever_the_input_order() -> None:
    candidates = _cands([X, X, X, X], scores=[1.0, 1.0, 1.0, 1.0])
    assert _ranks(0.5, candidates, 4) == (1, 2, 3, 4)
    assert _ranks(0.5, tuple(reversed(candidates)), 4) == (1, 2, 3, 4)


def test_constant_pool_relevance_is_one() -> None:
    decision = asyncio.run(
        MMRReranker(MMROptions(lam=0.5)).rerank("q", _cands([X, Y], [3.0, 3.0]), 2)
    )
    assert (decision.records[0].detail or "").startswith("rel=1.000000 ")
    assert (decision.records[1].detail or "").startswith("rel=1.000000 ")


def test_records_report_relevance_redundancy_and_score() -> None:
    decision = asyncio.run(MMRReranker(MMROptions(lam=0.5)).rerank("q", PAIRS, 2))
    assert [r.rank for r in decision.records] == [1, 3]
    assert all(r.outcome == "selected" for r in decision.records)
    assert decision.records[1].detail == (
        "rel=0.500000 redundancy=0.000000 mmr=0.250000 rel_source=coarse"
    )


def test_pool_bound() -> None:
    rng = np.random.default_rng(0)
    at_bound = _cands(list(rng.normal(size=(MAX_CANDIDATES, 8))), [1.0] * MAX_CANDIDATES)
    assert len(_ranks(0.5, at_bound, 10)) == 10
    over = _cands(list(rng.normal(size=(MAX_CANDIDATES + 1, 8))), [1.0] * (MAX_CANDIDATES + 1))
    with pytest.raises(ValidationError, match="at most 200 candidates"):
        asyncio.run(MMRReranker().rerank("q", over, 10))


def _hits(n: int) -> tuple[Hit, ...]:
    return tuple(Hit(MemoryRef("ns", f"m{i}", 1), f"text {i}", 1.0 - i * 0.1) for i in range(n))


def test_through_the_seam_with_the_pools_vectors() -> None:
    hits = _hits(5)
    vectors = [np.array(v, dtype=np.float32) for v in (X, X, Y, Y, Z)]
    run = run_reranker(MMRReranker(MMROptions(lam=0.5)), "q", hits, 3, vectors=vectors)
    assert [h.ref.memory_id for h in run.hits] == ["m0", "m2", "m4"]
    trace = run.trace
    assert trace is not None and trace.status is RerankStatus.OK
    assert trace.policy_id == "rankseam.rerank.mmr.v1"
    assert trace.to_dict()["descriptor"]["lambda"] == 0.5
    assert len(trace.to_dict()["records"]) == 3


def test_oversized_pool_through_the_seam_is_refused_by_the_host() -> None:
    with pytest.raises(ValidationError):
        run_reranker(MMRReranker(), "q", _hits(MAX_CANDIDATES + 1), 5)


def test_failure_inside_the_seam_fails_closed() -> None:
    class Broken:
        def embed(self, texts: Sequence[str], /) -> np.ndarray:
            raise RuntimeError("embedder down")

    reranker = MMRReranker(MMROptions(relevance="query_cosine"), Broken())
    with pytest.raises(RerankError, match="embedder down"):
        run_reranker(reranker, "q", _hits(3), 2)
