"""The fast path (every vector present and usable, one space and dimension: normalised
through the similarity rows) and the general path (unit rows, zero rows for unusable
vectors) select alike; so do the two ways of getting similarity rows (the whole Gram matrix
for small pools, one matrix-vector product per pick for larger ones)."""

from __future__ import annotations

import asyncio
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_reference import reference_mmr

from rankseam.plugin.rerankers import make_candidates
from rankseam.testing import synthetic_pool
from rankseam.types import Candidate, Hit, MemoryRef, RerankDecision
from rankseam_mmr import MMROptions, MMRReranker
from rankseam_mmr.algorithm import GRAM_ROWS_PER_PICK, minmax, select, select_raw, unit_rows


@st.composite
def one_space_pools(draw: st.DrawFn) -> tuple[list[Candidate], float, int]:
    """Every candidate has a vector of the same space and dimension (the fast path; a zero
    vector sends the pool down the general path). Pools up to 24 with limits 1..n+2 take
    both the Gram-matrix and the matrix-vector way."""
    n = draw(st.integers(1, 24))
    dims = draw(st.integers(1, 4))
    space = draw(st.sampled_from(["main", None]))
    components = st.integers(-2, 2).map(float)  # small integers: exact ties, some zero vectors
    candidates = [
        Candidate(
            rank=i + 1,
            ref=MemoryRef("ns", f"m{draw(st.integers(0, 999)):03d}-{i}", 1),
            text=f"candidate {i}",
            score=draw(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0])),
            embedding=draw(st.lists(components, min_size=dims, max_size=dims)),
            embedding_space=space,
        )
        for i in range(n)
    ]
    lam = draw(st.one_of(st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]), st.floats(0.0, 1.0)))
    return candidates, lam, draw(st.integers(1, n + 2))


def _rerank(reranker: MMRReranker, candidates: list[Candidate], limit: int) -> RerankDecision:
    return asyncio.run(reranker.rerank("q", tuple(candidates), limit))


@settings(max_examples=200, deadline=None)
@given(one_space_pools(), st.randoms(use_true_random=False))
def test_one_space_selection_equals_reference(
    pool: tuple[list[Candidate], float, int], rnd: random.Random
) -> None:
    candidates, lam, limit = pool
    expected = reference_mmr(candidates, lam, limit)
    shuffled = list(candidates)
    rnd.shuffle(shuffled)
    got = _rerank(MMRReranker(MMROptions(lam=lam)), shuffled, limit)
    assert list(got.selected_ranks) == expected


@settings(max_examples=200, deadline=None)
@given(one_space_pools())
def test_candidate_views_select_like_the_reference_and_the_plain_path(
    pool: tuple[list[Candidate], float, int],
) -> None:
    """The seam's views are read as arrays (scores(), embeddings()); same decision, records
    included, as a plain tuple of the same candidates, and the reference's selection."""
    candidates, lam, limit = pool
    hits = [Hit(c.ref, c.text, c.score) for c in candidates]
    views = make_candidates(
        hits,
        vectors=[c.embedding for c in candidates],
        embedding_space=candidates[0].embedding_space,
    )
    reranker = MMRReranker(MMROptions(lam=lam))
    via_views = asyncio.run(reranker.rerank("q", views, limit))
    assert list(via_views.selected_ranks) == reference_mmr(candidates, lam, limit)
    assert via_views == _rerank(reranker, list(views), limit)


@pytest.mark.parametrize("lam", [0.3, 0.5, 0.7, 1.0])  # at λ = 0 the extra would be picked
def test_fast_and_general_path_give_the_same_decision(lam: float) -> None:
    hits, vectors = synthetic_pool(50, seed=3, dims=384)
    fast = make_candidates(hits, vectors=vectors, embedding_space="s")
    # one more candidate with a zero vector (unusable: the general path) and the pool's
    # lowest score (the relevance of the others is unchanged); it is never picked here
    extra = Candidate(
        51,
        MemoryRef("ns", "extra", 1),
        "extra",
        min(c.score for c in fast),
        embedding=np.zeros(384, dtype=np.float32),
        embedding_space="s",
    )
    reranker = MMRReranker(MMROptions(lam=lam))
    a = _rerank(reranker, list(fast), 10)
    b = _rerank(reranker, [*fast, extra], 10)
    assert 51 not in b.selected_ranks
    assert a.selected_ranks == b.selected_ranks
    assert [r.detail for r in a.records] == [r.detail for r in b.records]


@pytest.mark.parametrize("n", [20, 50, 120, 200])
@pytest.mark.parametrize("k", [1, 2, 10])
@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_similarity_row_sources_agree(n: int, k: int, lam: float) -> None:
    """Raw rows (select_raw) vs unit rows (select); Gram matrix vs matrix-vector products (the
    choice follows n and k: GRAM_ROWS_PER_PICK)."""
    rng = np.random.default_rng(n * 100 + k)
    base = rng.normal(size=(n // 2 + 1, 384))
    raw = np.array([base[i // 2] + rng.normal(scale=0.05, size=384) for i in range(n)])
    raw *= rng.uniform(0.5, 3.0, size=(n, 1))  # not unit length
    rel = minmax(rng.uniform(size=n).round(2))  # with ties
    unit, usable = unit_rows(raw, np.ones(n, dtype=bool))
    assert usable.all()
    a = select_raw(rel, raw, lam, k)
    b = select(rel, unit, lam, k)
    assert a is not None
    assert a.indices == b.indices
    np.testing.assert_allclose(a.redundancy, b.redundancy, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.scores, b.scores, rtol=0, atol=1e-12)
    # a straightforward check of the redundancy reported for each pick
    cos = unit @ unit.T
    for step, i in enumerate(a.indices):
        before = a.indices[:step]
        want = max((cos[i, j] for j in before), default=0.0)
        assert a.redundancy[step] == pytest.approx(want, abs=1e-12)


def test_the_parameters_above_take_both_ways() -> None:
    gram = [n <= GRAM_ROWS_PER_PICK * (k - 1) for n in (20, 50, 120, 200) for k in (1, 2, 10)]
    assert any(gram) and not all(gram)


@pytest.mark.parametrize("n", [4, 40])  # the Gram-matrix way and the matrix-vector way
@pytest.mark.parametrize("odd", [0.0, float("nan"), float("inf")])
def test_select_raw_declines_unusable_rows(n: int, odd: float) -> None:
    raw = np.random.default_rng(0).normal(size=(n, 8))
    raw[n // 2] = odd
    assert select_raw(np.ones(n), raw, 0.5, 3) is None
    assert select_raw(np.ones(n), np.random.default_rng(1).normal(size=(n, 8)), 0.5, 3)
