"""The MMR selection itself: plain numpy over arrays, no rankseam types.

Greedy maximal marginal relevance::

    mmr(i) = λ · rel(i) − (1 − λ) · max_{j ∈ S} sim(i, j)

where ``S`` is the set already selected (the redundancy term is 0 while ``S`` is empty).
``λ = 1`` is pure relevance (the relevance order), ``λ = 0`` is pure diversity.

Cost: one Gram matrix of the unit vectors (``n × n``), then ``k`` rounds that each update a
running maximum with the one row of the item just picked: O(n·k) after the Gram matrix,
instead of re-comparing every candidate with every selected item each round (O(n·k²)).

Ties: scores within :data:`TIE_TOLERANCE` of the round's best score count as tied, so that
mathematically equal scores tie on every platform and BLAS; among tied scores the lowest
array index wins. Callers order the arrays by their tie-break key (coarse position, then
identity) before calling.
"""

from __future__ import annotations

import math

import attrs
import numpy as np

__all__ = ["TIE_TOLERANCE", "MMRSelection", "minmax", "select", "unit_rows"]

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
    usable = np.asarray(valid, dtype=bool).copy()
    if m.size == 0:
        usable[:] = False
        return np.zeros(m.shape, dtype=np.float64), usable
    with np.errstate(over="ignore", invalid="ignore"):
        norms = np.sqrt(np.einsum("ij,ij->i", m, m))
    usable &= np.isfinite(norms) & (norms > 0.0)
    if not usable.all():
        m[~usable] = 0.0
        norms[~usable] = 1.0
    m /= norms[:, None]
    return m, usable


def select(relevance: np.ndarray, unit: np.ndarray, lam: float, k: int) -> MMRSelection:
    """Greedy MMR over ``len(relevance)`` items; ``unit`` holds one unit (or zero) row each."""
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.shape[0]
    k = max(0, min(int(k), n))
    if k == 0:
        return MMRSelection((), (), (), ())
    weight = 1.0 - lam
    gram = unit @ unit.T if unit.ndim == 2 and unit.shape[1] else None
    # the weight is folded into the Gram matrix once, so penalty = (1-λ)·max sim is tracked
    # directly (max commutes with a non-negative factor); at λ = 1 the plain max sim is tracked
    tracked = None if gram is None else (weight * gram if weight > 0.0 else gram)
    rel_term = lam * rel  # a picked item's entry becomes -inf, so it is never picked again
    penalty = np.zeros(n, dtype=np.float64)
    score = rel_term.copy()
    picked: list[int] = []
    reds: list[float] = []
    scores: list[float] = []
    for step in range(k):
        best = score[score.argmax()]
        j = int((score >= best - TIE_TOLERANCE).argmax())  # earliest within the tolerance
        picked.append(j)
        scores.append(float(score[j]))
        reds.append(float(penalty[j]))
        rel_term[j] = -np.inf
        if tracked is not None and step + 1 < k:
            if step == 0:
                penalty = tracked[j].copy()
            else:
                np.maximum(penalty, tracked[j], out=penalty)
        if tracked is not None and weight > 0.0 and step + 1 < k:
            np.subtract(rel_term, penalty, out=score)
        else:
            score[j] = -np.inf
    if weight > 0.0:
        reds = [r / weight for r in reds]  # report the max similarity, not the penalty
    return MMRSelection(
        tuple(picked), tuple(float(rel[i]) for i in picked), tuple(reds), tuple(scores)
    )
