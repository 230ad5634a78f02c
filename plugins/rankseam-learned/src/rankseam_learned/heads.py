"""A model file's heads as numpy computes them: boosted trees and a logistic model.

Each head reads the columns it names (``features``) and answers ``predict_proba(rows)`` as
scikit-learn's binary classifiers do: an ``(n, 2)`` array whose column 1 is the probability of
the positive class. :mod:`rankseam_learned.model` builds them from a checked model file.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

__all__ = ["GradientBoostingHead", "Head", "LogisticHead", "checked_rows"]


def _sigmoid(raw: np.ndarray) -> np.ndarray:
    # the form scipy's expit computes, stable for large |raw|
    out = np.empty_like(raw)
    pos = raw >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-raw[pos]))
    e = np.exp(raw[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _two_columns(p: np.ndarray) -> np.ndarray:
    return np.column_stack((1.0 - p, p))


def checked_rows(x: Any, width: int) -> np.ndarray:
    """``x`` as float64 rows of ``width`` columns (a ValueError otherwise)."""
    rows = np.asarray(x, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[1] != width:
        raise ValueError(f"expected rows of {width} features, got an array of shape {rows.shape}")
    return rows


@attrs.frozen(eq=False)
class GradientBoostingHead:
    """A boosted tree ensemble, all trees flattened into one node table.

    ``left``/``right`` point into the flat table; a leaf points to itself, so ``depth`` steps
    from every root land every row on its leaf (see :meth:`raw`).
    """

    features: tuple[str, ...]
    baseline: float
    roots: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    missing_left: np.ndarray
    value: np.ndarray
    depth: int

    kind = "gradient_boosting"

    @property
    def n_trees(self) -> int:
        return len(self.roots)

    def raw(self, x: Any) -> np.ndarray:
        """The raw score (log-odds) of each row."""
        rows = checked_rows(x, len(self.features))
        n = rows.shape[0]
        node = np.broadcast_to(self.roots, (n, len(self.roots))).copy()
        row_index = np.arange(n)[:, None]
        for _ in range(self.depth):
            values = rows[row_index, self.feature[node]]
            go_left = values <= self.threshold[node]
            missing = np.isnan(values)
            if missing.any():
                go_left = np.where(missing, self.missing_left[node], go_left)
            node = np.where(go_left, self.left[node], self.right[node])
        raw: np.ndarray = self.baseline + self.value[node].sum(axis=1)
        return raw

    def predict_proba(self, x: Any) -> np.ndarray:
        """``(n, 2)``: the probabilities of the negative and the positive class."""
        return _two_columns(_sigmoid(self.raw(x)))


@attrs.frozen(eq=False)
class LogisticHead:
    """A logistic model over standardised columns."""

    features: tuple[str, ...]
    coef: np.ndarray
    intercept: float
    mean: np.ndarray
    scale: np.ndarray

    kind = "logistic"

    def raw(self, x: Any) -> np.ndarray:
        rows = checked_rows(x, len(self.features))
        raw: np.ndarray = ((rows - self.mean) / self.scale) @ self.coef + self.intercept
        return raw

    def predict_proba(self, x: Any) -> np.ndarray:
        return _two_columns(_sigmoid(self.raw(x)))


Head = GradientBoostingHead | LogisticHead
