"""Reranker doubles for tests of code that runs rerankers (the seam, chains, adapters): small,
deterministic rerankers that behave well, and ones that misbehave in one named way each.

Every double reports a fixed ``usage`` (default one call, 10 tokens in, 2 out) so that cost
accounting can be checked, and none of them sleeps: a test that uses them never depends on the
machine's speed.

- :class:`ReverseReranker` (async): the pool reversed;
- :class:`EveryOtherReranker` (synchronous): odd positions first, then even ones;
- :class:`MisbehavingReranker`: one way of getting it wrong (:data:`MISBEHAVIOURS`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from rankseam.types import Candidate, RerankDecision, Usage

__all__ = [
    "DOUBLE_USAGE",
    "FAILING_MISBEHAVIOURS",
    "MISBEHAVIOURS",
    "EveryOtherReranker",
    "MisbehavingReranker",
    "ReverseReranker",
]

#: What every double says one rerank cost, unless told otherwise.
DOUBLE_USAGE = Usage(1, 10, 2)


class ReverseReranker:
    """Async and well-behaved: the pool in reverse order, at most ``limit`` ranks, with a score
    per rank (higher for a later coarse position)."""

    deterministic = True

    def __init__(self, usage: Usage = DOUBLE_USAGE, policy_id: str = "kit.reverse.v1") -> None:
        self.usage = usage
        self.policy_id = policy_id

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        ranks = tuple(c.rank for c in reversed(candidates))[:limit]
        return RerankDecision(ranks, self.usage, scores=tuple(float(r) for r in ranks))


class EveryOtherReranker:
    """Synchronous and well-behaved: positions 1, 3, 5, ... then 2, 4, ..., at most
    ``limit``; no scores."""

    deterministic = True

    def __init__(self, usage: Usage = DOUBLE_USAGE, policy_id: str = "kit.every-other.v1") -> None:
        self.usage = usage
        self.policy_id = policy_id

    def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> RerankDecision:
        n = len(candidates)
        order = [*range(1, n + 1, 2), *range(2, n + 1, 2)]
        return RerankDecision(tuple(order[:limit]), self.usage)


#: The ways a :class:`MisbehavingReranker` gets it wrong: ranks out of range, repeated ranks,
#: more ranks than asked, nothing at all, its own fallback, an answer of the wrong type, an
#: exception, a ``SystemExit``, and a ``CancelledError`` of its own.
MISBEHAVIOURS = (
    "out_of_range",
    "duplicates",
    "over_answer",
    "empty",
    "fallback",
    "wrong_type",
    "raises",
    "system_exit",
    "cancels_itself",
)
#: The misbehaviours that fail the stage (the others are repaired, or fall back, by the seam).
FAILING_MISBEHAVIOURS = frozenset({"wrong_type", "raises", "system_exit", "cancels_itself"})


class MisbehavingReranker:
    """A reranker that gets one thing wrong (``how``, one of :data:`MISBEHAVIOURS`). A failing
    one attaches its ``usage`` to what it raises, as a model-backed reranker does."""

    def __init__(self, how: str, usage: Usage = DOUBLE_USAGE, policy_id: str | None = None) -> None:
        if how not in MISBEHAVIOURS:
            raise ValueError(f"how must be one of {MISBEHAVIOURS}, got {how!r}")
        self.how = how
        self.usage = usage
        self.policy_id = policy_id or f"kit.misbehaving.{how}.v1"

    async def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        n = len(candidates)
        how = self.how
        if how == "out_of_range":
            return RerankDecision((0, n + 1, -3, *range(1, n + 1)), self.usage)
        if how == "duplicates":
            return RerankDecision((n, n, n, 1, 1), self.usage)
        if how == "over_answer":
            return RerankDecision(tuple(range(n, 0, -1)) * 2, self.usage)
        if how == "empty":
            return RerankDecision((), self.usage)
        if how == "fallback":
            return RerankDecision(
                tuple(range(1, min(limit, n) + 1)), self.usage, used_fallback=True
            )
        if how == "wrong_type":
            return [1, 2]
        error: BaseException
        if how == "raises":
            error = RuntimeError("the double failed on purpose")
        elif how == "system_exit":
            error = SystemExit(3)
        else:
            error = asyncio.CancelledError()
        setattr(error, "usage", self.usage)  # noqa: B010 (what a model client attaches)
        raise error
