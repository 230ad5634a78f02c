"""The MMR selection itself: plain numpy over arrays, no rankseam types.

Greedy maximal marginal relevance::

    mmr(i) = λ · rel(i) − (1 − λ) · max_{j ∈ S} sim(i, j)

where ``S`` is the set already selected (the redundancy term is 0 while ``S`` is empty).
``λ = 1`` is pure relevance (the relevance order), ``λ = 0`` is pure diversity.

Cost: ``k`` rounds that each update a running maximum with the similarity row of the item
just picked: O(n·k) after the similarity rows, instead of re-comparing every candidate with
every selected item each round (O(n·k²)). Only the ``k - 1`` rows of picked items are read:
a small pool takes them from one Gram matrix (``n × n``, one matrix product), a larger one
computes one matrix-vector product per pick (O(n·k·d)); see :data:`GRAM_ROWS_PER_PICK`.

Ties: scores within :data:`TIE_TOLERANCE` of the round's best score count as tied, so that
mathematically equal scores tie on every platform and BLAS; among tied scores the lowest
array index wins. Callers order the arrays by their tie-break key (coarse position, then
identity) before calling.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = [
    "GRAM_ROWS_PER_PICK",
    "TIE_TOLERANCE",
    "MMRSelection",
    "minmax",
    "select",
    "select_raw",
    "unit_rows",
]

#: Scores this close to the best one tie with it (platform-independent ties).
TIE_TOLERANCE = 1e-9


@attrs.frozen
class MMRSelection:
    """Indices picked (best first) with, per pick, its relevance, redundancy and MMR score."""

    indices: tuple[int, ...]
    relevance: tuple[float, ...]
    redundancy: tuple[float, ...]
    scores: tuple[float, ...]


def minmax(values: np.ndarray) -> np.ndarray:
    """Min-max normalise to [0, 1]; a constant input (or a single value) maps to 1.0.

    Non-finite entries count as the lowest value (0.0) and do not take part in min/max.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values.copy()
    lo, hi = float(values.min()), float(values.max())
    if math.isfinite(lo) and math.isfinite(hi):  # NaN and ±inf show in min or max
        if hi - lo <= 0.0:
            return np.ones(values.shape, dtype=np.float64)
        return (values - lo) / (hi - lo)
    finite = np.isfinite(values)
    out = np.zeros(values.shape, dtype=np.float64)
    if not finite.any():
        out[:] = 1.0
        return out
    lo = float(values[finite].min())
    hi = float(values[finite].max())
    if hi - lo <= 0.0:
        out[finite] = 1.0
        return out
    out[finite] = (values[finite] - lo) / (hi - lo)
    return out


def unit_rows(
    matrix: np.ndarray, valid: np.ndarray, *, in_place: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Rows scaled to unit length, and which rows are usable.

    Rows not ``valid``, or whose norm is zero or non-finite, become zero rows (cosine 0 with
    everything: how missing or incompatible vectors are handled) and are not usable.
    ``in_place=True`` reuses a float64 ``matrix`` the caller owns (no second n×d array).
    """
    m = np.asarray(matrix, dtype=np.float64) if in_place else np.array(matrix, dtype=np.float64)
    usable = np.array(valid, dtype=bool)
    if m.size == 0:
        usable[:] = False
        return np.zeros(m.shape, dtype=np.float64), usable
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    usable &= np.isfinite(norms)
    usable &= norms > 0.0
    if not usable.all():
        m[~usable] = 0.0
        norms[~usable] = 1.0
    m /= norms[:, None]
    return m, usable


#: The whole Gram matrix (one matrix product) is cheaper than one matrix-vector product per
#: pick while ``n <= GRAM_ROWS_PER_PICK * (k - 1)``: measured crossover near n = 75 for k = 10
#: and 384 dimensions. Either way gives the same selections (to rounding, see TIE_TOLERANCE).
GRAM_ROWS_PER_PICK = 8


def _uses_gram(n: int, k: int) -> bool:
    return n <= GRAM_ROWS_PER_PICK * (k - 1)


def select(relevance: np.ndarray, unit: np.ndarray, lam: float, k: int) -> MMRSelection:
    """Greedy MMR over ``len(relevance)`` items; ``unit`` holds one unit (or zero) row each."""
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.shape[0]
    k = max(0, min(int(k), n))
    if k == 0:
        return MMRSelection((), (), (), ())
    has_vectors = unit.ndim == 2 and unit.shape[1] > 0
    gram = unit @ unit.T if has_vectors and _uses_gram(n, k) else None
    return _greedy(rel, unit if has_vectors else None, lam, k, gram, None)


def select_raw(
    relevance: np.ndarray, vectors: np.ndarray, lam: float, k: int
) -> MMRSelection | None:
    """:func:`select` for raw rows of any length: the same selection, with the cosines
    normalised through the similarity rows (``(v_i · v_j) / (‖v_i‖ ‖v_j‖)``) instead of
    scaling the whole ``n × d`` matrix first.

    ``None`` when some row's norm is zero or non-finite (a missing vector by the module's
    rules): use :func:`unit_rows` and :func:`select` then.
    """
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.shape[0]
    k = max(0, min(int(k), n))
    if k == 0:
        return MMRSelection((), (), (), ())
    with np.errstate(over="ignore", invalid="ignore"):
        if _uses_gram(n, k):
            gram = vectors @ vectors.T
            squares = np.diagonal(gram).copy()  # the squared norms come with the Gram matrix
        else:
            gram = None
            squares = np.einsum("ij,ij->i", vectors, vectors)
    # NaN shows in the minimum, ±inf (or an overflow) in the sum
    if not (squares.min() > 0.0 and math.isfinite(squares.sum())):
        return None
    scale = np.divide(1.0, np.sqrt(squares, out=squares), out=squares)
    return _greedy(rel, vectors, lam, k, gram, scale)


def _greedy(
    rel: np.ndarray,
    vectors: np.ndarray | None,
    lam: float,
    k: int,
    gram: np.ndarray | None,
    scale: np.ndarray | None,
) -> MMRSelection:
    """The greedy rounds. ``scale`` (one positive factor per row, or ``None`` for unit rows):
    the cosine of rows ``i`` and ``j`` is ``(v_i · v_j) · scale[j] · scale[i]``. Similarity
    rows come from ``gram`` (``vectors @ vectors.T``) when given, else one matrix-vector
    product per pick; no vectors at all: similarity 0 everywhere."""
    n = rel.shape[0]
    weight = 1.0 - lam
    if gram is not None:
        # the weight is folded in once, so tracked = (1-λ)·max sim is the penalty itself
        # (max commutes with a non-negative factor); at λ = 1 the plain max sim is tracked
        if scale is not None:
            gram *= (scale * weight if weight > 0.0 else scale)[:, None]
            gram *= scale
        elif weight > 0.0:
            gram *= weight
    rel_term = lam * rel  # a picked item's entry becomes -inf, so it is never picked again
    # tracked[i]: with the Gram matrix, the penalty (the max similarity at λ = 1); else the
    # max similarity to the selected items, with ``scale`` before its own factor scale[i]
    # (> 0, so the max commutes with it), applied with the weight: penalty = factor · tracked
    tracked = np.zeros(n, dtype=np.float64)
    factor: float | np.ndarray = weight if scale is None or gram is not None else weight * scale
    penalty = np.empty(n, dtype=np.float64)
    score = rel_term.copy()
    tol = TIE_TOLERANCE
    own_scale = scale is not None and gram is None
    picked: list[int] = []
    reds: list[float] = []
    scores: list[float] = []
    last = k - 1
    for step in range(k):
        # the earliest score within the tolerance of the round's best
        j = int((score >= score.item(int(score.argmax())) - tol).argmax())
        picked.append(j)
        scores.append(score.item(j))
        reds.append(tracked.item(j) * scale.item(j) if own_scale else tracked.item(j))  # type: ignore[union-attr]
        if step == last:
            break
        rel_term[j] = -np.inf
        if gram is not None:
            if step == 0:
                tracked = gram[j].copy()
            else:
                np.maximum(tracked, gram[j], out=tracked)
            if weight > 0.0:
                np.subtract(rel_term, tracked, out=score)
                continue
        elif vectors is not None:
            row = vectors @ vectors[j]
            if scale is not None:
                row *= scale.item(j)
            if step == 0:
                tracked = row
            else:
                np.maximum(tracked, row, out=tracked)
            if weight > 0.0:
                np.multiply(tracked, factor, out=penalty)
                np.subtract(rel_term, penalty, out=score)
                continue
        score[j] = -np.inf
    if gram is not None and weight > 0.0:
        reds = [r / weight for r in reds]  # report the max similarity, not the penalty
    return MMRSelection(tuple(picked), tuple(rel[picked].tolist()), tuple(reds), tuple(scores))
