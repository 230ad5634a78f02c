"""The vector channel: cosine over the stored vectors of the active embedder's space, on every
store (``rankseam.plugin.stores.VectorReader``); the store computes the cosines, this module
declares how fusion scales and weighs them (as the embedder declares)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rankseam.errors import ValidationError
from rankseam.plugin import CandidateSourceRegister, hookimpl, option, parse_options
from rankseam.plugin.channels import (
    DEFAULT_FUSION_SCALE,
    DEFAULT_FUSION_WEIGHT,
    ScoredKey,
    ScoreSpec,
    SourceRequest,
)
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam.plugin.stores import ScoredKeys, VectorReader

__all__ = ["VectorOptions", "VectorSource", "unit_query"]


def unit_query(query: np.ndarray, descriptor: EmbedderDescriptor) -> np.ndarray:
    """``query`` as the stores compare it: float32, of the space's dimensions, and of unit
    length (a space that is not L2-normalised gets it divided by its norm here; an
    L2-normalised space's vectors are compared as the embedder made them)."""
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if q.shape[0] != descriptor.dimensions:
        raise ValidationError(
            f"query vector has {q.shape[0]} dimensions; the space {descriptor.key!r} has "
            f"{descriptor.dimensions}"
        )
    if descriptor.normalization != "l2":
        norm = float(np.linalg.norm(q))
        q = q / norm if norm > 0 else q
    return q


class VectorSource:
    """Cosine similarity, computed by the store (``VectorReader.vector``; the SQLite store: one
    numpy matrix-vector product over a cached float32 matrix).

    Only vectors of ``request.embedder``'s space are compared: memories without a vector in
    that space are invisible to this channel (``rankseam reembed`` fills them in).

    Fusion scales the cosine and weighs it as the embedder declares
    (``EmbedderDescriptor.fusion_scale`` and ``fusion_weight``; undeclared: the cosine as it is,
    clipped to [0, 1], at ``DEFAULT_FUSION_WEIGHT``).
    """

    admits = True
    needs_query_vector = True
    reads = (VectorReader,)

    def __init__(self, *, min_score: float | None = None) -> None:
        self.min_score = min_score

    def score_spec(self, embedder: EmbedderDescriptor | None, /) -> ScoreSpec:
        weight = None if embedder is None else embedder.fusion_weight
        scale = None if embedder is None else embedder.fusion_scale
        return ScoreSpec(
            scale=DEFAULT_FUSION_SCALE if scale is None else scale,
            weight=DEFAULT_FUSION_WEIGHT if weight is None else weight,
        )

    def candidates(self, request: SourceRequest, /) -> Sequence[ScoredKey]:
        if request.query_vector is None or request.embedder is None:
            return []
        query = unit_query(request.query_vector, request.embedder)
        if request.where is None:
            hits = request.reader.vector(request.namespace, request.embedder, query, request.k)
        else:
            hits = request.reader.vector(
                request.namespace, request.embedder, query, request.k, where=request.where
            )
        if self.min_score is not None:
            if not isinstance(hits, ScoredKeys):
                hits = ScoredKeys.of(hits)
            keep = hits.scores >= self.min_score
            hits = ScoredKeys(hits.row_keys[keep], hits.scores[keep])
        return hits

    @classmethod
    def from_options(cls, options: VectorOptions | Mapping[str, Any]) -> VectorSource:
        """The source of ``[sources.vector]`` options (checked, or a table to check)."""
        if not isinstance(options, VectorOptions):
            options = parse_options(VectorOptions, options, "sources.vector")
        return cls(min_score=options.min_score)


@attrs.frozen
class VectorOptions:
    """The options of the ``vector`` source (``[sources.vector]``)."""

    # a cosine is in [-1, 1]: a cut-off above 1 would drop every candidate (the channel
    # silently off), one below -1 none
    min_score: float | None = option(
        None,
        ge=-1,
        le=1,
        help="drop candidates whose cosine is below this; a cosine is in [-1, 1] (unset: keep all)",
    )


def _vector(options: VectorOptions, context: object) -> VectorSource:
    return VectorSource.from_options(options)


@hookimpl
def register_candidate_sources(register: CandidateSourceRegister) -> None:
    """Registers this channel, on every store (its reader protocol is part of every store's)."""
    register(
        "vector",
        _vector,
        summary="cosine over stored vectors of the active embedder",
        options=VectorOptions,
    )
