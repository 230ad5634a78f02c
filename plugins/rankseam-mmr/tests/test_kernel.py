"""The kernel's public functions (``rankseam_mmr.algorithm``) on their own: every field of a
selection against a plain reference on each way of getting similarity rows, non-finite and
zero vectors, ties, λ at 0 and 1, ``k`` outside 1..n, and min-max normalisation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from rankseam_mmr.algorithm import (
    GRAM_ROWS_PER_PICK,
    TIE_TOLERANCE,
    MMRSelection,
    minmax,
    select,
    select_raw,
    unit_rows,
)

INF = float("inf")
NAN = float("nan")


def reference(rel: np.ndarray, vectors: np.ndarray, lam: float, k: int) -> MMRSelection:
    """Every field of a greedy MMR selection, round by round over all selected items (zero or
    non-finite rows have similarity 0 to everything)."""
    n = len(rel)
    norms = np.sqrt((vectors.astype(np.float64) ** 2).sum(axis=1)) if vectors.size else None

    def sim(i: int, j: int) -> float:
        if norms is None or not (np.isfinite(norms[i]) and np.isfinite(norms[j])):
            return 0.0
        if norms[i] == 0.0 or norms[j] == 0.0:
            return 0.0
        return float(vectors[i] @ vectors[j]) / float(norms[i] * norms[j])

    picked: list[int] = []
    reds: list[float] = []
    scores: list[float] = []
    for _ in range(min(k, n)):
        best = None
        for i in range(n):
            if i in picked:
                continue
            red = max((sim(i, j) for j in picked), default=0.0)
            score = lam * rel[i] - (1.0 - lam) * red
            if best is None or score > best[2] + TIE_TOLERANCE:
                best = (i, red, score)
        assert best is not None
        picked.append(best[0])
        reds.append(best[1])
        scores.append(best[2])
    return MMRSelection(
        tuple(picked), tuple(float(rel[i]) for i in picked), tuple(reds), tuple(scores)
    )


def _same(got: MMRSelection | None, want: MMRSelection) -> None:
    assert got is not None
    assert got.indices == want.indices
    for field in ("relevance", "redundancy", "scores"):
        assert getattr(got, field) == pytest.approx(getattr(want, field), abs=1e-9), field


def _pool(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Relevance in [0, 1] and raw rows of assorted lengths with near-duplicates and opposite
    vectors (negative cosines), so a running maximum clamped at 0 or reset each round shows."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, d))
    base[1] = base[0] * 0.9 + 0.01  # a near-duplicate of the first
    base[2] = -base[0]  # the opposite of the first
    base[n - 1] = base[3] * 2.0
    lengths = rng.uniform(0.05, 30.0, size=(n, 1))  # far from unit length: the scale matters
    raw = base / np.linalg.norm(base, axis=1, keepdims=True) * lengths
    return rng.uniform(0.0, 1.0, size=n), raw


# (n, k) pairs on each side of the Gram-matrix crossover n <= GRAM_ROWS_PER_PICK * (k - 1)
GRAM = [(5, 4), (12, 3), (16, 3)]
PER_PICK = [(12, 2), (20, 3), (30, 4)]


@pytest.mark.parametrize(("n", "k"), GRAM + PER_PICK)
@pytest.mark.parametrize("lam", [0.0, 0.3, 0.51, 1.0])
def test_every_field_equals_the_reference_on_every_path(n: int, k: int, lam: float) -> None:
    assert (n <= GRAM_ROWS_PER_PICK * (k - 1)) == ((n, k) in GRAM)
    for seed in range(3):
        rel, raw = _pool(n, 5, seed)
        want = reference(rel, raw, lam, k)
        _same(select_raw(rel, raw.copy(), lam, k), want)
        unit, usable = unit_rows(raw, np.ones(n, dtype=bool))
        assert usable.all()
        _same(select(rel, unit, lam, k), want)


def test_running_maximum_keeps_negative_similarities_of_the_first_pick() -> None:
    # after X, the opposite -X has cosine -1: a bonus at λ = 0.5 (0.5 · 0 + 0.5 · 1 = 0.5)
    # that beats Y (0.5 · 0.1); a maximum clamped at 0 would pick Y
    x, y = [1.0, 0.0], [0.0, 1.0]
    rel = np.array([1.0, 0.0, 0.1])
    raw = np.array([x, [-1.0, 0.0], y])
    for got in (select(rel, raw, 0.5, 3), select_raw(rel, raw * 3.0, 0.5, 3)):
        assert got is not None
        assert got.indices == (0, 1, 2)
        assert got.redundancy == pytest.approx((0.0, -1.0, 0.0))
        assert got.scores == pytest.approx((0.5, 0.5, 0.05))


def test_redundancy_at_lambda_one_is_the_plain_maximum_similarity() -> None:
    # pure relevance: the order is the relevance order and the records still report the
    # max cosine to the items picked before
    rel = np.array([1.0, 0.9, 0.8, 0.7])
    raw = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 5.0], [1.0, 1.0]])
    want = (0.0, 1.0, 0.0, 2**-0.5)
    unit, _ = unit_rows(raw, np.ones(4, dtype=bool))
    for got in (select(rel, unit, 1.0, 4), select_raw(rel, raw, 1.0, 4)):
        assert got is not None
        assert got.indices == (0, 1, 2, 3)
        assert got.redundancy == pytest.approx(want)
        assert got.scores == pytest.approx(tuple(rel))


def test_lambda_zero_ignores_relevance() -> None:
    rel = np.array([0.0, 1.0, 0.5])
    raw = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    got = select(rel, raw, 0.0, 3)
    # round 1: every score is 0, the lowest index wins; then the least similar
    assert got.indices == (0, 2, 1)
    assert got.scores == pytest.approx((0.0, 0.0, -1.0))


@pytest.mark.parametrize("k", [0, -1, -10])
def test_no_pick_for_k_at_most_zero(k: int) -> None:
    empty = MMRSelection((), (), (), ())
    rel, raw = _pool(6, 3, 0)
    assert select(rel, raw, 0.5, k) == empty
    assert select_raw(rel, raw, 0.5, k) == empty


@pytest.mark.parametrize("k", [1, 6, 7, 100])
def test_k_above_n_picks_every_item_once(k: int) -> None:
    rel, raw = _pool(6, 3, 1)
    unit, _ = unit_rows(raw, np.ones(6, dtype=bool))
    for got in (select(rel, unit, 0.5, k), select_raw(rel, raw, 0.5, k)):
        assert got is not None
        assert len(got.indices) == min(k, 6) == len(set(got.indices))
        _same(got, reference(rel, raw, 0.5, k))


def test_one_dimensional_vectors_are_compared() -> None:
    rel = np.array([1.0, 0.9, 0.8])
    raw = np.array([[2.0], [3.0], [-1.0]])  # cosines 1 and -1
    assert select(rel, np.sign(raw), 0.5, 3).indices == (0, 2, 1)
    assert select_raw(rel, raw, 0.5, 3).indices == (0, 2, 1)  # type: ignore[union-attr]


def test_no_vectors_at_all_is_the_relevance_order() -> None:
    rel = np.array([0.2, 1.0, 0.5])
    got = select(rel, np.zeros((3, 0)), 0.5, 3)
    assert got.indices == (1, 2, 0)
    assert got.redundancy == (0.0, 0.0, 0.0)
    assert got.scores == pytest.approx((0.5, 0.25, 0.1))


def test_scores_within_the_tolerance_tie_and_the_lowest_index_wins() -> None:
    raw = np.eye(3)
    near = np.array([1.0 - TIE_TOLERANCE / 10, 1.0, 1.0 - TIE_TOLERANCE / 10])
    assert select(near, raw, 1.0, 3).indices == (0, 1, 2)
    assert select_raw(near, raw, 1.0, 3).indices == (0, 1, 2)  # type: ignore[union-attr]
    apart = np.array([1.0 - 1e-6, 1.0, 1.0 - 2e-6])  # beyond the tolerance: the best wins
    assert select(apart, raw, 1.0, 3).indices == (1, 0, 2)
    assert select_raw(apart, raw, 1.0, 3).indices == (1, 0, 2)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "odd",
    [
        [INF, 0.0, 0.0],
        [-INF, 1.0, 0.0],
        [NAN, 1.0, 0.0],
        [0.0, 0.0, 0.0],
        [1e200, 1e200, 0.0],  # finite components, but the norm overflows
    ],
)
def test_unusable_rows_become_zero_rows(odd: list[float]) -> None:
    matrix = np.array([[3.0, 4.0, 0.0], odd, [0.0, 0.5, 0.0]])
    unit, usable = unit_rows(matrix, np.ones(3, dtype=bool))
    assert usable.tolist() == [True, False, True]
    assert unit.tolist() == [[0.6, 0.8, 0.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    # select_raw declines the pool; the unit rows select without a crash or a repeated pick
    rel = np.array([1.0, 0.9, 0.8])
    assert select_raw(rel, matrix, 0.5, 3) is None
    assert select(rel, unit, 0.5, 3).indices == (0, 1, 2)


def test_an_invalid_row_becomes_a_zero_row_whatever_its_values() -> None:
    matrix = np.array([[1.0, 0.0], [0.0, 2.0]])
    unit, usable = unit_rows(matrix, np.array([True, False]))
    assert usable.tolist() == [True, False]
    assert unit.tolist() == [[1.0, 0.0], [0.0, 0.0]]


def test_unit_rows_copies_unless_told_to_work_in_place() -> None:
    matrix = np.array([[3.0, 4.0], [0.0, 0.0]])
    valid = np.ones(2, dtype=bool)
    unit, usable = unit_rows(matrix, valid)
    assert matrix.tolist() == [[3.0, 4.0], [0.0, 0.0]] and valid.tolist() == [True, True]
    assert not np.shares_memory(unit, matrix) and usable.tolist() == [True, False]
    same, _ = unit_rows(matrix, valid, in_place=True)
    assert np.shares_memory(same, matrix) and matrix.tolist() == [[0.6, 0.8], [0.0, 0.0]]


def test_unit_rows_of_zero_dimensions_are_unusable() -> None:
    unit, usable = unit_rows(np.zeros((3, 0)), np.ones(3, dtype=bool))
    assert unit.shape == (3, 0) and usable.tolist() == [False, False, False]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([], []),
        ([5.0], [1.0]),
        ([2.0, 2.0, 2.0], [1.0, 1.0, 1.0]),
        ([1.0, 3.0, 2.0], [0.0, 1.0, 0.5]),
        ([0.0, 0.25], [0.0, 1.0]),  # a range under 1 is stretched too
        ([-4.0, 6.0, 1.0], [0.0, 1.0, 0.5]),
        ([NAN, 1.0, 3.0, -INF, 2.0], [0.0, 0.0, 1.0, 0.0, 0.5]),
        ([INF, 2.0, 2.0], [0.0, 1.0, 1.0]),
        ([NAN, 0.0, 0.5], [0.0, 0.0, 1.0]),  # non-finite beside a range under 1
        ([NAN, INF, -INF], [1.0, 1.0, 1.0]),
    ],
)
def test_minmax(values: list[float], expected: list[float]) -> None:
    out = minmax(np.array(values))
    assert out.dtype == np.float64
    assert out.tolist() == pytest.approx(expected)


def test_a_score_exactly_at_the_tolerance_still_ties() -> None:
    edge = 1.0 - TIE_TOLERANCE  # the round's best minus the tolerance, to the bit
    rel = np.array([edge, 1.0])
    assert select(rel, np.eye(2), 1.0, 2).indices == (0, 1)


def test_a_single_one_dimensional_row_is_usable() -> None:
    unit, usable = unit_rows(np.array([[-2.5]]), np.array([True]))
    assert unit.tolist() == [[-1.0]] and usable.tolist() == [True]


def test_unit_rows_returns_float64_and_takes_any_truth_values() -> None:
    ints = np.array([[3, 4], [6, 8]])
    for in_place in (False, True):
        unit, usable = unit_rows(ints, [1, 0], in_place=in_place)
        assert unit.dtype == np.float64 and usable.dtype == np.bool_
        assert unit.tolist() == [[0.6, 0.8], [0.0, 0.0]] and usable.tolist() == [True, False]
    single = np.array([[0.1, 0.2]], dtype=np.float32)
    assert unit_rows(single, [True], in_place=True)[0].dtype == np.float64


def test_relevance_is_read_as_float64() -> None:
    rel32 = np.array([0.7, 0.1], dtype=np.float32)
    assert minmax(rel32).dtype == np.float64
    want = 0.3 * float(rel32[0])  # a float64 product, not a float32 one
    assert want != float(np.float32(0.3) * rel32[0])
    for got in (select(rel32, np.eye(2), 0.3, 1), select_raw(rel32, np.eye(2), 0.3, 1)):
        assert got is not None and got.scores == (want,)


def test_non_finite_and_overflowing_rows_raise_no_floating_point_warning() -> None:
    rows = np.array([[1e200, 1e200, 0.0], [INF, 0.0, 0.0], [NAN, 1.0, 0.0], [0.0, 1.0, 0.0]])
    rel = np.array([1.0, 0.5, 0.2, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in (1, 4):  # the matrix-vector way and the Gram matrix
            assert select_raw(rel, rows, 0.5, k) is None
        unit, usable = unit_rows(rows, np.ones(4, dtype=bool))
        assert usable.tolist() == [False, False, False, True]
        assert unit.tolist() == [[0.0] * 3] * 3 + [[0.0, 1.0, 0.0]]
        assert minmax(np.array([NAN, INF, 1.0])).tolist() == [0.0, 0.0, 1.0]
