"""The embedder contract: text -> vectors, with a descriptor that names the vector space.

Vectors of different descriptors never mix: the store keeps each vector with its descriptor
key and cosine only ever compares vectors of the active embedder's space.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs
import numpy as np

from rankseam.checks import is_int, is_real
from rankseam.errors import ConfigurationError

__all__ = [
    "DEFAULT_FUSION_SCALE",
    "DEFAULT_FUSION_WEIGHT",
    "FUSION_SCALES",
    "UNIT_NORM_TOLERANCE",
    "Embedder",
    "EmbedderDescriptor",
    "Vectors",
    "embed_checked",
    "unnormalised_row",
]

#: Stored vectors of several memories, as a store reads them and a reranker receives them: the
#: read-only ``n × d`` float32 matrix when every one has a vector, else one read-only vector or
#: ``None`` per memory, in order. The one definition (the store contract and the rerank seam
#: both use it).
Vectors = Sequence["np.ndarray | None"] | np.ndarray


def _positive(_inst: object, attr: attrs.Attribute[int], value: int) -> None:
    if not is_int(value) or value < 1:
        raise ValueError(
            f"EmbedderDescriptor.{attr.name} must be a positive integer, got {value!r}"
        )


def _weight(_inst: object, attr: attrs.Attribute[float | None], value: object) -> None:
    if value is None:
        return
    if not is_real(value) or value < 0:
        raise ValueError(
            f"EmbedderDescriptor.{attr.name} must be a finite number >= 0, got {value!r}"
        )


#: The vector channel's weight for an embedder that declares none (see ``fusion_weight``).
DEFAULT_FUSION_WEIGHT = 0.5
#: How the convex fusion may bring a channel's raw scores onto [0, 1] (described in
#: :mod:`rankseam.search.fusion`): ``max``, ``unit`` or ``minmax``.
FUSION_SCALES = ("max", "unit", "minmax")
#: The vector channel's scale for an embedder that declares none (see ``fusion_scale``).
DEFAULT_FUSION_SCALE = "unit"


@attrs.frozen
class EmbedderDescriptor:
    """Pins a vector space: two embedders with equal keys produce comparable vectors.

    ``revision`` pins the model or algorithm version (a model hash, a package version...).
    ``normalization`` is ``"l2"`` (unit vectors) or ``"none"``.

    ``fusion_weight`` is how much the vector channel's cosine counts in the default
    ``convex`` fusion, next to the lexical channel's BM25 at weight 1: about 1 for a model
    whose cosine alone ranks about as well as BM25, less for a weak (lexical-like) embedder.
    ``None`` (not declared) gets :data:`DEFAULT_FUSION_WEIGHT`.

    ``fusion_scale`` is how that fusion brings the cosine onto [0, 1]: ``"unit"`` (the cosine
    as it is, clipped at 0; right when an unrelated text scores near 0, as with hashed
    n-grams) or ``"minmax"`` (stretched over the query's vector hits, best 1 and worst 0;
    right for a semantic model whose cosines crowd into a narrow band, where even unrelated
    texts score 0.1-0.3). ``None`` (not declared) gets :data:`DEFAULT_FUSION_SCALE`.

    Both say how to *use* the space, not what the space is: they are not part of :attr:`key`,
    of equality or of :meth:`to_dict`, so changing them never makes stored vectors
    incomparable.
    """

    name: str
    dimensions: int = attrs.field(validator=_positive)
    normalization: str = attrs.field(default="l2", validator=attrs.validators.in_(("l2", "none")))
    revision: str = "1"
    fusion_weight: float | None = attrs.field(default=None, eq=False, validator=_weight)
    fusion_scale: str | None = attrs.field(
        default=None,
        eq=False,
        validator=attrs.validators.optional(attrs.validators.in_(FUSION_SCALES)),
    )

    @property
    def key(self) -> str:
        return f"{self.name}@{self.revision}/d{self.dimensions}/{self.normalization}"

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "dimensions": self.dimensions,
            "normalization": self.normalization,
            "revision": self.revision,
            "key": self.key,
        }


@runtime_checkable
class Embedder(Protocol):
    """``embed`` returns a float32 array of shape ``(len(texts), descriptor.dimensions)``."""

    descriptor: EmbedderDescriptor

    def embed(self, texts: Sequence[str], /) -> np.ndarray: ...


def embed_checked(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """``embedder.embed(texts)`` as float32, refused unless it has one row of the descriptor's
    dimensions per text and every value is finite (no NaN, no infinity, also none from a value
    too large for float32)."""
    with np.errstate(over="ignore"):  # a value too large for float32 becomes inf: refused below
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    dims = embedder.descriptor.dimensions
    if vectors.shape != (len(texts), dims):
        raise ConfigurationError(
            f"embedder {embedder.descriptor.name!r} returned shape {vectors.shape}, expected "
            f"({len(texts)}, {dims}); fix the embedder"
        )
    if _plainly_valid(vectors, embedder.descriptor):
        return vectors
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        row = int(np.argmin(finite))
        raise ConfigurationError(
            f"embedder {embedder.descriptor.name!r} returned a vector with NaN or infinite "
            f"values (for text {row + 1} of {len(texts)}); nothing was stored: fix the embedder"
        )
    bad = unnormalised_row(vectors, embedder.descriptor)
    if bad is not None:
        raise ConfigurationError(
            f"embedder {embedder.descriptor.name!r} declares L2-normalised vectors "
            f"(normalization='l2') but returned one of norm {bad[1]:.6g} (for text "
            f"{bad[0] + 1} of {len(texts)}); nothing was stored: normalise the vectors, or "
            "declare normalization='none'"
        )
    return vectors


#: How far from 1 the norm of a vector of an L2-normalised space may be (float32 rounding
#: and quantised models stay far inside it).
UNIT_NORM_TOLERANCE = 1e-2


def _plainly_valid(vectors: np.ndarray, descriptor: EmbedderDescriptor) -> bool:
    """Whether every row of ``vectors`` (float32) is plainly valid, told by one sum of squares
    per row: a finite sum means finite values, and (an L2-normalised space) a sum within
    :data:`UNIT_NORM_TOLERANCE` of 1 a norm within half of it, far beyond float32 rounding.
    False says nothing: :func:`embed_checked`'s own checks then decide (a zero vector, a norm
    near the tolerance, a value that is not finite or whose square is not)."""
    squares = np.einsum("ij,ij->i", vectors, vectors).tolist()
    if descriptor.normalization != "l2":
        return all(map(math.isfinite, squares))
    return all(abs(square - 1.0) <= UNIT_NORM_TOLERANCE for square in squares)


def unnormalised_row(
    vectors: np.ndarray, descriptor: EmbedderDescriptor
) -> tuple[int, float] | None:
    """The first row of ``vectors`` (and its norm) that an L2-normalised space cannot hold: a
    norm more than :data:`UNIT_NORM_TOLERANCE` from 1 (a zero vector is allowed: it scores 0).
    None when every row fits, or when the space is not L2-normalised. Every way a vector
    enters a store checks it (embedding, re-embedding, snapshot verify and import), so that
    no store's index meets a value it cannot hold (a unit vector's components are within
    [-1, 1])."""
    if descriptor.normalization != "l2" or vectors.size == 0:
        return None
    norms = np.linalg.norm(np.asarray(vectors, dtype=np.float64).reshape(len(vectors), -1), axis=1)
    wrong = (np.abs(norms - 1.0) > UNIT_NORM_TOLERANCE) & (norms != 0.0)
    if not wrong.any():
        return None
    row = int(np.argmax(wrong))
    return row, float(norms[row])
