"""The seam's bounds and checks: what a search may ask for, and what a reranker's answer may
hold (docs/seam.md, "Validation rules").

Everything here is a pure function of its arguments: the arguments of a rerank stage are
checked once, when the search is planned (or when :func:`~rankseam.seam.rerank_pool` is
called directly), and a reranker's answer once, when it comes back.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from rankseam.checks import is_int
from rankseam.errors import RerankError, ValidationError
from rankseam.governed import DecisionFailurePolicy, failure_policy
from rankseam.types import RerankDecision

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_POOL",
    "DEFAULT_RERANK_DEADLINE_S",
    "MAX_POOL",
    "MIN_POOL",
    "NO_RERANKER",
    "OnError",
    "check_decision",
    "declared_deadline",
    "normalize_ranks",
    "normalize_scored_ranks",
    "reranker_choice",
    "validate_deadline",
    "validate_limit",
    "validate_on_error",
    "validate_pool_size",
]

MIN_POOL = 1
MAX_POOL = 200
DEFAULT_POOL = 30
DEFAULT_MAX_CHARS = 2000
#: Default per-search rerank deadline in seconds (``[search] rerank_deadline_s``). It is a
#: backstop above the first-party rerankers' own deadlines (decision: 30 s; the OpenAI-compatible
#: backend: 60 s per request, retries included), so theirs fire first with their cost counted.
DEFAULT_RERANK_DEADLINE_S = 90.0

#: The name that means "no reranker: the coarse order" wherever a reranker is named
#: (configuration, ``RANKSEAM_RERANK``, ``search(reranker=...)``, ``open_reranker``, the CLI).
NO_RERANKER = "none"

#: A search's failure policy (``on_error``): ``"fail_closed"`` (the default: a failing reranker
#: raises :class:`~rankseam.errors.RerankError`) or ``"fail_open"`` (the stage's pool, i.e. the
#: coarse order or the previous stage's selection, marked ``degraded``); the earlier spellings
#: ``"raise"`` and ``"coarse"`` mean the same (:func:`rankseam.governed.failure_policy`).
OnError = Literal["fail_closed", "fail_open", "raise", "coarse"] | DecisionFailurePolicy


def reranker_choice(choice: Any) -> Any:
    """The one translation of a reranker choice: ``None`` for no reranker (``None``,
    :data:`NO_RERANKER` or an empty or blank string), else ``choice`` unchanged (a registered
    name or a reranker object)."""
    if choice is None or (isinstance(choice, str) and choice.strip() in ("", NO_RERANKER)):
        return None
    return choice


def validate_limit(limit: object) -> int:
    if not is_int(limit) or limit < 1:
        raise ValidationError(f"limit must be an integer >= 1, got {limit!r}")
    return limit


def validate_pool_size(pool: object) -> int:
    if not is_int(pool) or not MIN_POOL <= pool <= MAX_POOL:
        raise ValidationError(
            f"pool size must be an integer in {MIN_POOL}..{MAX_POOL}, got {pool!r}; "
            f"the coarse pool is bounded so that reranking cost stays bounded"
        )
    return pool


def validate_deadline(deadline_s: object, where: str = "rerank_deadline_s") -> float:
    """``deadline_s`` as a float when it is a finite number of seconds > 0 (at most a day)."""
    if not isinstance(deadline_s, numbers.Real) or isinstance(deadline_s, bool):
        raise ValidationError(
            f"{where} must be a number of seconds > 0, got {deadline_s!r}; the default is "
            f"{DEFAULT_RERANK_DEADLINE_S}"
        )
    value = float(deadline_s)
    if not (math.isfinite(value) and 0 < value <= 86400):
        raise ValidationError(
            f"{where} must be a finite number of seconds in (0, 86400], got {deadline_s!r}; "
            f"the default is {DEFAULT_RERANK_DEADLINE_S}"
        )
    return value


def declared_deadline(component: object, policy_id: str) -> float | None:
    """The deadline a reranker declares for one rerank (its ``deadline_s`` attribute; ``None``:
    none), checked: the host enforces the lower of it and the search's, so that a plugin never
    wraps its own work in a deadline (docs/writing-plugins.md, "Attributes the host reads")."""
    declared = getattr(component, "deadline_s", None)
    if declared is None:
        return None
    try:
        return validate_deadline(declared, f"reranker {policy_id!r}'s deadline_s")
    except ValueError as exc:
        raise RerankError(
            f"{exc}; the reranker declares it, so fix the reranker (or its deadline_s option)",
            policy_id=policy_id,
            reason="exception",
        ) from exc


def validate_on_error(on_error: object) -> DecisionFailurePolicy:
    """``on_error`` as the failure policy it names (either spelling)."""
    try:
        return failure_policy(on_error)
    except ValueError:
        raise ValidationError(
            f"on_error must be 'fail_closed' (raise RerankError, the default) or 'fail_open' "
            f"(return the coarse order with status 'degraded'; the earlier spellings 'raise' "
            f"and 'coarse' mean the same), got {on_error!r}"
        ) from None


def is_rank(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _as_score(value: object) -> float | None:
    """``value`` as a finite float, or ``None`` when it is not a finite real number."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool | np.bool_):
        return None
    try:
        score = float(value)
    except (OverflowError, TypeError, ValueError):
        return None
    return score if math.isfinite(score) else None


def normalize_ranks(raw: Sequence[object], n: int, limit: int) -> tuple[tuple[int, ...], int]:
    """Walk ``raw`` in order; keep valid, unseen ranks in ``1..n`` up to ``limit``.

    Returns ``(kept, discarded)``. Elements after the ``limit``-th valid rank are ignored and
    not counted (they were never going to be used).
    """
    kept, _scores, discarded = normalize_scored_ranks(raw, None, n, limit)
    return kept, discarded


def normalize_scored_ranks(
    raw: Sequence[object], raw_scores: Sequence[object] | None, n: int, limit: int
) -> tuple[tuple[int, ...], tuple[float, ...] | None, int]:
    """:func:`normalize_ranks` with optional per-rank scores (``raw_scores[i]`` belongs to
    ``raw[i]``; the caller has checked the lengths match).

    Returns ``(kept, kept_scores, discarded)``: a rank whose score is not a finite real number
    is discarded and counted like an invalid rank, and a discarded rank's score goes with it.
    ``kept_scores`` is ``None`` when ``raw_scores`` is.
    """
    kept, kept_scores, discarded, _over = normalize(raw, raw_scores, n, limit)
    return kept, kept_scores, discarded


def normalize(
    raw: Sequence[object], raw_scores: Sequence[object] | None, n: int, limit: int
) -> tuple[tuple[int, ...], tuple[float, ...] | None, int, int]:
    """:func:`normalize_scored_ranks`, plus the number of elements after the ``limit``-th kept
    rank (ignored, not validated: the over-answer)."""
    kept: list[int] = []
    kept_scores: list[float] = []
    seen: set[int] = set()
    discarded = 0
    over = 0
    for i, value in enumerate(raw):
        if len(kept) >= limit:
            over = len(raw) - i
            break
        if not is_rank(value):
            discarded += 1
            continue
        rank = int(value)  # type: ignore[call-overload]
        if rank < 1 or rank > n or rank in seen:
            discarded += 1
            continue
        if raw_scores is not None:
            score = _as_score(raw_scores[i])
            if score is None:
                discarded += 1
                continue
            kept_scores.append(score)
        seen.add(rank)
        kept.append(rank)
    return tuple(kept), (None if raw_scores is None else tuple(kept_scores)), discarded, over


def check_decision(decision: object, policy_id: str) -> RerankDecision:
    """``decision`` when it is a well-formed :class:`~rankseam.types.RerankDecision`; a
    :class:`~rankseam.errors.RerankError` (``invalid_output``) saying what is wrong otherwise."""
    if not isinstance(decision, RerankDecision):
        raise RerankError(
            f"reranker {policy_id!r} returned {type(decision).__name__}, not a RerankDecision",
            policy_id=policy_id,
            reason="invalid_output",
        )
    if decision.scores is not None and len(decision.scores) != len(decision.selected_ranks):
        raise RerankError(
            f"reranker {policy_id!r} returned {len(decision.scores)} scores for "
            f"{len(decision.selected_ranks)} selected ranks; RerankDecision.scores must hold "
            "exactly one score per element of selected_ranks, in the same order (or be None)",
            policy_id=policy_id,
            reason="invalid_output",
        )
    ranks = decision.selected_ranks
    if decision.used_fallback and not (
        all(map(is_rank, ranks)) and tuple(ranks) == tuple(range(1, len(ranks) + 1))
    ):
        shown = tuple(ranks[:8]) + (("...",) if len(ranks) > 8 else ())
        raise RerankError(
            f"reranker {policy_id!r} said used_fallback=True (it fell back to the coarse ranks) "
            f"but answered the ranks {shown}; with used_fallback=True answer the coarse ranks "
            "1..k (or none), otherwise answer your own ranks with used_fallback=False",
            policy_id=policy_id,
            reason="invalid_output",
        )
    return decision
