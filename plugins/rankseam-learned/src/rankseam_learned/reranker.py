"""The ``learned`` reranker: a model's probability for every pool candidate, best first.

For each search it computes the feature rows of the whole pool
(:func:`rankseam_learned.features.compute`, with the neighbours and vectors it asks the host
for), scores them with the model's ``rerank`` head, and orders the pool by that probability
(ties: the coarse order), blended with the coarse order by the model file's weight
(:func:`blended_order`; a model trained where its order alone does best has weight 1, and the
order is the probability's). Then the source-aware rule (option ``distinct_sources``, on by
default): a candidate whose source group -- the memory it was derived from, or itself --
already sits higher goes below the first candidate of every group, in order. It is the rule
of the host's ``distinct_sources`` (docs/store.md, "Source-aware selection"), implemented
here again because the host's function is not part of the plugin API; the host applies its
own to the coarse pool, before the reranker, and the reranker's new order needs it again.

Policy id: ``rankseam.rerank.learned.v1`` with the first 16 hex digits of the model file's
SHA-256 (``rankseam.rerank.learned.v1+sha256:0123456789abcdef``): another model is another
policy. The descriptor names the model, its checksum, its kind and feature set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import numpy as np

from rankseam.errors import ValidationError
from rankseam.plugin import option, parse_options
from rankseam.plugin.rerankers import MAX_POOL
from rankseam.types import Candidate, CandidateRecord, RerankDecision, Usage
from rankseam_learned.features import NEIGHBOUR_WINDOW, compute
from rankseam_learned.installed import model_option, resolve_model
from rankseam_learned.model import RANK_CONSTANT, GradientBoostingHead, Model

__all__ = [
    "POLICY_VERSION",
    "LearnedOptions",
    "LearnedReranker",
    "blended_order",
    "spread_sources",
]

#: The reranker's policy; the model's checksum is appended (see the module docstring).
POLICY_VERSION = "rankseam.rerank.learned.v1"
_NO_USAGE = Usage.zero()


@attrs.frozen
class LearnedOptions:
    """The options of the ``learned`` reranker (``[rerankers.learned]``)."""

    model: str = model_option()
    distinct_sources: bool = option(
        True,
        help="a candidate whose source already sits higher goes below the others",
    )

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> LearnedOptions:
        return parse_options(cls, options, "rerankers.learned")


def spread_sources(order: Sequence[int], groups: Sequence[str]) -> list[int]:
    """``order`` (indices into ``groups``) with each index whose group already appeared
    moved below the first of every group, keeping their order."""
    seen: set[str] = set()
    first: list[int] = []
    repeats: list[int] = []
    for i in order:
        group = groups[i]
        if group in seen:
            repeats.append(i)
        else:
            seen.add(group)
            first.append(i)
    return first + repeats


def blended_order(
    p: np.ndarray, model_weight: float = 1.0, rank_constant: float = RANK_CONSTANT
) -> list[int]:
    """The pool's indices, best first: each candidate scores ``model_weight / (rank_constant +
    its rank by p) + (1 - model_weight) / (rank_constant + its coarse rank)`` (ranks from 0;
    ``p`` is in coarse order; ties in ``p`` and in the score: the coarse order). Weight 1 is
    the order of ``p`` alone, weight 0 the coarse order."""
    n = len(p)
    coarse = np.arange(n)
    by_model = np.lexsort((coarse, -p))
    if model_weight >= 1.0:
        return by_model.tolist()
    model_rank = np.empty(n, dtype=np.float64)
    model_rank[by_model] = coarse
    score = model_weight / (rank_constant + model_rank) + (1.0 - model_weight) / (
        rank_constant + coarse
    )
    return np.lexsort((coarse, -score)).tolist()


def model_descriptor(model: Model, label: str) -> dict[str, Any]:
    """What a descriptor says of ``model`` (no path beyond what the option gave)."""
    head = model.rerank
    out: dict[str, Any] = {
        "model": label,
        "model_sha256": model.sha256,
        "feature_set": model.feature_set,
        "kind": head.kind,
    }
    if isinstance(head, GradientBoostingHead):
        out["trees"] = head.n_trees
    return out


@attrs.frozen(eq=False)
class LearnedReranker:
    """Scores the pool with a learned model (see the module docstring)."""

    needs_event_loop: ClassVar[bool] = False
    needs_neighbours: ClassVar[tuple[int, int]] = NEIGHBOUR_WINDOW
    needs_embeddings: ClassVar[bool] = True
    deterministic: ClassVar[bool] = True

    model: Model
    label: str = "<model>"
    distinct_sources: bool = True

    @classmethod
    def from_options(cls, options: LearnedOptions | Mapping[str, Any]) -> LearnedReranker:
        """Load the model the options name (a :class:`~rankseam.errors.ConfigurationError`
        naming the file and the cause when it cannot be used)."""
        opts = (
            options if isinstance(options, LearnedOptions) else LearnedOptions.from_mapping(options)
        )
        model, label = resolve_model(opts.model)
        return cls(model, label, opts.distinct_sources)

    @property
    def policy_id(self) -> str:
        return f"{POLICY_VERSION}+sha256:{self.model.sha256[:16]}"

    @property
    def descriptor(self) -> Mapping[str, Any]:
        return {
            "name": "learned",
            **model_descriptor(self.model, self.label),
            "model_weight": self.model.model_weight,
            "distinct_sources": self.distinct_sources,
        }

    def probabilities(self, query: str, candidates: Sequence[Candidate]) -> np.ndarray:
        """The model's probability that each candidate is relevant, in pool order."""
        neighbours = (
            getattr(candidates, "neighbours", None) if _has_neighbours(candidates) else None
        )
        rows = compute(query, candidates, neighbours)
        p: np.ndarray = self.model.predict_proba(rows)[:, 1]
        return p

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        return self.select(query, candidates, limit)

    def select(self, query: str, candidates: Sequence[Candidate], limit: int) -> RerankDecision:
        """The synchronous core of :meth:`rerank` (no I/O)."""
        n = _bounded(len(candidates))
        k = min(int(limit), n)
        if k <= 0:
            return RerankDecision(())
        p = self.probabilities(query, candidates)
        order = blended_order(p, self.model.model_weight, self.model.rank_constant)
        if self.distinct_sources:
            groups = [
                c.derived_from if c.derived_from is not None else c.ref.memory_id
                for c in candidates
            ]
            order = spread_sources(order, groups)
        chosen = order[:k]
        ranks = tuple(candidates[i].rank for i in chosen)
        scores = tuple(float(p[i]) for i in chosen)
        records = tuple(
            CandidateRecord(rank, "selected", 0.0, _NO_USAGE, f"p={score:.6f}", score)
            for rank, score in zip(ranks, scores, strict=True)
        )
        return RerankDecision(ranks, records=records, scores=scores)


def _bounded(n: int) -> int:
    """``n`` when it is within the host's coarse-pool bound (the features' cost grows with
    the pool); a :class:`~rankseam.errors.ValidationError` otherwise."""
    if n <= MAX_POOL:
        return n
    raise ValidationError(
        f"the learned reranker scores at most {MAX_POOL} candidates (the host's coarse-pool "
        f"bound), got {n}; lower the pool size"
    )


def _has_neighbours(candidates: Sequence[Candidate]) -> bool:
    """Whether ``candidates`` carries neighbours (the seam's views of a reranker that asked;
    a plain sequence has none: the neighbourhood features are then 0)."""
    if not callable(getattr(candidates, "neighbours", None)) or not len(candidates):
        return False
    try:
        candidates.neighbours(0)  # type: ignore[attr-defined]
    except ValidationError:  # views built without neighbours
        return False
    return True
