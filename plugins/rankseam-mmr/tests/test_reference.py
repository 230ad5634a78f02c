"""Selections equal a straightforward O(n·k²) MMR written here, on random inputs with ties."""

from __future__ import annotations

import asyncio
import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from rankseam.types import Candidate, MemoryRef, RerankDecision
from rankseam_mmr import MMROptions, MMRReranker


def reference_mmr(candidates: list[Candidate], lam: float, limit: int) -> list[int]:
    """Textbook greedy MMR: every round compares each candidate with every selected one."""
    order = sorted(candidates, key=lambda c: (c.rank, c.ref.sort_key()))
    # the (space, dimension) most candidates share; the first seen wins a tie
    counts: dict[tuple[str | None, int], int] = {}
    for c in order:
        if c.embedding is not None:
            pair = (c.embedding_space, len(c.embedding))
            counts[pair] = counts.get(pair, 0) + 1
    space = max(counts, key=lambda p: counts[p]) if counts else None

    def usable(c: Candidate) -> bool:
        if c.embedding is None or space is None:
            return False
        if (c.embedding_space, len(c.embedding)) != space:
            return False
        norm = math.sqrt(sum(float(x) * float(x) for x in c.embedding))
        return math.isfinite(norm) and norm > 0

    def cosine(a: Candidate, b: Candidate) -> float:
        if not (usable(a) and usable(b)):
            return 0.0
        va = [float(x) for x in a.embedding]  # type: ignore[union-attr]
        vb = [float(x) for x in b.embedding]  # type: ignore[union-attr]
        dot = sum(x * y for x, y in zip(va, vb, strict=True))
        return dot / (math.sqrt(sum(x * x for x in va)) * math.sqrt(sum(y * y for y in vb)))

    scores = [c.score for c in order]
    lo, hi = min(scores), max(scores)
    rel = {id(c): (1.0 if hi == lo else (c.score - lo) / (hi - lo)) for c in order}

    selected: list[Candidate] = []
    while len(selected) < min(limit, len(order)):
        scored = []
        for c in order:
            if c in selected:
                continue
            redundancy = max((cosine(c, s) for s in selected), default=0.0)
            scored.append((lam * rel[id(c)] - (1 - lam) * redundancy, c))
        best = max(score for score, _ in scored)
        # scores within 1e-9 of the best tie; the earliest in coarse order wins a tie
        selected.append(next(c for score, c in scored if score >= best - 1e-9))
    return [c.rank for c in selected]


SPACES = ("main", "main", "main", "other", None)


@st.composite
def pools(draw: st.DrawFn) -> tuple[list[Candidate], float, int]:
    n = draw(st.integers(1, 14))
    dims = draw(st.integers(1, 4))
    components = st.integers(-2, 2).map(float)  # small integers: many exact ties, zero vectors
    scores = draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0]), min_size=n, max_size=n))
    candidates = []
    for i in range(n):
        kind = draw(st.sampled_from(["vec", "vec", "vec", "vec", "none", "space", "dim"]))
        vec: list[float] | None
        space: str | None = "main"
        if kind == "none":
            vec = None
        elif kind == "dim":
            vec = draw(st.lists(components, min_size=dims + 1, max_size=dims + 1))
        else:
            vec = draw(st.lists(components, min_size=dims, max_size=dims))
            if kind == "space":
                space = draw(st.sampled_from(SPACES))
        candidates.append(
            Candidate(
                rank=i + 1,
                ref=MemoryRef("ns", f"m{draw(st.integers(0, 999)):03d}-{i}", 1),
                text=f"candidate {i}",
                score=scores[i],
                embedding=vec,
                embedding_space=space if vec is not None else None,
            )
        )
    lam = draw(st.one_of(st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]), st.floats(0.0, 1.0)))
    limit = draw(st.integers(1, n + 2))
    return candidates, lam, limit


def _rerank(reranker: MMRReranker, candidates: list[Candidate], limit: int) -> RerankDecision:
    return asyncio.run(reranker.rerank("q", tuple(candidates), limit))


@settings(max_examples=200, deadline=None)
@given(pools(), st.randoms(use_true_random=False))
def test_selection_equals_reference(
    pool: tuple[list[Candidate], float, int], rnd: random.Random
) -> None:
    candidates, lam, limit = pool
    expected = reference_mmr(candidates, lam, limit)
    shuffled = list(candidates)
    rnd.shuffle(shuffled)  # the input order must not matter: ties go by coarse position
    got = _rerank(MMRReranker(MMROptions(lam=lam)), shuffled, limit)
    assert list(got.selected_ranks) == expected
    assert len(got.records) == len(expected)


def test_reference_catches_a_last_pick_only_penalty() -> None:
    """A known-wrong MMR (penalising only the latest pick) disagrees with the reference here,
    so the property test above can fail."""
    a = [1.0, 0.0]
    b = [0.0, 1.0]
    candidates = [
        Candidate(1, MemoryRef("ns", "a", 1), "a", 1.0, embedding=a, embedding_space="s"),
        Candidate(2, MemoryRef("ns", "b", 1), "b", 0.9, embedding=b, embedding_space="s"),
        Candidate(3, MemoryRef("ns", "a2", 1), "a2", 0.8, embedding=a, embedding_space="s"),
        Candidate(4, MemoryRef("ns", "c", 1), "c", 0.7, embedding=[1.0, 1.0], embedding_space="s"),
        Candidate(5, MemoryRef("ns", "z", 1), "z", 0.0, embedding=a, embedding_space="s"),
    ]
    expected = reference_mmr(candidates, 0.5, 3)
    # rel = score (min 0, max 1). After picks a, b: a2 scores 0.5*0.8 - 0.5*1 = -0.1 and c scores 0.35 - 0.5*0.707 = -0.004;
    # penalising only the latest pick (b) would let a2 (penalty 0) back in at 0.4
    assert expected == [1, 2, 4]  # the duplicate of the first pick never comes back
    assert list(_rerank(MMRReranker(MMROptions(lam=0.5)), candidates, 3).selected_ranks) == expected
