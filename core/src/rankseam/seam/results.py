"""What a rerank stage answers: the final hits and the stage's trace, for a reranker's valid
answer (:func:`resolve`) and for its failure under the search's policy (:func:`refusal` when it
fails closed, :func:`degraded` when it fails open); and
the coarse pool as a trace records it (:func:`trace_candidates`). docs/seam.md, "Trace"."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from rankseam.errors import BackendError, RerankError
from rankseam.redaction import mask_secrets
from rankseam.seam.validation import normalize
from rankseam.types import (
    Hit,
    RerankDecision,
    RerankStatus,
    RerankTrace,
    TraceCandidate,
    Usage,
)

__all__ = [
    "Outcome",
    "deadline_error",
    "degradation",
    "degraded",
    "describe",
    "foreign_base_exception",
    "refusal",
    "resolve",
    "trace_candidates",
]

log = logging.getLogger("rankseam.seam")

#: The rerank stage's answer: the final hits and the stage's trace.
Outcome = tuple[tuple[Hit, ...], RerankTrace]


class StageFacts(Protocol):
    """What an answer is resolved against: the stage's pool (the coarse order, or the
    previous stage's selection in a chain), its limit, its reranker's id and descriptor."""

    @property
    def pool(self) -> tuple[Hit, ...]: ...
    @property
    def k(self) -> int: ...
    @property
    def policy_id(self) -> str: ...
    @property
    def descriptor(self) -> Mapping[str, Any]: ...


def trace_candidates(pool: Sequence[Hit], *, text: bool = True) -> tuple[TraceCandidate, ...]:
    return tuple(
        TraceCandidate(i + 1, h.ref, h.score, h.matched_by, h.text if text else None)
        for i, h in enumerate(pool)
    )


def describe(reranker: Any) -> dict[str, Any]:
    """The reranker's descriptor as traces, logs and answers show it: secrets masked by the
    host, whatever the plugin put there (:func:`rankseam.redaction.mask_secrets`)."""
    descriptor = getattr(reranker, "descriptor", None)
    if isinstance(descriptor, Mapping):
        masked: dict[str, Any] = mask_secrets(descriptor)
        return masked
    return {}


def _failure_reason(exc: BaseException) -> str:
    if isinstance(exc, RerankError):
        return exc.reason
    if isinstance(exc, BackendError):
        return exc.kind
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "exception"


def attach_usage(exc: BaseException, usage: Usage | None) -> None:
    if usage is None:
        return
    try:
        exc.usage = usage  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type that refuses new attributes
        pass


def foreign_base_exception(exc: BaseException, policy_id: str) -> RerankError:
    """A ``BaseException`` that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``,
    a ``CancelledError`` the plugin raised itself, ...) as the plugin failure it is."""
    error = RerankError(
        f"reranker {policy_id!r} raised {type(exc).__name__}({exc}); a plugin may not stop the "
        "process, interrupt or cancel the search. The search treats it as the reranker's "
        "failure; fix the reranker",
        policy_id=policy_id,
        reason="exception",
    )
    error.__cause__ = exc
    attach_usage(error, getattr(exc, "usage", None))
    return error


def _is_foreign(exc: BaseException | None) -> bool:
    return exc is not None and not isinstance(exc, Exception)


def deadline_error(
    policy_id: str, deadline_s: float, detail: str, *, own: bool = False
) -> RerankError:
    """The error of a rerank stage past its deadline: the search's (``[search]
    rerank_deadline_s``), or the reranker's own (``own``: its ``deadline_s`` attribute, set by
    its options)."""
    if own:
        what = f"its own deadline of {deadline_s:g} s (the reranker's deadline_s)"
        fix = "Raise the reranker's deadline_s option (for example [rerankers.decision] deadline_s)"
    else:
        what = f"the rerank deadline of {deadline_s:g} s"
        fix = "Raise [search] rerank_deadline_s (or search(..., rerank_deadline_s=...))"
    return RerankError(
        f"reranker {policy_id!r} did not answer within {what} ({detail}). {fix}, lower the "
        "pool size, or fix the reranker",
        policy_id=policy_id,
        reason="timeout",
    )


def refusal(exc: Exception, policy_id: str) -> RerankError:
    """The fail-closed policy's error for a failed stage (raised from ``exc``): what failed, why,
    what it spent, and how to get the coarse order instead."""
    reason = _failure_reason(exc)
    usage = getattr(exc, "usage", None)
    return RerankError(
        f"reranker {policy_id!r} failed ({reason}): {type(exc).__name__}: {exc}. "
        "The search failed closed; retry, fix the reranker or its backend, or set "
        "on_error='fail_open' to return the coarse order marked 'degraded' instead",
        policy_id=policy_id,
        reason=reason,
        usage=usage if isinstance(usage, Usage) else Usage.zero(),
    )


def degradation(exc: Exception) -> tuple[str, dict[str, Any]]:
    """The fail-open policy's log record for a failed stage: its message and fields."""
    return "rerank failed; returning the coarse order marked degraded", {
        "reason": _failure_reason(exc),
        "status": "degraded",
    }


def degraded(exc: Exception, stage: StageFacts, latency_ms: float) -> Outcome:
    """The fail-open policy's answer for a failed stage: its pool's first ``k`` hits (the coarse
    order, or the previous stage's selection in a chain) marked ``degraded``, with the reason
    and what the failed call spent."""
    pool, k = stage.pool, stage.k
    reason = _failure_reason(exc)
    usage = getattr(exc, "usage", None)
    cause = exc.__cause__
    # a SystemExit & co. was turned into a RerankError here: the trace names the original
    shown = cause if isinstance(exc, RerankError) and _is_foreign(cause) else exc
    trace = RerankTrace(
        policy_id=stage.policy_id,
        status=RerankStatus.DEGRADED,
        selected_ranks=tuple(range(1, k + 1)),
        reason=f"{reason}: {type(shown).__name__}",
        usage=usage if isinstance(usage, Usage) else Usage.zero(),
        latency_ms=latency_ms,
        descriptor=stage.descriptor,
        candidate_count=len(pool),
        limit=k,
    )
    return pool[:k], trace


def resolve(decision: RerankDecision, stage: StageFacts, latency_ms: float) -> Outcome:
    """A checked decision's ranks, normalised and resolved back to the pool's hits, and the
    stage's trace (status ``ok``, ``repaired`` or ``fell_back``)."""
    pool, k, policy_id = stage.pool, stage.k, stage.policy_id
    n = len(pool)
    raw = decision.selected_ranks
    selected, scores, seam_discarded, over = normalize(raw, decision.scores, n, k)
    discarded = decision.discarded_rank_count + seam_discarded
    notes: list[str] = []
    if decision.used_fallback:
        selected = selected or tuple(range(1, k + 1))
        scores = None
        used_fallback = True
        status = RerankStatus.FELL_BACK
        notes.append("the reranker fell back to coarse ranks")
    elif not selected:
        selected = tuple(range(1, k + 1))
        scores = None
        used_fallback = True
        status = RerankStatus.FELL_BACK
        notes.append(
            "the reranker selected no rank; coarse ranks used"
            if not raw
            else "no valid rank in the reranker's selection; coarse ranks used"
        )
    else:
        used_fallback = False
        # over-answering is repaired too: the valid selection is kept, and the status shows it
        status = RerankStatus.REPAIRED if discarded or over else RerankStatus.OK
        if discarded:
            note = f"{discarded} invalid or repeated rank(s) discarded"
            if decision.discarded_rank_count:
                note += f", {decision.discarded_rank_count} of them counted by the reranker"
            if decision.scores is not None:
                note += " (a rank whose score is not a finite number is invalid)"
            notes.append(note)
    if over:
        notes.append(
            f"the reranker answered {len(raw)} ranks for a limit of {k}; {over} after the "
            f"first {k} kept were ignored (over-answered)"
        )
    log.debug(
        "rerank done",
        extra={
            "policy_id": policy_id,
            "status": status.value,
            "discarded": discarded,
            "over_limit": over,
        },
    )
    trace = RerankTrace(
        policy_id=policy_id,
        status=status,
        selected_ranks=selected,
        discarded_rank_count=discarded,
        over_limit_count=over,
        used_fallback=used_fallback,
        reason="; ".join(notes) or None,
        usage=decision.usage,
        latency_ms=latency_ms,
        descriptor=stage.descriptor,
        records=decision.records,
        candidate_count=n,
        limit=k,
        scores=scores,
    )
    if scores is None:
        return tuple(pool[r - 1] for r in selected), trace
    return tuple(
        attrs.evolve(pool[r - 1], rerank_score=s) for r, s in zip(selected, scores, strict=True)
    ), trace
