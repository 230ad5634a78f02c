"""The decision reranker's invariants (issue 6, items 5 and 6), through its public API."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from decision_doubles import A, N, ScriptedBackend, Y, candidates, hits
from hypothesis import given, settings
from hypothesis import strategies as st

from rankseam.errors import BackendUnavailableError, InvalidOutputError, RerankError
from rankseam.plugin import DecisionBackendRegister, hookimpl
from rankseam.plugin.decision import (
    RERANK_DECISION_KIND,
    RERANK_QUESTION,
    WRITE_GATE_ROLE,
    DecisionOutcome,
    DecisionResult,
)
from rankseam.testing import factory_context, installed_plugin, run_reranker
from rankseam.types import RerankStatus, Usage
from rankseam_decision import DecisionReranker


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def rerank(backend, n, limit, **kw):  # type: ignore[no-untyped-def]
    return run(DecisionReranker(backend, **kw).rerank("the query", candidates(n), limit))


def test_request_shape_follows_the_rfc() -> None:
    backend = ScriptedBackend([Y, Y])
    rerank(backend, 2, 2)
    first = backend.requests[0]
    assert first.decision_kind == RERANK_DECISION_KIND == "memory.rerank"
    assert first.question == RERANK_QUESTION
    assert first.subject == "candidate 1"
    assert first.evidence == ("the query",)


def test_keeps_yes_and_healthy_abstain_in_coarse_order() -> None:
    decision = rerank(ScriptedBackend([N, A, Y, N, Y, A]), 6, 10)
    assert decision.selected_ranks == (2, 3, 5, 6)
    assert decision.used_fallback is False
    assert decision.discarded_rank_count == 0


def test_keep_set_is_configurable() -> None:
    decision = rerank(ScriptedBackend([N, A, Y, N, Y, A]), 6, 10, keep=frozenset({Y}))
    assert decision.selected_ranks == (3, 5)


@pytest.mark.parametrize("window", [1, 4])
def test_degraded_abstain_fails_closed(window: int) -> None:
    degraded = DecisionResult(A, "test.scripted.v1", Usage.zero(), used_fallback=True)
    backend = ScriptedBackend([Y, degraded, Y, Y])
    with pytest.raises(RerankError) as info:
        rerank(backend, 4, 4, window=window)
    assert info.value.reason == "degraded_decision"
    assert backend.in_flight == 0


def test_a_fail_open_handle_given_by_mistake_still_fails_the_rerank() -> None:
    failing = ScriptedBackend(lambda rank: BackendUnavailableError("down"))

    class Failing:
        @hookimpl
        def register_decision_backends(self, register: DecisionBackendRegister) -> None:
            register("failing", lambda options, context: failing)

    with installed_plugin(Failing(), name="failing-tests"):
        # the write gate's handle: the real fail-open envelope
        handle = factory_context().decision_backend("failing", WRITE_GATE_ROLE)
    with pytest.raises(RerankError) as info:
        rerank(handle, 5, 2)
    assert info.value.reason == "degraded_decision"


def test_early_stop_issues_no_further_calls_sequentially() -> None:
    backend = ScriptedBackend(lambda rank: Y)
    decision = rerank(backend, 10, 3)
    assert decision.selected_ranks == (1, 2, 3)
    assert len(backend.requests) == 3
    assert decision.usage.calls == 3
    assert [r.rank for r in decision.records] == [1, 2, 3]


def test_all_no_gives_marked_fallback_after_a_full_scan() -> None:
    backend = ScriptedBackend(lambda rank: N)
    decision = rerank(backend, 7, 3)
    assert decision.selected_ranks == (1, 2, 3)
    assert decision.used_fallback is True
    assert decision.discarded_rank_count == 0
    assert len(backend.requests) == 7
    assert decision.usage == Usage(7, 70, 7)
    assert [(r.rank, r.outcome, r.detail) for r in decision.records] == [
        (i, "no", "dropped") for i in range(1, 8)
    ]


def test_fallback_is_visible_through_the_seam() -> None:
    seam = run_reranker(DecisionReranker(ScriptedBackend(lambda r: N)), "q", hits(5), 2)
    out, trace = seam.hits, seam.trace
    assert trace is not None and trace.status is RerankStatus.FELL_BACK
    assert trace.used_fallback and trace.usage.calls == 5 and len(trace.records) == 5
    assert [h.ref.memory_id for h in out] == ["m1", "m2"]


@pytest.mark.parametrize("window", [1, 3])
def test_backend_errors_propagate_unchanged(window: int) -> None:
    error = BackendUnavailableError("connection refused")
    backend = ScriptedBackend([Y, N, error, Y, Y])
    with pytest.raises(BackendUnavailableError) as info:
        rerank(backend, 5, 4, window=window)
    assert info.value is error
    assert info.value.usage.calls >= 3  # type: ignore[attr-defined]  # cost so far, for the seam
    assert backend.in_flight == 0


def test_seam_fails_closed_or_degrades_visibly_on_backend_error() -> None:
    def reranker() -> DecisionReranker:
        return DecisionReranker(ScriptedBackend([Y, BackendUnavailableError("down"), Y]))

    with pytest.raises(RerankError) as info:
        run_reranker(reranker(), "q", hits(3), 3)
    assert info.value.reason == "unavailable"
    seam = run_reranker(reranker(), "q", hits(3), 3, on_error="coarse")
    out, trace = seam.hits, seam.trace
    assert trace is not None and trace.status is RerankStatus.DEGRADED
    assert trace.usage.calls == 2  # the calls made before the failure are still accounted
    assert len(out) == 3


def test_failure_in_a_concurrent_window_is_never_hidden() -> None:
    # ranks 1 and 2 are enough for the limit, but rank 3 (same window) failed meanwhile
    backend = ScriptedBackend([Y, Y, BackendUnavailableError("boom"), Y], delays=[1, 1, 1, 50])
    with pytest.raises(BackendUnavailableError):
        rerank(backend, 4, 2, window=4)
    assert backend.in_flight == 0 and backend.cancelled == 1


def test_an_early_failure_stops_the_window_at_once() -> None:
    backend = ScriptedBackend([Y, Y, BackendUnavailableError("boom"), Y], delays=[50, 50, 0, 50])
    with pytest.raises(BackendUnavailableError):
        rerank(backend, 4, 2, window=4)
    assert backend.in_flight == 0 and backend.cancelled == 3


def test_failure_completing_with_the_limit_is_never_hidden() -> None:
    backend = ScriptedBackend([Y, BackendUnavailableError("boom"), Y], delays=[2, 2, 2])
    with pytest.raises(BackendUnavailableError):
        rerank(backend, 3, 1, window=3)


def test_invalid_backend_answer_raises_invalid_output() -> None:
    with pytest.raises(InvalidOutputError, match="not a DecisionResult"):
        rerank(ScriptedBackend(lambda r: {"answer": "yes"}), 3, 2)


def _reference(outcomes: list[DecisionOutcome], limit: int) -> tuple[tuple[int, ...], bool, int]:
    """The reference RFC's sequential scan: (selected, used_fallback, calls)."""
    kept: list[int] = []
    calls = 0
    for rank, outcome in enumerate(outcomes, start=1):
        calls += 1
        if outcome in (Y, A):
            kept.append(rank)
        if len(kept) == limit:
            break
    if kept:
        return tuple(kept), False, calls
    return tuple(range(1, min(limit, len(outcomes)) + 1)), True, calls


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    n=st.integers(1, 25),
    limit=st.integers(1, 10),
    window=st.integers(1, 8),
)
def test_completion_order_never_changes_the_output(data, n, limit, window) -> None:  # type: ignore[no-untyped-def]
    outcomes = data.draw(st.lists(st.sampled_from([Y, N, A]), min_size=n, max_size=n))
    delays = data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    backend = ScriptedBackend(outcomes, delays=delays)
    decision = rerank(backend, n, limit, window=window)
    selected, fallback, ref_calls = _reference(outcomes, limit)
    assert decision.selected_ranks == selected
    assert decision.used_fallback is fallback
    issued = len(backend.requests)
    assert ref_calls <= issued <= min(n, ref_calls + window - 1)
    assert decision.usage.calls == issued == len(decision.records)
    assert [r.rank for r in decision.records] == list(range(1, issued + 1))
    assert backend.max_in_flight <= window
    assert backend.in_flight == 0
    if window == 1:
        assert issued == ref_calls


def test_window_bounds_calls_in_flight() -> None:
    backend = ScriptedBackend(lambda r: N, delays=lambda r: 3)
    rerank(backend, 30, 5, window=4)
    assert backend.max_in_flight == 4
    sequential = ScriptedBackend(lambda r: N, delays=lambda r: 3)
    rerank(sequential, 30, 5, window=1)
    assert sequential.max_in_flight == 1


def test_cancelled_siblings_are_counted_with_unknown_tokens() -> None:
    backend2 = ScriptedBackend(lambda r: Y, delays=lambda r: 0 if r == 1 else 10_000)
    decision = rerank(backend2, 10, 1, window=4)
    assert decision.selected_ranks == (1,)
    assert decision.usage.calls == 4  # every issued call counts, cancelled ones included
    assert decision.usage.input_tokens is None  # cancelled calls' tokens are unknown
    assert [(r.rank, r.outcome) for r in decision.records] == [
        (1, "yes"),
        (2, "cancelled"),
        (3, "cancelled"),
        (4, "cancelled"),
    ]
    assert backend2.cancelled == 3 and backend2.in_flight == 0


def test_usage_sums_tokens_and_unknown_stays_unknown() -> None:
    known = rerank(ScriptedBackend(lambda r: N, usage=Usage(1, 5, 2)), 3, 2)
    assert known.usage == Usage(3, 15, 6)
    partly = ScriptedBackend(
        lambda r: N, usage=lambda r: Usage(1, None, 2) if r == 2 else Usage(1, 5, 2)
    )
    decision = rerank(partly, 3, 2)
    assert decision.usage == Usage(3, None, 6)
    trace = run_reranker(DecisionReranker(partly), "q", hits(3), 2).trace
    assert trace is not None
    payload = json.loads(json.dumps(trace.to_dict()))
    assert payload["usage"] == {"calls": 3, "input_tokens": None, "output_tokens": 6}
    assert payload["records"][1]["usage"]["input_tokens"] is None
    assert payload["records"][0]["usage"]["input_tokens"] == 5


def test_a_backend_that_reports_no_calls_still_counts_one_per_call() -> None:
    decision = rerank(ScriptedBackend(lambda r: Y, usage=Usage.zero()), 5, 2)
    assert decision.usage == Usage(2, 0, 0)


def test_records_one_per_candidate_asked() -> None:
    decision = rerank(ScriptedBackend([N, Y, A, Y], delays=[0.002, 0, 0, 0]), 4, 2)
    assert [(r.rank, r.outcome, r.detail) for r in decision.records] == [
        (1, "no", "dropped"),
        (2, "yes", "kept"),
        (3, "abstain", "kept"),
    ]
    assert decision.records[0].latency_ms >= 1.0
    assert all(r.usage == Usage(1, 10, 1) for r in decision.records)


def test_caller_cancellation_propagates_and_leaves_no_task_running() -> None:
    block = asyncio.Event()
    backend = ScriptedBackend(lambda r: Y, block=block)

    async def scenario() -> None:
        task = asyncio.create_task(
            DecisionReranker(backend, window=3).rerank("q", candidates(10), 5)
        )
        while backend.in_flight < 3:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert backend.in_flight == 0 and backend.cancelled == 3
        assert asyncio.all_tasks() == {asyncio.current_task()}

    run(scenario())


def test_deadline_fails_closed_and_cancels_calls() -> None:
    # The host enforces the reranker's deadline_s (the lower of it and the search's): the
    # reranker wraps nothing in a deadline of its own.
    backend = ScriptedBackend(lambda r: Y, delays=lambda r: 5.0)
    started = time.perf_counter()
    with pytest.raises(RerankError) as info:
        run_reranker(
            DecisionReranker(backend, window=2, deadline_s=0.05),
            "the query",
            hits(10),
            3,
            on_error="raise",
        )
    assert time.perf_counter() - started < 2.0
    assert info.value.reason == "timeout"
    assert "its own deadline of 0.05 s" in str(info.value)
    assert "deadline_s" in str(info.value)
    assert info.value.usage.calls == 2  # type: ignore[attr-defined]
    assert backend.in_flight == 0 and backend.cancelled == 2
    trace = run_reranker(
        DecisionReranker(ScriptedBackend(lambda r: Y, delays=lambda r: 5.0), deadline_s=0.02),
        "q",
        hits(4),
        2,
        on_error="coarse",
    ).trace
    assert trace is not None and trace.status is RerankStatus.DEGRADED
    assert trace.reason is not None and trace.reason.startswith("timeout")


def test_a_backends_own_timeout_error_is_not_the_deadline() -> None:
    with pytest.raises(TimeoutError) as info:
        rerank(ScriptedBackend(lambda r: TimeoutError("backend said so")), 3, 2)
    assert not isinstance(info.value, RerankError)


def test_descriptor_is_json_and_names_the_policy() -> None:
    reranker = DecisionReranker(ScriptedBackend([Y]), window=2, backend_name="scripted")
    assert reranker.policy_id == "rankseam.rerank.decision.v1"
    assert json.loads(json.dumps(dict(reranker.descriptor))) == {
        "name": "decision",
        "backend": "scripted",
        "backend_policy_id": "test.scripted.v1",
        "decision_kind": "memory.rerank",
        "keep": ["abstain", "yes"],
        "window": 2,
        "deadline_s": 30.0,
    }
    assert reranker.deterministic is False and reranker.needs_embeddings is False
