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
- Ties: scores within 1e-9 of a round's best tie with it; ties go to the lower coarse
  position, then the lower identity bytes (:meth:`rankseam.MemoryRef.sort_key`).
- Pool: 1..200 candidates (the host's coarse-pool bound, :data:`rankseam.seam.MAX_POOL`).
"""

from __future__ import annotations

import itertools
import logging
import typing
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import attrs
import numpy as np

from rankseam.errors import ConfigurationError, ValidationError
from rankseam.plugin import option, parse_options
from rankseam.plugin.rerankers import MAX_POOL, CandidateViews
from rankseam.types import Candidate, CandidateRecord, RerankDecision, Usage
from rankseam_mmr.algorithm import minmax, select, select_raw, unit_rows

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
#: Chosen from the LoCoMo evidence in docs/plugins/mmr.md (under the convex fusion and the
#: hashed embedder, the only λ of the grid 0.45-0.65 that removes at least 40% of the coarse
#: top 5's duplicate slots at no more than 0.01 Recall@5 loss).
DEFAULT_LAMBDA = 0.51
Relevance = Literal["coarse", "query_cosine"]
RELEVANCE_CHOICES: tuple[str, ...] = typing.get_args(Relevance)
MAX_CANDIDATES = MAX_POOL


@attrs.frozen
class MMROptions:
    """The options of the ``mmr`` reranker (``[rerankers.mmr]``, ``--mmr-<option>``)."""

    lam: float = option(
        DEFAULT_LAMBDA,
        key="lambda",
        ge=0,
        le=1,
        help="1 = pure relevance (the coarse order), 0 = pure diversity",
    )
    relevance: Relevance = option(
        "coarse",
        help="'coarse': the normalised coarse score; 'query_cosine': the cosine to the query",
    )

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> MMROptions:
        """The options of the ``[rerankers.mmr]`` table ``options``, checked."""
        return parse_options(cls, options, "rerankers.mmr")


Space = tuple[str | None, int]

#: Shared by every record: mmr makes no model call.
_NO_USAGE = Usage.zero()
#: A selected candidate's record detail (``%`` formatting: the cheapest for floats).
_DETAIL = "rel=%.6f redundancy=%.6f mmr=%.6f rel_source=%s"


def _reference_space(keys: Sequence[Space | None]) -> Space | None:
    """The (space, dimension) pair most candidates share; first seen wins a tie."""
    present = [key for key in keys if key is not None]
    if not present:
        return None
    first = present[0]
    if all(key == first for key in present):  # the usual case: one space
        return first
    counts = Counter(present)
    best = max(counts.values())
    return next(key for key in counts if counts[key] == best)  # insertion = coarse order


def _space_key(c: Candidate) -> Space | None:
    e = c.embedding
    if e is None or e.shape[0] == 0:
        return None
    return (c.embedding_space, e.shape[0])


def _in_tie_break_order(candidates: Sequence[Candidate]) -> Sequence[Candidate]:
    """Coarse position, then identity bytes (already so when the seam built the views)."""
    if isinstance(candidates, CandidateViews):  # ranks 1..n by construction
        return candidates
    ranks = [c.rank for c in candidates]
    if ranks == list(range(ranks[0], ranks[0] + len(ranks))):  # the seam's 1..n: cheap check
        return candidates
    if all(a < b for a, b in itertools.pairwise(ranks)):
        return candidates
    return sorted(candidates, key=lambda c: (c.rank, c.ref.sort_key()))


def _one_space_matrix(ordered: Sequence[Candidate]) -> np.ndarray | None:
    """The float64 ``n × d`` matrix of the vectors when every candidate has one, all of one
    (space, dimension) pair (the usual case: one batched fetch); else ``None``."""
    if isinstance(ordered, CandidateViews):  # the seam's views: one space, read as arrays
        stacked = ordered.embeddings()
        return None if stacked is None else stacked.astype(np.float64)
    vectors = [c.embedding for c in ordered]
    try:
        dims = set(map(len, vectors))  # type: ignore[arg-type]
    except TypeError:  # a missing vector (None)
        return None
    space = ordered[0].embedding_space
    if any(c.embedding_space != space for c in ordered):
        return None
    if len(dims) != 1:
        return None
    d = dims.pop()
    if d == 0:
        return None
    flat = np.concatenate(vectors, dtype=np.float64)  # type: ignore[arg-type]
    return flat.reshape(len(vectors), d)


def _coarse_relevance(ordered: Sequence[Candidate]) -> np.ndarray:
    """The coarse scores min-max normalised within the pool (:func:`minmax`)."""
    if isinstance(ordered, CandidateViews):
        return minmax(ordered.scores())
    return minmax(np.fromiter((c.score for c in ordered), np.float64, len(ordered)))


def _unit_vectors(ordered: Sequence[Candidate]) -> tuple[np.ndarray, np.ndarray, Space | None]:
    """The general path: unit rows (zero rows for unusable vectors), which rows are usable,
    and the reference (space, dimension) pair."""
    n = len(ordered)
    keys = [_space_key(c) for c in ordered]
    ref = _reference_space(keys)
    if ref is None:
        return np.zeros((n, 0), dtype=np.float64), np.zeros(n, dtype=bool), None
    valid = np.fromiter((key == ref for key in keys), dtype=bool, count=n)
    if valid.all():
        matrix = np.array([c.embedding for c in ordered], dtype=np.float64)
    else:
        matrix = np.zeros((n, ref[1]), dtype=np.float64)
        matrix[valid] = [c.embedding for c, ok in zip(ordered, valid, strict=True) if ok]
    # zero-norm and non-finite vectors count as missing too
    unit, valid = unit_rows(matrix, valid, in_place=True)
    return unit, valid, ref


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
                "reranker through the configuration (its factory receives the assembly context) or "
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
        if self._query_space() is not None:
            out["query_embedder"] = self._query_space()
        return out

    @property
    def needs_event_loop(self) -> bool:
        """Only ``query_cosine`` awaits (it embeds the query in a worker thread); otherwise a
        synchronous search runs mmr inline."""
        return self.options.relevance == "query_cosine"

    def _query_space(self) -> str | None:
        key = getattr(getattr(self.embedder, "descriptor", None), "key", None)
        return key if isinstance(key, str) else None

    def _fits(self, space: str | None) -> bool:
        """Can the query vector be compared with candidate vectors of ``space``?"""
        return space is None or self._query_space() in (None, space)

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        query_vector = None
        if self.options.relevance == "query_cosine" and candidates:
            import asyncio  # on first use: loading the plugin does not import asyncio

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
        ordered = _in_tie_break_order(candidates)
        rel_source = "coarse"
        missing: frozenset[int] = frozenset()
        matrix = _one_space_matrix(ordered) if query_vector is None else None
        picked = None
        if matrix is not None:
            # the fast path (every vector present, of one space and dimension): cosines are
            # normalised through the similarity rows; None if a vector is zero or non-finite
            picked = select_raw(_coarse_relevance(ordered), matrix, self.options.lam, k)
        if picked is None:  # the general path
            unit, valid, ref = _unit_vectors(ordered)
            missing = frozenset(np.flatnonzero(~valid).tolist())
            rel = None
            if query_vector is not None:
                q_rows, q_ok = unit_rows(query_vector.reshape(1, -1), np.ones(1, dtype=bool))
                q = q_rows[0]
                if ref is not None and q.shape[0] == ref[1] and q_ok[0] and self._fits(ref[0]):
                    rel = minmax(unit @ q)
                    rel_source = "query_cosine"
                else:
                    log.warning(
                        "mmr: query vector incompatible with the candidate vectors; using "
                        "coarse relevance",
                        extra={"policy_id": POLICY_ID, "reason": "query_vector_incompatible"},
                    )
            if rel is None:
                rel = _coarse_relevance(ordered)
            picked = select(rel, unit, self.options.lam, k)
        ranks = []
        records = []
        in_place = isinstance(ordered, CandidateViews)  # rank = position + 1, no view built
        for i, r, d, s in zip(
            picked.indices, picked.relevance, picked.redundancy, picked.scores, strict=True
        ):
            rank = i + 1 if in_place else ordered[i].rank
            ranks.append(rank)
            detail = _DETAIL % (r, d, s, rel_source)
            if i in missing:
                detail += " vector=missing"
            # positional: rank, outcome, latency_ms, usage, detail
            records.append(CandidateRecord(rank, "selected", 0.0, _NO_USAGE, detail))
        # attrs types converter=tuple fields as Iterable[_T_co] (core issue); the values are right
        return RerankDecision(tuple(ranks), records=tuple(records))
