"""Sliding windows: the documented call count, bottom-up order, the budget, summed usage."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from listwise_doubles import FailingModel, PickingModel, ScriptedModel, pool, ranks_json

from rankseam.errors import BackendTimeoutError, RerankError
from rankseam.plugin.rerankers import make_candidates
from rankseam.testing import run_reranker
from rankseam.types import RerankStatus, Usage
from rankseam_listwise import (
    CallBudgetError,
    ListwiseOptions,
    ListwiseReranker,
    call_count,
    plan_windows,
)


def make(backend: Any, **options: Any) -> ListwiseReranker:
    return ListwiseReranker(backend, ListwiseOptions.from_mapping({"backend": "test", **options}))


@pytest.mark.parametrize(
    ("n", "window", "stride", "calls"),
    [(0, 20, 10, 0), (1, 20, 10, 1), (20, 20, 10, 1), (21, 20, 10, 2), (25, 20, 10, 2),
     (50, 20, 10, 4), (100, 20, 10, 9), (200, 20, 10, 19), (100, 30, 15, 6), (30, 30, 15, 1)],
)  # fmt: skip
def test_documented_call_count(n: int, window: int, stride: int, calls: int) -> None:
    assert call_count(n, window, stride) == calls == len(plan_windows(n, window, stride))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200), st.integers(2, 60), st.data())
def test_plan_is_bottom_up_overlapping_and_covers_the_pool(n: int, window: int, data: Any) -> None:
    stride = data.draw(st.integers(1, window - 1))
    plan = plan_windows(n, window, stride)
    assert len(plan) == call_count(n, window, stride)
    covered: set[int] = set()
    for start, end in plan:
        assert 0 <= start < end <= n and end - start <= window
        covered.update(range(start, end))
    assert covered == set(range(n))
    if len(plan) > 1:
        assert plan[-1] == (0, window)  # the top window is called last
        for (lower_start, _), (_, upper_end) in itertools.pairwise(plan):
            assert upper_end - lower_start >= window - stride  # consecutive windows overlap
        assert [s for s, _ in plan] == sorted((s for s, _ in plan), reverse=True)


def test_100_candidates_make_9_bottom_up_calls_and_the_best_climb_to_the_top() -> None:
    gold = {100: "gold fact one", 57: "gold fact two"}
    model = PickingModel(lambda text: text.startswith("gold"))
    hits = pool(100, gold)
    run = run_reranker(make(model, window=20, stride=10), "q", hits, 5)
    out, trace = run.hits, run.trace
    assert len(model.requests) == 9 == call_count(100, 20, 10)
    assert all(len(r.input["candidates"]) <= 20 for r in model.requests)
    first = [c["text"] for c in model.requests[0].input["candidates"]]
    assert first == [h.text for h in hits[80:100]]  # the bottom window goes first
    assert trace is not None and trace.status is RerankStatus.OK
    assert trace.selected_ranks == (57, 100)  # never padded to the limit of 5
    assert [h.ref.memory_id for h in out] == ["m057", "m100"]
    assert trace.usage == Usage(9, 63, 18)  # summed over the calls
    for request in model.requests:  # each window is numbered 1..len, never coarse ranks
        assert [c["rank"] for c in request.input["candidates"]] == list(
            range(1, len(request.input["candidates"]) + 1)
        )


def test_sliding_discards_are_summed_and_the_top_window_decides() -> None:
    # Three windows over 25 candidates (window 10, stride 8): each answer has one bad rank.
    model = ScriptedModel(ranks_json(1, 99), ranks_json(0, 2), ranks_json(3, 3))
    decision = asyncio.run(
        make(model, window=10, stride=8).rerank("q", make_candidates(pool(25)), 4)
    )
    assert len(model.requests) == 3 == call_count(25, 10, 8)
    assert decision.discarded_rank_count == 3
    top = [c["text"] for c in model.requests[-1].input["candidates"]]
    assert decision.selected_ranks == (int(top[2].rsplit(" ", 1)[1]),)


def test_top_window_without_valid_rank_falls_back_to_coarse() -> None:
    model = ScriptedModel(ranks_json(2), ranks_json(42))
    decision = asyncio.run(make(model, window=4, stride=2).rerank("q", make_candidates(pool(6)), 3))
    assert len(model.requests) == 2
    assert decision.selected_ranks == (1, 2, 3) and decision.used_fallback
    assert decision.discarded_rank_count == 1


def test_budget_is_checked_before_any_call() -> None:
    model = PickingModel(lambda text: True)
    reranker = make(model, window=20, stride=10, max_calls=8)
    with pytest.raises(CallBudgetError, match="needs 9 generation calls") as info:
        asyncio.run(reranker.rerank("q", make_candidates(pool(100)), 5))
    assert model.requests == []  # nothing was spent
    assert info.value.reason == "call_budget"
    with pytest.raises(RerankError) as seam_info:
        run_reranker(reranker, "q", pool(100), 5)
    assert seam_info.value.reason == "call_budget"
    run = run_reranker(reranker, "q", pool(100), 5, on_error="coarse")
    out, trace = run.hits, run.trace
    assert trace is not None and trace.status is RerankStatus.DEGRADED
    assert trace.usage.calls == 0 and model.requests == [] and len(out) == 5


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 120), st.integers(2, 30), st.integers(1, 12), st.integers(1, 10), st.data())
def test_never_exceeds_the_budget(
    n: int, window: int, max_calls: int, limit: int, data: Any
) -> None:
    stride = data.draw(st.integers(1, window - 1))
    model = PickingModel(lambda text: text.endswith("7"))
    reranker = make(model, window=window, stride=stride, max_calls=max_calls)
    try:
        decision = asyncio.run(reranker.rerank("q", make_candidates(pool(n)), limit))
    except CallBudgetError:
        assert call_count(n, window, stride) > max_calls and model.requests == []
    else:
        assert len(model.requests) == decision.usage.calls == call_count(n, window, stride)
        assert decision.usage.calls <= max_calls
        assert 1 <= len(decision.selected_ranks) <= min(limit, n)
        assert len(set(decision.selected_ranks)) == len(decision.selected_ranks)


def test_failure_mid_way_reports_the_calls_made() -> None:
    model = FailingModel(BackendTimeoutError("slow"), fail_on=3)
    reranker = make(model, window=20, stride=10)
    trace = run_reranker(reranker, "q", pool(100), 5, on_error="coarse").trace
    assert trace is not None and trace.status is RerankStatus.DEGRADED
    assert trace.reason is not None and trace.reason.startswith("timeout")
    assert model.calls == 3
    assert trace.usage.calls == 3 and trace.usage.input_tokens is None  # failed call: unknown
