"""Pins of the seam's answers that mutation testing found unchecked (docs/seam.md): the trace
of an ok answer, a reranker's own fallback with no ranks, the failure's attributes, the cost
of a reranker cancelled at the deadline, the abandon path, the descriptor and the log fields.

Deadline tests never let timing decide: a reranker waits until it is cancelled (or released by
the test), and an outer guard of 30 s only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from rankseam import RerankDecision, RerankError, RerankStatus, Usage
from rankseam.seam import rerank_pool
from rankseam.testing import synthetic_pool

POOL, _ = synthetic_pool(6)
GUARD_S = 30.0


def run(reranker: Any, limit: int = 3, pool: Any = POOL, **kw: Any) -> Any:
    async def guarded() -> Any:
        return await asyncio.wait_for(rerank_pool("q", pool, limit, reranker, **kw), GUARD_S)

    return asyncio.run(guarded())


class Scripted:
    policy_id = "test.scripted.v1"
    descriptor = {"model": "tiny", "version": 2}

    def __init__(self, answer: Any = None, *, raises: BaseException | None = None) -> None:
        self.answer = answer
        self.raises = raises

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
        if self.raises is not None:
            raise self.raises
        return self.answer


def test_an_ok_answer_is_traced_field_by_field(caplog: pytest.LogCaptureFixture) -> None:
    answer = RerankDecision((3, 1), usage=Usage(1, 12, 2))
    with caplog.at_level(logging.DEBUG, logger="rankseam.seam"):
        hits, trace = run(Scripted(answer), limit=2)
    assert hits == (POOL[2], POOL[0])
    assert trace.status is RerankStatus.OK
    assert trace.used_fallback is False
    assert trace.selected_ranks == (3, 1)
    assert (trace.discarded_rank_count, trace.over_limit_count) == (0, 0)
    assert trace.reason is None and trace.scores is None
    assert trace.usage == Usage(1, 12, 2)
    assert (trace.candidate_count, trace.limit, trace.policy_id) == (6, 2, "test.scripted.v1")
    assert dict(trace.descriptor) == {"model": "tiny", "version": 2}  # the descriptor arrives
    assert trace.latency_ms >= 0.0
    [record] = [r for r in caplog.records if r.name == "rankseam.seam"]
    assert record.levelno == logging.DEBUG and record.getMessage() == "rerank done"
    fields = {k: getattr(record, k) for k in ("policy_id", "status", "discarded", "over_limit")}
    assert fields == {
        "policy_id": "test.scripted.v1",
        "status": "ok",
        "discarded": 0,
        "over_limit": 0,
    }


def test_a_repaired_answer_logs_its_counts(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="rankseam.seam"):
        _, trace = run(Scripted(RerankDecision((9, 2, 2, 1, 3, 4))), limit=2)
    assert trace.status is RerankStatus.REPAIRED and trace.selected_ranks == (2, 1)
    assert trace.reason == (
        "2 invalid or repeated rank(s) discarded; the reranker answered 6 ranks for a limit of "
        "2; 2 after the first 2 kept were ignored (over-answered)"
    )
    [record] = [r for r in caplog.records if r.getMessage() == "rerank done"]
    assert (record.status, record.discarded, record.over_limit) == ("repaired", 2, 2)


def test_counted_and_scored_discards_are_named_in_the_reason() -> None:
    answer = RerankDecision((1, 2, 3), scores=(0.5, float("nan"), 0.25), discarded_rank_count=1)
    hits, trace = run(Scripted(answer), limit=3)
    assert trace.selected_ranks == (1, 3) and trace.scores == (0.5, 0.25)
    assert trace.reason == (
        "2 invalid or repeated rank(s) discarded, 1 of them counted by the reranker (a rank "
        "whose score is not a finite number is invalid)"
    )
    assert [h.rerank_score for h in hits] == [0.5, 0.25]


def test_a_reranker_that_fell_back_with_no_ranks_gets_the_coarse_ranks() -> None:
    hits, trace = run(Scripted(RerankDecision((), used_fallback=True)), limit=4)
    assert hits == POOL[:4]
    assert trace.status is RerankStatus.FELL_BACK and trace.used_fallback is True
    assert trace.selected_ranks == (1, 2, 3, 4) and trace.scores is None
    assert trace.reason == "the reranker fell back to coarse ranks"
    assert all(h.rerank_score is None for h in hits)


def test_a_reranker_that_fell_back_with_coarse_ranks_keeps_them() -> None:
    hits, trace = run(Scripted(RerankDecision((1, 2), used_fallback=True)), limit=4)
    assert hits == POOL[:2] and trace.selected_ranks == (1, 2)
    assert trace.status is RerankStatus.FELL_BACK


def test_an_empty_or_invalid_selection_says_which() -> None:
    _, empty = run(Scripted(RerankDecision(())), limit=2)
    assert empty.reason == "the reranker selected no rank; coarse ranks used"
    assert empty.used_fallback is True and empty.selected_ranks == (1, 2)
    _, invalid = run(Scripted(RerankDecision((0, 99))), limit=2)
    assert invalid.reason == "no valid rank in the reranker's selection; coarse ranks used"
    assert invalid.status is RerankStatus.FELL_BACK


def test_a_fail_closed_error_carries_the_policy_reason_and_usage() -> None:
    failure = RuntimeError("boom")
    failure.usage = Usage(2, 5, 0)  # type: ignore[attr-defined]
    with pytest.raises(RerankError) as info:
        run(Scripted(raises=failure))
    assert info.value.policy_id == "test.scripted.v1"
    assert info.value.reason == "exception"
    assert info.value.usage == Usage(2, 5, 0)
    assert info.value.__cause__ is failure
    assert str(info.value) == (
        "reranker 'test.scripted.v1' failed (exception): RuntimeError: boom. The search failed "
        "closed; retry, fix the reranker or its backend, or set on_error='fail_open' to return the "
        "coarse order marked 'degraded' instead"
    )


def test_a_wrong_answer_is_named_in_the_error() -> None:
    with pytest.raises(RerankError) as info:
        run(Scripted([1, 2]))
    assert info.value.reason == "invalid_output" and info.value.policy_id == "test.scripted.v1"
    assert (
        str(info.value.__cause__)
        == "reranker 'test.scripted.v1' returned list, not a RerankDecision"
    )
    assert info.value.__cause__.policy_id == "test.scripted.v1"  # type: ignore[union-attr]
    with pytest.raises(RerankError) as scores:
        run(Scripted(RerankDecision((1, 2), scores=(0.5,))))
    assert str(scores.value.__cause__) == (
        "reranker 'test.scripted.v1' returned 1 scores for 2 selected ranks; "
        "RerankDecision.scores must hold exactly one score per element of selected_ranks, in "
        "the same order (or be None)"
    )
    assert scores.value.__cause__.policy_id == "test.scripted.v1"  # type: ignore[union-attr]
    with pytest.raises(RerankError) as fallback:
        run(Scripted(RerankDecision((2, 1), used_fallback=True)))
    assert str(fallback.value.__cause__) == (
        "reranker 'test.scripted.v1' said used_fallback=True (it fell back to the coarse ranks) "
        "but answered the ranks (2, 1); with used_fallback=True answer the coarse ranks 1..k "
        "(or none), otherwise answer your own ranks with used_fallback=False"
    )
    assert fallback.value.__cause__.policy_id == "test.scripted.v1"  # type: ignore[union-attr]


def test_a_degraded_trace_keeps_the_descriptor_and_logs_its_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="rankseam.seam"):
        hits, trace = run(Scripted(raises=RuntimeError("x")), limit=2, on_error="coarse")
    assert hits == POOL[:2]
    assert trace.status is RerankStatus.DEGRADED and trace.selected_ranks == (1, 2)
    assert dict(trace.descriptor) == {"model": "tiny", "version": 2}
    assert trace.reason == "exception: RuntimeError" and trace.usage == Usage.zero()
    assert (trace.candidate_count, trace.limit, trace.used_fallback) == (6, 2, False)
    [record] = caplog.records
    assert record.getMessage() == "rerank failed; returning the coarse order marked degraded"
    assert (record.policy_id, record.reason, record.status) == (
        "test.scripted.v1",
        "exception",
        "degraded",
    )


class CancelledAtDeadline:
    """Waits until cancelled; reports what the call had spent, as a model client does."""

    policy_id = "test.cancelled.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            exc.usage = Usage(3, 40, None)  # type: ignore[attr-defined]
            raise
        raise AssertionError("unreachable")


def test_the_usage_of_a_reranker_cancelled_at_the_deadline_is_counted() -> None:
    hits, trace = run(CancelledAtDeadline(), on_error="coarse", deadline_s=0.2)
    assert trace.status is RerankStatus.DEGRADED and hits == POOL[:3]
    assert trace.reason == "timeout: RerankError"
    assert trace.usage == Usage(3, 40, None)
    with pytest.raises(RerankError) as info:
        run(CancelledAtDeadline(), deadline_s=0.2)
    assert info.value.reason == "timeout" and info.value.usage == Usage(3, 40, None)
    assert info.value.policy_id == "test.cancelled.v1"
    assert info.value.__cause__.policy_id == "test.cancelled.v1"  # type: ignore[union-attr]
    assert str(info.value.__cause__) == (
        "reranker 'test.cancelled.v1' did not answer within the rerank deadline of 0.2 s (it "
        "was cancelled). Raise [search] rerank_deadline_s (or search(..., "
        "rerank_deadline_s=...)), lower the pool size, or fix the reranker"
    )


def test_a_reranker_that_ignores_its_cancellation_is_abandoned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state: dict[str, Any] = {"cancellations": 0}

    class Stubborn:
        policy_id = "test.stubborn.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
            while not state["release"].is_set():
                try:
                    await state["release"].wait()
                except asyncio.CancelledError:
                    state["cancellations"] += 1  # ignored: it keeps running
            return RerankDecision((1,), usage=Usage(9, 9, 9))

    async def scenario() -> Any:
        state["release"] = asyncio.Event()
        try:
            return await asyncio.wait_for(
                rerank_pool("q", POOL, 3, Stubborn(), on_error="coarse", deadline_s=0.1),
                GUARD_S,
            )
        finally:
            state["release"].set()  # let the abandoned reranker end before the loop closes
            await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING, logger="rankseam.seam"):
        hits, trace = asyncio.run(scenario())
    assert state["cancellations"] == 1
    assert trace.status is RerankStatus.DEGRADED and hits == POOL[:3]
    assert trace.reason == "timeout: RerankError"
    assert trace.usage == Usage.zero()  # the abandoned work's cost is unknown, not invented
    abandoned = [r for r in caplog.records if "abandoned" in r.getMessage()]
    [record] = abandoned
    assert record.getMessage() == "reranker ignored its cancellation at the deadline; abandoned"
    assert record.levelno == logging.WARNING
    assert (record.policy_id, record.reason) == ("test.stubborn.v1", "timeout")
