"""The ``mmr`` reranker: options, candidate vectors, and the rerank call.

Conventions (documented once, here and in docs/plugins/mmr.md):

- ``lambda`` in [0, 1]: **1 = pure relevance** (the coarse order), **0 = pure diversity**.
  0.0 is a valid value and is honoured.
- ``relevance = "coarse"`` (default): the coarse (fused) score min-max normalised within the
  pool; a constant pool gets 1.0 everywhere. ``relevance = "query_cosine"``: the cosine between
  the query vector (from the configured embedder) and each candidate vector, min-max normalised
  the same way.
- Similarity: cosine between the stored vectors the host attaches to the candidate views (one
  batched fetch; nothing is re-embedded). A candidate whose vector is missing (``None``), of
  another embedding space or dimension than the pool's reference space, non-finite or of zero
  norm has similarity 0 to everything. The reference space is the (space, dimension) pair
  most candidates share; ties go to the pair seen first in coarse order.
- Ties: equal MMR scores (compared at 9 decimals) are broken by coarse position, then by
  identity bytes (:meth:`rankseam.MemoryRef.sort_key`).
- Pool: 1..200 candidates (the host's coarse-pool bound, :data:`rankseam.seam.MAX_POOL`).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.seam import MAX_POOL
from rankseam.types import Candidate, CandidateRecord, RerankDecision

from rankseam_mmr.algorithm import minmax, select, unit_rows

__all__ = [
    "DEFAULT_LAMBDA",
    "MAX_CANDIDATES",
    "POLICY_ID",
    "RELEVANCE_CHOICES",
    "MMROptions",
    "MMRReranker",
]

log = logging.getLogger("rankseam_mmr")

#: Versioned policy id; bump the version whenever the selection behaviour changes.
POLICY_ID = "rankseam.rerank.mmr.v1"
#: Chosen from the LoCoMo evidence in docs/plugins/mmr.md.
DEFAULT_LAMBDA = 0.7
RELEVANCE_CHOICES = ("coarse", "query_cosine")
MAX_CANDIDATES = MAX_POOL
_KNOWN_OPTIONS = ("lambda", "relevance")


def _lambda(_inst: object, _attr: object, value: object) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0.0 <= value <= 1.0
    ):
        raise ConfigurationError(
            f"mmr option 'lambda' must be a number in [0, 1] (1 = pure relevance, 0 = pure "
            f"diversity), got {value!r}; e.g. [rerankers.mmr] lambda = {DEFAULT_LAMBDA} or "
            f"--mmr-lambda {DEFAULT_LAMBDA}"
        )


def _relevance(_inst: object, _attr: object, value: object) -> None:
    if value not in RELEVANCE_CHOICES:
        raise ConfigurationError(
            f"mmr option 'relevance' must be one of {list(RELEVANCE_CHOICES)}, got {value!r}; "
            "'coarse' uses the normalised coarse score, 'query_cosine' the cosine to the query "
            "vector (e.g. --mmr-relevance query_cosine)"
        )


@attrs.frozen
class MMROptions:
    """Validated options of the ``mmr`` reranker."""

    lam: float = attrs.field(default=DEFAULT_LAMBDA, validator=_lambda)
    relevance: str = attrs.field(default="coarse", validator=_relevance)

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> MMROptions:
        unknown = sorted(set(options) - set(_KNOWN_OPTIONS))
        if unknown:
            raise ConfigurationError(
                f"unknown mmr option(s) {unknown}; known options are {list(_KNOWN_OPTIONS)} "
                "(e.g. [rerankers.mmr] lambda = 0.7, relevance = 'coarse')"
            )
        lam = options.get("lambda", DEFAULT_LAMBDA)
        _lambda(None, None, lam)
        return cls(lam=float(lam), relevance=options.get("relevance", "coarse"))


def _reference_space(ordered: Sequence[Candidate]) -> tuple[str | None, int] | None:
    """The (space, dimension) pair most candidates share; first seen wins a tie."""
    counts: Counter[tuple[str | None, int]] = Counter()
    for c in ordered:
        if c.embedding is not None and c.embedding.ndim == 1 and c.embedding.shape[0] > 0:
            counts[(c.embedding_space, int(c.embedding.shape[0]))] += 1
    if not counts:
        return None
    best = max(counts.values())
    return next(pair for pair in counts if counts[pair] == best)  # insertion = coarse order


@attrs.frozen
class MMRReranker:
    """Maximal marginal relevance over the coarse pool (see the module docstring)."""

    policy_id: ClassVar[str] = POLICY_ID
    deterministic: ClassVar[bool] = True
    needs_embeddings: ClassVar[bool] = True

    options: MMROptions = attrs.field(factory=MMROptions)
    embedder: Any = attrs.field(default=None, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.options.relevance == "query_cosine" and self.embedder is None:
            raise ConfigurationError(
                "mmr relevance 'query_cosine' needs an embedder for the query; build the "
                "reranker through the configuration (rankseam.compose.ComponentContext) or "
                "pass embedder=..."
            )

    @property
    def descriptor(self) -> Mapping[str, Any]:
        out: dict[str, Any] = {
            "name": "mmr",
            "lambda": self.options.lam,
            "relevance": self.options.relevance,
            "similarity": "cosine(stored vectors)",
            "max_candidates": MAX_CANDIDATES,
        }
        if self.embedder is not None:
            desc = getattr(self.embedder, "descriptor", None)
            key = getattr(desc, "key", None)
            if isinstance(key, str):
                out["query_embedder"] = key
        return out

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        query_vector = None
        if self.options.relevance == "query_cosine" and candidates:
            embedded = await asyncio.to_thread(self.embedder.embed, [query])
            query_vector = np.asarray(embedded, dtype=np.float64).reshape(-1)
        return self.select(candidates, limit, query_vector=query_vector)

    def select(
        self,
        candidates: Sequence[Candidate],
        limit: int,
        *,
        query_vector: np.ndarray | None = None,
    ) -> RerankDecision:
        """The synchronous core of :meth:`rerank` (no I/O)."""
        n = len(candidates)
        if n > MAX_CANDIDATES:
            raise ValidationError(
                f"mmr reranks at most {MAX_CANDIDATES} candidates (the host's coarse-pool "
                f"bound), got {n}; lower the pool size"
            )
        k = max(0, min(int(limit), n))
        if k == 0:
            return RerankDecision(())
        ordered = sorted(candidates, key=lambda c: (c.rank, c.ref.sort_key()))
        ref = _reference_space(ordered)
        valid = np.zeros(n, dtype=bool)
        if ref is None:
            matrix = np.zeros((n, 0), dtype=np.float64)
        else:
            space, dims = ref
            matrix = np.zeros((n, dims), dtype=np.float64)
            for i, c in enumerate(ordered):
                e = c.embedding
                if e is not None and c.embedding_space == space and e.shape == (dims,):
                    matrix[i] = e
                    valid[i] = True
        unit = unit_rows(matrix, valid)
        valid &= unit.any(axis=1)  # zero-norm and non-finite vectors count as missing
        rel_source = "coarse"
        if query_vector is not None:
            q = unit_rows(query_vector.reshape(1, -1), np.ones(1, dtype=bool))[0]
            if ref is not None and q.shape[0] == unit.shape[1] and q.any():
                rel = minmax(unit @ q)
                rel_source = "query_cosine"
            else:
                log.warning(
                    "mmr: query vector incompatible with the candidate vectors; using coarse "
                    "relevance",
                    extra={"policy_id": POLICY_ID, "reason": "query_vector_incompatible"},
                )
        if rel_source == "coarse":
            rel = minmax(np.fromiter((c.score for c in ordered), dtype=np.float64, count=n))
        picked = select(rel, unit, self.options.lam, k)
        ranks = tuple(ordered[i].rank for i in picked.indices)
        records = tuple(
            CandidateRecord(
                rank=ordered[i].rank,
                outcome="selected",
                detail=(
                    f"rel={r:.6f} redundancy={d:.6f} mmr={s:.6f} rel_source={rel_source}"
                    + ("" if valid[i] else " vector=missing")
                ),
            )
            for i, r, d, s in zip(
                picked.indices, picked.relevance, picked.redundancy, picked.scores, strict=True
            )
        )
        # attrs types converter=tuple fields as Iterable[_T_co] (core issue); the values are right
        return RerankDecision(ranks, records=records)  # type: ignore[arg-type]
