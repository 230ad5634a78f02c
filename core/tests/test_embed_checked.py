"""What an embedder answers is checked before any store or search uses it: every row finite,
and of unit length (within the tolerance) in an L2-normalised space; the edges of both."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from rankseam.embedding import UNIT_NORM_TOLERANCE, EmbedderDescriptor, embed_checked
from rankseam.errors import ConfigurationError


class _Fixed:
    """An embedder that answers the rows it was given, whatever the texts."""

    def __init__(self, rows: object, normalization: str = "l2") -> None:
        self.rows = rows
        self.descriptor = EmbedderDescriptor("fixed", 4, normalization=normalization)

    def embed(self, texts: Sequence[str], /) -> np.ndarray:
        return np.asarray(self.rows)


def _norm(value: float) -> list[float]:
    return [value, 0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    "rows",
    [
        [_norm(1.0)],
        [_norm(1.0 + UNIT_NORM_TOLERANCE * 0.99), _norm(1.0 - UNIT_NORM_TOLERANCE * 0.99)],
        [[0.5, 0.5, 0.5, 0.5], _norm(0.0)],  # a zero vector scores 0: allowed
        np.zeros((0, 4)),
    ],
)
def test_unit_rows_and_zero_rows_pass(rows: object) -> None:
    out = embed_checked(_Fixed(rows), ["t"] * len(rows))  # type: ignore[arg-type]
    assert out.dtype == np.float32 and out.shape == (len(rows), 4)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "norm", [1.0 + UNIT_NORM_TOLERANCE * 1.01, 1.0 - UNIT_NORM_TOLERANCE * 1.01]
)
def test_a_row_off_unit_length_is_refused_in_an_l2_space(norm: float) -> None:
    rows = [_norm(1.0), _norm(norm)]
    with pytest.raises(ConfigurationError, match=r"norm .* \(for text 2 of 2\)"):
        embed_checked(_Fixed(rows), ["a", "b"])
    # the same rows in a space that is not normalised are fine
    embed_checked(_Fixed(rows, "none"), ["a", "b"])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e39])
@pytest.mark.parametrize("normalization", ["l2", "none"])
def test_a_value_that_is_not_a_finite_float32_is_refused(bad: float, normalization: str) -> None:
    rows = [_norm(1.0), _norm(1.0), [bad, 0.0, 0.0, 0.0]]
    with pytest.raises(ConfigurationError, match=r"NaN or infinite values \(for text 3 of 3\)"):
        embed_checked(_Fixed(rows, normalization), ["a", "b", "c"])


def test_large_finite_values_whose_squares_overflow_pass_where_not_normalised() -> None:
    rows = [[3e38, 3e38, -3e38, 1.0]]
    out = embed_checked(_Fixed(rows, "none"), ["a"])
    assert np.isfinite(out).all()
    with pytest.raises(ConfigurationError, match="declares L2-normalised vectors"):
        embed_checked(_Fixed(rows), ["a"])


def test_a_wrong_shape_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"returned shape \(1, 3\), expected \(1, 4\)"):
        embed_checked(_Fixed([[1.0, 0.0, 0.0]]), ["a"])
