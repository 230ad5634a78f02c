"""Test doubles for the thing outside us: decision backends (never our own code)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from rankseam.plugin.decision import DecisionOutcome, DecisionRequest, DecisionResult
from rankseam.plugin.rerankers import make_candidates
from rankseam.types import Candidate, Hit, MemoryRef, Usage

Answer = DecisionOutcome | DecisionResult | BaseException | object
#: Delay of one call: an int = that many event-loop yields (deterministic), a float = seconds.
Delay = int | float


def candidates(n: int) -> tuple[Candidate, ...]:
    hits = [
        Hit(MemoryRef("t", f"m{i}", 1), f"candidate {i}", 1.0 - i / 1000) for i in range(1, n + 1)
    ]
    return make_candidates(hits)


def hits(n: int) -> tuple[Hit, ...]:
    return tuple(
        Hit(MemoryRef("t", f"m{i}", 1), f"candidate {i}", 1.0 - i / 1000) for i in range(1, n + 1)
    )


def rank_of(request: DecisionRequest) -> int:
    return int(request.subject.split()[-1])


class ScriptedBackend:
    """Answers by coarse rank (parsed from the subject) from ``answers``; records every call."""

    policy_id = "test.scripted.v1"

    def __init__(
        self,
        answers: Sequence[Answer] | Callable[[int], Answer],
        *,
        delays: Sequence[Delay] | Callable[[int], Delay] = (),
        usage: Usage | Callable[[int], Usage] = Usage(1, 10, 1),
        block: asyncio.Event | None = None,
    ) -> None:
        self._answers = answers
        self._delays = delays
        self._usage = usage
        self._block = block
        self.requests: list[DecisionRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.cancelled = 0
        self.completed = 0

    def _answer(self, rank: int) -> Answer:
        a = self._answers
        return a(rank) if callable(a) else a[rank - 1]

    def _delay(self, rank: int) -> Delay:
        d = self._delays
        if callable(d):
            return d(rank)
        return d[rank - 1] if rank - 1 < len(d) else 0

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        self.requests.append(request)
        rank = rank_of(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self._block is not None:
                await self._block.wait()
            delay = self._delay(rank)
            if isinstance(delay, int):
                for _ in range(delay):
                    await asyncio.sleep(0)
            elif delay:
                await asyncio.sleep(delay)
            answer = self._answer(rank)
            if isinstance(answer, BaseException):
                raise answer
            self.completed += 1
            if isinstance(answer, DecisionOutcome):
                usage = self._usage(rank) if callable(self._usage) else self._usage
                return DecisionResult(answer, self.policy_id, usage)
            return answer  # type: ignore[return-value]
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.in_flight -= 1


Y, N, A = DecisionOutcome.YES, DecisionOutcome.NO, DecisionOutcome.ABSTAIN
