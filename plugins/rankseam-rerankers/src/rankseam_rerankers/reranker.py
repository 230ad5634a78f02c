"""The ``rerankers`` reranker: a ranker of the rerankers library behind the seam.

The pool's texts go to the library with document ids ``0..n-1``; its ranked results come back
as ranks by those ids (``rank = doc_id + 1``), never by text, so identical texts keep their own
positions. The library's order is the decision and its scores are the per-rank scores; the
first ``limit`` results are the answer. Whatever the library gets wrong goes through the seam's
rules like any plugin's answer: a repeated document, an id that was never given, or a score
that is not a finite number discards that rank (status ``repaired``); documents the library
dropped are counted as discarded too; an exception fails the search (or ``degraded`` with
``on_error="coarse"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rankseam.errors import RerankError
from rankseam.plugin import is_int
from rankseam.types import Candidate, RerankDecision, Usage
from rankseam_rerankers.library import DETERMINISTIC_RANKERS, LoadedRanker, load_ranker
from rankseam_rerankers.options import RerankersOptions

__all__ = ["POLICY_ID", "RerankersReranker", "decision_from_results"]

POLICY_ID = "rankseam.rerank.rerankers.v1"


def _results_list(results: Any) -> list[Any]:
    items = getattr(results, "results", results)
    if isinstance(items, str | bytes) or not isinstance(items, Sequence):
        raise RerankError(
            f"the rerankers library returned {type(results).__name__}, not ranked results",
            policy_id=POLICY_ID,
            reason="invalid_output",
        )
    return list(items)


def decision_from_results(results: Any, n: int, limit: int, usage: Usage) -> RerankDecision:
    """Translate the library's ranked results for documents ``0..n-1`` into the seam's answer.

    Each result becomes rank ``doc_id + 1`` in the library's order (an id that is not an
    integer is passed on as it is, and the seam discards it); scores are passed when the
    library says it has them. The first ``limit`` results are the answer; documents that no
    result names are counted in ``discarded_rank_count``.
    """
    items = _results_list(results)
    has_scores = bool(getattr(results, "has_scores", False))
    ranks: list[Any] = []
    scores: list[Any] = []
    named: set[int] = set()
    for item in items:
        doc_id = getattr(getattr(item, "document", None), "doc_id", None)
        if is_int(doc_id):
            if 0 <= doc_id < n:
                named.add(doc_id)
            rank: Any = doc_id + 1
        else:
            rank = doc_id
        if len(ranks) < limit:
            ranks.append(rank)
            scores.append(getattr(item, "score", None))
    return RerankDecision(
        tuple(ranks),
        usage=usage,
        discarded_rank_count=n - len(named),
        scores=tuple(scores) if has_scores else None,
    )


class RerankersReranker:
    """A relevance reranker: one loaded ranker of the rerankers library (shared per process
    and configuration), called once per search with the whole pool."""

    policy_id = POLICY_ID
    needs_embeddings = False

    def __init__(self, options: RerankersOptions, loaded: LoadedRanker | None = None) -> None:
        self.options = options
        self.loaded = loaded if loaded is not None else load_ranker(options)
        declared = options.deterministic
        self.deterministic = (
            declared if declared is not None else self.loaded.kind in DETERMINISTIC_RANKERS
        )
        # A local model makes no billable call; a hosted API or an LLM ranker makes at least
        # one, whose tokens the library does not report.
        self._usage = (
            Usage.zero() if self.loaded.kind in DETERMINISTIC_RANKERS else Usage(1, None, None)
        )
        self.descriptor = {
            "library": "rerankers",
            "library_version": self.loaded.library_version,
            "ranker": self.loaded.kind,
            "model": options.model,
            "model_type": options.model_type,
            "device": _device_of(self.loaded.ranker, options.device),
            "batch_size": options.batch_size,
            "max_length": options.max_length,
        }

    @property
    def ranker(self) -> Any:
        """The library's ranker object (the same one for every reranker of this configuration
        in the process)."""
        return self.loaded.ranker

    def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> RerankDecision:
        n = len(candidates)
        if n == 0:
            return RerankDecision((), usage=Usage.zero())
        texts = [c.text for c in candidates]
        results = self.loaded.rank(query, texts)
        return decision_from_results(results, n, limit, self._usage)

    def __repr__(self) -> str:
        return f"RerankersReranker(model={self.options.model!r}, ranker={self.loaded.kind!r})"


def _device_of(ranker: Any, configured: str | None) -> str | None:
    device = getattr(ranker, "device", None)
    return str(device) if device is not None else configured
