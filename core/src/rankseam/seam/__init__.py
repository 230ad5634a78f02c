"""The rerank seam: the only place where plugin output meets stored memories.

Rules (docs/seam.md), enforced here whatever the plugin does:

- The reranker is called only when one is assembled and the pool is non-empty, with
  ``limit = min(requested limit, pool size)`` and read-only :class:`~rankseam.types.Candidate`
  views whose text is cut to ``max_chars``.
- Its answer must be a :class:`~rankseam.types.RerankDecision`. Each selected element that is
  not an integer in ``1..n`` (bools and strings included), or repeats an earlier rank, is
  discarded and counted; at most ``limit`` valid ranks are kept, in the plugin's order. Elements
  after the ``limit``-th kept rank are ignored but counted (``over_limit_count``) and named in
  the trace's reason, so a reranker that over-answers can be spotted.
- Optional per-rank ``scores`` pair with ``selected_ranks`` position for position: a scores
  tuple of another length is invalid output (a failure, below); a score that is not a finite
  real number makes its rank invalid (discarded and counted). Kept scores go on the hits
  (``Hit.rerank_score``) and into the trace; they never change the order.
- If no valid rank remains, the coarse ranks ``1..min(limit, n)`` are used and
  ``used_fallback=True`` (status ``fell_back``). A reranker that says ``used_fallback=True``
  must answer the coarse ranks ``1..j`` (or nothing); other ranks with that flag are invalid
  output (a failure, below). Whenever coarse ranks are used (fallback or ``degraded``) no
  reranker score is shown.
- Ranks resolve to the original hits: a plugin can never invent or alter an identity.
- Every reranker has a deadline (``deadline_s``, default :data:`DEFAULT_RERANK_DEADLINE_S`).
  At the deadline the reranker is cancelled, given :data:`CANCEL_GRACE_S` to end, and then
  abandoned; the search goes on without it. A synchronous ``rerank`` runs in a thread of its
  own, so a blocking one is abandoned too (Python cannot stop a thread: it runs on until it
  returns, and its answer is discarded).
- A failing reranker (any exception -- ``SystemExit``, ``KeyboardInterrupt`` and a
  ``CancelledError`` it raises itself included --, the deadline, or an answer of the wrong
  type) raises :class:`~rankseam.errors.RerankError` by default (``on_error="fail_closed"``,
  also spelt ``"raise"``). With ``on_error="fail_open"`` (or ``"coarse"``) the coarse order is
  returned with status ``degraded``, the reason and a warning log. The stage is one governed
  call (:mod:`rankseam.governed`). A cancellation of the search itself always propagates. So
  does a plugin that stops the host's event loop: the stage it ran in fails under the same
  policy.
- A reranker may be a chain (:mod:`rankseam.seam.chain`): each stage a governed call over the
  previous stage's selection, with its own policy, deadline and trace entry.

The seam is a package; each module holds one concern:

- :mod:`rankseam.seam.validation` -- bounds, the "no reranker" vocabulary, argument checks,
  rank normalisation and the check of a reranker's answer;
- :mod:`rankseam.seam.views` -- the read-only candidate views a reranker receives;
- :mod:`rankseam.seam.running` -- the reranker made ready once, the rerank stage of one search
  (deadline, where it runs, failure policy) and :func:`rerank_pool`;
- :mod:`rankseam.seam.results` -- the final hits and the stage's trace, for an answer or a failure;
- :mod:`rankseam.seam.chain` -- reranker chains: the stages a choice names, and their run.
"""

from __future__ import annotations

from rankseam.seam.chain import (
    ChainLink,
    ChainRun,
    RerankChain,
    RerankerSpec,
    chain_of,
    chain_trace,
    reranker_specs,
)
from rankseam.seam.results import describe, trace_candidates
from rankseam.seam.running import (
    CANCEL_GRACE_S,
    DEADLINE_MARGIN_S,
    Reranker,
    RerankStage,
    SeamReranker,
    as_async_reranker,
    check_reranker,
    expired_rerank,
    prepare_reranker,
    rerank_pool,
    runs_inline,
)
from rankseam.seam.validation import (
    DEFAULT_MAX_CHARS,
    DEFAULT_POOL,
    DEFAULT_RERANK_DEADLINE_S,
    MAX_POOL,
    MIN_POOL,
    NO_RERANKER,
    OnError,
    normalize_ranks,
    normalize_scored_ranks,
    reranker_choice,
    validate_deadline,
    validate_limit,
    validate_on_error,
    validate_pool_size,
)
from rankseam.seam.views import CandidateViews, VectorFetcher, Vectors, make_candidates

__all__ = [
    "CANCEL_GRACE_S",
    "DEADLINE_MARGIN_S",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_POOL",
    "DEFAULT_RERANK_DEADLINE_S",
    "MAX_POOL",
    "MIN_POOL",
    "NO_RERANKER",
    "CandidateViews",
    "ChainLink",
    "ChainRun",
    "OnError",
    "RerankChain",
    "RerankStage",
    "Reranker",
    "RerankerSpec",
    "SeamReranker",
    "VectorFetcher",
    "Vectors",
    "as_async_reranker",
    "chain_of",
    "chain_trace",
    "check_reranker",
    "describe",
    "expired_rerank",
    "make_candidates",
    "normalize_ranks",
    "normalize_scored_ranks",
    "prepare_reranker",
    "rerank_pool",
    "reranker_choice",
    "reranker_specs",
    "runs_inline",
    "trace_candidates",
    "validate_deadline",
    "validate_limit",
    "validate_on_error",
    "validate_pool_size",
]
