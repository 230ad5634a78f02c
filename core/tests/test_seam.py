"""The seam's rules, whatever a plugin answers (docs/seam.md)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rankseam import BackendTimeoutError, RerankDecision, RerankError, RerankStatus, Usage
from rankseam.errors import ValidationError
from rankseam.seam import normalize_ranks, rerank_pool
from rankseam.testing import synthetic_pool

POOL, _ = synthetic_pool(6)


class Scripted:
    """A reranker that answers what it is told (the plugin under the seam's control)."""

    policy_id = "test.scripted.v1"

    def __init__(self, answer: Any = None, *, raises: BaseException | None = None) -> None:
        self.answer = answer
        self.raises = raises
        self.calls: list[tuple[str, int, int]] = []

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
        self.calls.append((query, len(candidates), limit))
        if self.raises is not None:
            raise self.raises
        return self.answer


def run(reranker: Any, limit: int = 3, pool: Any = POOL, **kw: Any) -> Any:
    return asyncio.run(rerank_pool("q", pool, limit, reranker, **kw))


def decision(*ranks: Any, **kw: Any) -> RerankDecision:
    return RerankDecision(ranks, **kw)


def test_valid_selection_resolves_to_the_original_hits() -> None:
    hits, trace = run(Scripted(decision(3, 1)))
    assert hits == (POOL[2], POOL[0])
    assert trace.status is RerankStatus.OK
    assert trace.selected_ranks == (3, 1)
    assert trace.discarded_rank_count == 0 and not trace.used_fallback


@pytest.mark.parametrize(
    ("answer", "kept", "discarded"),
    [
        ((0, 2), (2,), 1),  # rank 0
        ((-1, 2), (2,), 1),  # negative
        ((7, 2), (2,), 1),  # n + 1 with n = 6
        ((2, 2, 4), (2, 4), 1),  # duplicate
        (("2", 4), (4,), 1),  # a string, even one that looks like a rank
        ((2.0, 4), (4,), 1),  # a float is not an integer rank
        ((True, 4), (4,), 1),  # a bool is not a rank
        ((None, 5, 10**30), (5,), 2),
    ],
)
def test_invalid_ranks_are_discarded_and_counted(
    answer: tuple[Any, ...], kept: tuple[int, ...], discarded: int
) -> None:
    hits, trace = run(Scripted(decision(*answer)))
    assert trace.selected_ranks == kept
    assert hits == tuple(POOL[r - 1] for r in kept)
    assert trace.discarded_rank_count == discarded
    assert trace.status is RerankStatus.REPAIRED
    assert "discarded" in (trace.reason or "")


def test_no_valid_rank_falls_back_to_coarse_ranks() -> None:
    hits, trace = run(Scripted(decision(0, 99, "x")), limit=2)
    assert hits == POOL[:2]
    assert trace.selected_ranks == (1, 2)
    assert trace.used_fallback and trace.status is RerankStatus.FELL_BACK
    assert trace.discarded_rank_count == 3


def test_empty_selection_falls_back() -> None:
    hits, trace = run(Scripted(decision()), limit=4)
    assert hits == POOL[:4] and trace.status is RerankStatus.FELL_BACK and trace.used_fallback


def test_at_most_limit_ranks_are_kept_and_later_ones_counted_as_over_answered() -> None:
    hits, trace = run(Scripted(decision(6, 5, 4, 99, 3)), limit=2)
    assert trace.selected_ranks == (6, 5) and trace.discarded_rank_count == 0
    assert trace.over_limit_count == 3  # counted, not validated: the 99 is not "discarded"
    # the host cut the answer to the limit: the status says so, the selection is kept
    assert trace.status is RerankStatus.REPAIRED and "over-answered" in (trace.reason or "")
    assert hits == (POOL[5], POOL[4])


def test_the_reranker_gets_min_limit_n() -> None:
    reranker = Scripted(decision(1))
    run(reranker, limit=50)
    assert reranker.calls == [("q", 6, 6)]


def test_plugin_discard_count_is_added_to_the_seams() -> None:
    _, trace = run(Scripted(decision(1, 1, discarded_rank_count=2)))
    assert trace.discarded_rank_count == 3


def test_reranker_reported_fallback_is_visible() -> None:
    _, trace = run(Scripted(decision(1, 2, 3, used_fallback=True)))
    assert trace.used_fallback and trace.status is RerankStatus.FELL_BACK


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (RuntimeError("boom"), "exception"),
        (BackendTimeoutError("slow"), "timeout"),
        (TimeoutError(), "timeout"),
    ],
)
def test_a_raising_reranker_fails_closed_by_default(exc: Exception, reason: str) -> None:
    with pytest.raises(RerankError) as info:
        run(Scripted(raises=exc))
    assert info.value.reason == reason
    assert info.value.__cause__ is exc
    assert "on_error='fail_open'" in str(info.value)


@pytest.mark.parametrize("answer", [[1, 2], (1,), None, "1,2", {"selected_ranks": [1]}])
def test_an_answer_of_the_wrong_type_is_invalid_output(answer: Any) -> None:
    with pytest.raises(RerankError) as info:
        run(Scripted(answer))
    assert info.value.reason == "invalid_output"


def test_on_error_coarse_is_degraded_visible_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    failure = BackendTimeoutError("model too slow")
    failure.usage = Usage(calls=3, input_tokens=None, output_tokens=None)  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING, logger="rankseam.seam"):
        hits, trace = run(Scripted(raises=failure), limit=2, on_error="coarse")
    assert hits == POOL[:2]
    assert trace.status is RerankStatus.DEGRADED
    assert trace.reason.startswith("timeout")
    assert trace.usage.calls == 3 and trace.usage.input_tokens is None
    assert not trace.used_fallback  # degradation is not the reranker's own fallback
    [record] = [r for r in caplog.records if r.name == "rankseam.seam"]
    assert record.levelno == logging.WARNING
    assert record.policy_id == "test.scripted.v1" and record.reason == "timeout"
    assert "model too slow" not in record.getMessage()


def test_a_cancelled_error_raised_by_the_plugin_is_its_failure() -> None:
    """Only a cancellation of the search itself propagates; a plugin that raises
    CancelledError on its own has failed (degraded here, RerankError when failing closed)."""
    hits, trace = run(Scripted(raises=asyncio.CancelledError()), on_error="coarse")
    assert trace.status is RerankStatus.DEGRADED and trace.reason == "exception: CancelledError"
    assert hits == POOL[:3]
    with pytest.raises(RerankError) as info:
        run(Scripted(raises=asyncio.CancelledError()))
    assert info.value.reason == "exception"


def test_cancelling_the_search_propagates_and_cancels_the_reranker() -> None:
    seen: list[str] = []

    async def scenario() -> None:
        entered = asyncio.Event()

        class Waits:
            policy_id = "test.waits.v1"

            async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
                entered.set()
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    seen.append("cancelled")
                    raise

        task = asyncio.ensure_future(rerank_pool("q", POOL, 3, Waits(), on_error="coarse"))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(3):  # let the reranker's own task see its cancellation
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert seen == ["cancelled"]


def test_no_reranker_returns_coarse_order_without_trace() -> None:
    hits, trace = run(None, limit=4)
    assert hits == POOL[:4] and trace is None


def test_empty_pool_never_calls_the_reranker() -> None:
    reranker = Scripted(decision(1))
    hits, trace = run(reranker, pool=())
    assert hits == () and trace is None and reranker.calls == []


def test_sync_rerankers_are_supported() -> None:
    class Sync:
        policy_id = "test.sync.v1"

        def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            return RerankDecision((2,))

    hits, trace = run(Sync())
    assert hits == (POOL[1],) and trace.status is RerankStatus.OK


@pytest.mark.parametrize("limit", [0, -1, 1.5, True, "3"])
def test_bad_limits_are_refused(limit: Any) -> None:
    with pytest.raises(ValidationError, match="limit"):
        run(Scripted(decision(1)), limit=limit)


def test_bad_on_error_is_refused() -> None:
    with pytest.raises(ValidationError, match="on_error"):
        run(Scripted(decision(1)), on_error="ignore")


def test_candidate_text_is_cut_and_vectors_fetched_once() -> None:
    seen: dict[str, Any] = {}
    fetches: list[int] = []

    class Looker:
        policy_id = "test.look.v1"
        needs_embeddings = True

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            seen["texts"] = [c.text for c in candidates]
            seen["vectors"] = [c.embedding for c in candidates]
            return RerankDecision((1,))

    hits, vectors = synthetic_pool(5)

    def fetch(refs: Any) -> Any:
        fetches.append(len(refs))
        return vectors

    asyncio.run(rerank_pool("q", hits, 2, Looker(), max_chars=7, fetch_vectors=fetch))
    assert fetches == [5]
    assert all(len(t) <= 7 for t in seen["texts"])
    assert all(v is not None and not v.flags.writeable for v in seen["vectors"])


# property tests ------------------------------------------------------------------------------

rank_like = st.one_of(
    st.integers(min_value=-5, max_value=60),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.text(max_size=3),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(min_value=1, max_value=40),
    limit=st.integers(min_value=1, max_value=50),
    answer=st.one_of(
        st.lists(rank_like, max_size=80),
        st.sampled_from(["raise", "wrong-type", "cancel-free"]),
    ),
)
def test_whatever_the_plugin_answers_hits_are_a_valid_subset(
    n: int, limit: int, answer: Any
) -> None:
    pool, _ = synthetic_pool(n, seed=n)
    if answer == "raise":
        reranker = Scripted(raises=ValueError("plugin bug"))
    elif answer == "wrong-type":
        reranker = Scripted([1])
    elif answer == "cancel-free":
        reranker = Scripted(decision(*range(n, 0, -1)))
    else:
        reranker = Scripted(decision(*answer))

    hits, trace = run(reranker, limit=limit, pool=pool, on_error="coarse")
    k = min(limit, n)
    assert 1 <= len(hits) <= k
    assert len({h.ref for h in hits}) == len(hits)
    assert all(h in pool for h in hits)  # identity and text exact
    assert hits == tuple(pool[r - 1] for r in trace.selected_ranks)
    if isinstance(answer, list):
        kept, discarded = normalize_ranks(answer, n, k)
        assert trace.discarded_rank_count == discarded
        if kept:
            assert trace.selected_ranks == kept
            cut = discarded or trace.over_limit_count
            assert trace.status is (RerankStatus.REPAIRED if cut else RerankStatus.OK)
        else:
            assert trace.selected_ranks == tuple(range(1, k + 1))
            assert trace.status is RerankStatus.FELL_BACK and trace.used_fallback
    elif answer in ("raise", "wrong-type"):
        assert trace.status is RerankStatus.DEGRADED and hits == pool[:k]
    else:
        over = trace.over_limit_count
        assert trace.status is (RerankStatus.REPAIRED if over else RerankStatus.OK)


FAILURES: list[Any] = [
    ValueError("plugin bug"),
    BackendTimeoutError("slow"),
    TimeoutError(),
    SystemExit(2),
    KeyboardInterrupt(),
    asyncio.CancelledError(),
    GeneratorExit(),
]
behaviour = st.one_of(
    st.lists(rank_like, max_size=30).map(lambda ranks: ("answer", ranks)),
    st.sampled_from(FAILURES).map(lambda exc: ("raise", exc)),
    st.sampled_from([[1, 2], None, "1", RerankDecision((1,), scores=(0.5, 0.5))]).map(
        lambda value: ("wrong", value)
    ),
    st.lists(st.integers(2, 9), min_size=1, max_size=4).map(lambda r: ("lying-fallback", r)),
)


def test_fail_closed_raises_only_typed_errors() -> None:
    """Whatever the plugin does -- any answer, any exception (BaseExceptions included), a wrong
    type, a fallback flag on its own ranks -- a fail-closed search either answers with a valid
    selection or raises RerankError; and both paths are really taken."""
    paths: dict[str, int] = {"answered": 0, "raised": 0}

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(what=behaviour, n=st.integers(1, 20), limit=st.integers(1, 20))
    def check(what: tuple[str, Any], n: int, limit: int) -> None:
        pool, _ = synthetic_pool(n)
        kind, value = what
        if kind == "raise":
            reranker = Scripted(raises=value)
        elif kind == "wrong":
            reranker = Scripted(value)
        elif kind == "lying-fallback":
            reranker = Scripted(decision(*value, used_fallback=True))
        else:
            reranker = Scripted(decision(*value))
        try:
            hits, trace = run(reranker, limit=limit, pool=pool)
        except RerankError as exc:
            assert exc.reason in {"exception", "timeout", "invalid_output"}, exc.reason
            assert kind != "answer", "a plain answer of ranks never fails the search"
            paths["raised"] += 1
            return
        assert kind == "answer", f"{kind} {value!r} did not fail closed"
        assert len(hits) == len(trace.selected_ranks) <= min(n, limit)
        assert trace.to_dict()["status"] in {"ok", "repaired", "fell_back"}
        paths["answered"] += 1

    check()
    assert paths["raised"] >= 20 and paths["answered"] >= 20, paths


def test_a_reranker_wrapped_twice_runs_as_itself() -> None:
    """as_async_reranker's wrapper handed back to the seam is unwrapped, not wrapped again: a
    synchronous reranker that (wrongly) declares needs_event_loop = False still runs in its
    thread, never inline."""
    from rankseam.seam import as_async_reranker

    class SyncDeclaresInline:
        policy_id = "test.sync-inline.v1"
        needs_event_loop = False

        def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            return RerankDecision((2, 1))

    hits, trace = run(as_async_reranker(SyncDeclaresInline()), limit=2)
    assert trace.status is RerankStatus.OK and hits == (POOL[1], POOL[0])
