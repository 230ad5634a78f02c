"""Pins of the seam's other paths (docs/seam.md, "Deadline"): a synchronous caller's stage
(a stopped loop, a stage that never came back), an inline reranker (suspending, late), a
synchronous reranker's thread, the candidate views and the argument checks.

No timing decides a verdict: "late" uses a deadline far below any real call, and blocking
rerankers wait for the test to release them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import numpy as np
import pytest

from rankseam import RerankDecision, RerankError, RerankStatus, Usage
from rankseam.errors import ValidationError
from rankseam.loop import LoopRunner
from rankseam.seam import (
    MAX_POOL,
    MIN_POOL,
    RerankStage,
    as_async_reranker,
    expired_rerank,
    make_candidates,
    prepare_reranker,
    rerank_pool,
    reranker_choice,
    runs_inline,
    validate_pool_size,
)
from rankseam.testing import synthetic_pool

POOL, VECTORS = synthetic_pool(5)


def _stage(reranker: Any, *, on_error: Any = "raise", deadline_s: float = 20.0) -> RerankStage:
    return RerankStage(
        "q", POOL, 3, prepare_reranker(reranker), on_error=on_error, deadline_s=deadline_s
    )


class StopsTheLoop:
    policy_id = "test.stops-loop.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
        asyncio.get_running_loop().stop()
        await asyncio.Event().wait()


def test_a_reranker_that_stops_the_loop_fails_its_stage() -> None:
    runner = LoopRunner()
    try:
        with pytest.raises(RerankError) as info:
            _stage(StopsTheLoop()).run_sync(runner)
        assert info.value.policy_id == "test.stops-loop.v1"
        assert info.value.reason == "exception"
        assert str(info.value.__cause__) == (
            "the event loop running reranker 'test.stops-loop.v1' was stopped (a plugin called "
            "loop.stop()); a plugin may not stop the host's event loop. The search treats it as "
            "the reranker's failure (the next search runs on a fresh loop); fix the reranker"
        )
        hits, trace = _stage(StopsTheLoop(), on_error="coarse").run_sync(runner)
        assert hits == POOL[:3] and trace.status is RerankStatus.DEGRADED
        assert trace.reason == "exception: RerankError" and trace.latency_ms >= 0.0
        # the runner serves the next stage on a fresh loop
        hits, trace = _stage(Answers((2, 1))).run_sync(runner)
        assert hits == (POOL[1], POOL[0]) and trace.status is RerankStatus.OK
    finally:
        runner.close()


class Answers:
    policy_id = "test.answers.v1"

    def __init__(self, ranks: tuple[int, ...]) -> None:
        self.ranks = ranks
        self.seen: list[tuple[str, int, int]] = []

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        self.seen.append((query, len(candidates), limit))
        return RerankDecision(self.ranks)


def test_a_synchronous_caller_runs_the_stage_on_the_runner() -> None:
    runner = LoopRunner()
    try:
        reranker = Answers((3,))
        hits, trace = _stage(reranker).run_sync(runner)
        assert reranker.seen == [("q", 5, 3)]
        assert hits == (POOL[2],) and trace.selected_ranks == (3,)
    finally:
        runner.close()


def test_a_stage_that_never_came_back_applies_the_deadline_policy() -> None:
    hits, trace = expired_rerank(
        POOL, 2, Answers((1,)), on_error="coarse", deadline_s=3.0, waited_s=4.25
    )
    assert hits == POOL[:2]
    assert trace.status is RerankStatus.DEGRADED and trace.reason == "timeout: RerankError"
    assert trace.policy_id == "test.answers.v1" and trace.latency_ms == 4250.0
    assert (trace.limit, trace.candidate_count, trace.selected_ranks) == (2, 5, (1, 2))
    with pytest.raises(RerankError) as info:
        expired_rerank(POOL, 2, Answers((1,)), on_error="raise", deadline_s=3.0, waited_s=4.25)
    assert info.value.reason == "timeout" and info.value.policy_id == "test.answers.v1"
    assert info.value.usage == Usage.zero()  # the abandoned work's cost is unknown
    assert str(info.value.__cause__) == (
        "reranker 'test.answers.v1' did not answer within the rerank deadline of 3 s (the "
        "search waited 4.25 s; the reranker blocked its event loop, which was abandoned and "
        "replaced). Raise [search] rerank_deadline_s (or search(..., rerank_deadline_s=...)), "
        "lower the pool size, or fix the reranker"
    )
    # an object that is no reranker still gets the policy, named by its type
    _, bare = expired_rerank(POOL, 2, object(), on_error="coarse", deadline_s=3.0, waited_s=1)
    assert bare.policy_id == "object"


class Inline:
    policy_id = "test.inline.v1"
    needs_event_loop = False

    def __init__(self, *, suspends: bool = False, busy_s: float = 0.0) -> None:
        self.suspends = suspends
        self.busy_s = busy_s
        self.seen: list[tuple[str, int, int]] = []

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        self.seen.append((query, len(candidates), limit))
        if self.suspends:
            await asyncio.sleep(0)
        time.sleep(self.busy_s)  # never suspends: blocks the caller's thread
        return RerankDecision((2,), usage=Usage(1, 1, 1))


def test_an_inline_reranker_runs_in_the_callers_thread() -> None:
    reranker = Inline()
    assert runs_inline(reranker)
    hits, trace = _stage(reranker).run_sync(LoopRunner())  # never touches the runner's loop
    assert reranker.seen == [("q", 5, 3)]
    assert hits == (POOL[1],) and trace.usage == Usage(1, 1, 1)
    hits, trace = asyncio.run(_stage(Inline()).run())  # the async path runs it inline too
    assert hits == (POOL[1],) and trace.status is RerankStatus.OK


def test_an_inline_reranker_that_suspends_is_its_failure() -> None:
    with pytest.raises(RerankError) as info:
        _stage(Inline(suspends=True)).run_inline()
    assert info.value.reason == "exception" and info.value.policy_id == "test.inline.v1"
    assert str(info.value.__cause__) == (
        "reranker 'test.inline.v1' declares needs_event_loop = False, but its rerank suspended "
        "(it awaited something that needs an event loop); remove the declaration or the await"
    )
    assert info.value.__cause__.policy_id == "test.inline.v1"  # type: ignore[union-attr]


def test_a_late_inline_answer_is_discarded() -> None:
    stage = _stage(Inline(busy_s=0.01), deadline_s=1e-6, on_error="coarse")
    hits, trace = stage.run_inline()
    assert hits == POOL[:3] and trace.status is RerankStatus.DEGRADED
    assert trace.reason == "timeout: RerankError"
    with pytest.raises(RerankError) as info:
        _stage(Inline(busy_s=0.01), deadline_s=1e-6).run_inline()
    assert info.value.reason == "timeout" and info.value.policy_id == "test.inline.v1"
    message = str(info.value.__cause__)
    assert message.startswith(
        "reranker 'test.inline.v1' did not answer within the rerank deadline of 1e-06 s (it took "
    )
    assert message.endswith(
        " s; it declares needs_event_loop = False, so it ran in the caller's thread, which "
        "cannot be interrupted, and its late answer was discarded). Raise [search] "
        "rerank_deadline_s (or search(..., rerank_deadline_s=...)), lower the pool size, or fix "
        "the reranker"
    )


def test_which_rerankers_run_inline() -> None:
    class SyncDeclares:
        needs_event_loop = False

        def rerank(self, query: str, candidates: Any, limit: int, /) -> Any: ...

    class AsyncTrue:
        needs_event_loop = True

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any: ...

    class AsyncFalsy:
        needs_event_loop = 0  # only False declares it

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any: ...

    assert runs_inline(Inline()) is True
    assert runs_inline(Answers(())) is False  # no declaration: needs a loop
    assert runs_inline(SyncDeclares()) is False
    assert runs_inline(AsyncTrue()) is False
    assert runs_inline(AsyncFalsy()) is False
    assert runs_inline(object()) is False


def test_a_synchronous_reranker_runs_in_a_daemon_thread_of_its_own() -> None:
    seen: list[Any] = []

    class Sync:
        policy_id = "test.sync.v1"
        descriptor = {"kind": "sync"}

        def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            thread = threading.current_thread()
            seen.append((query, len(candidates), limit, thread.name, thread.daemon))
            return RerankDecision((1,))

    adapted = as_async_reranker(Sync())
    assert adapted.policy_id == "test.sync.v1"  # attributes pass through
    assert adapted.descriptor == {"kind": "sync"}  # type: ignore[attr-defined]
    assert as_async_reranker(Answers((1,))).__class__ is Answers  # async: itself
    hits, trace = asyncio.run(rerank_pool("the query", POOL, 2, Sync()))
    assert hits == (POOL[0],)
    assert seen == [("the query", 5, 2, "rankseam-sync-rerank", True)]
    assert dict(trace.descriptor) == {"kind": "sync"}


def test_candidate_views_show_every_field_of_their_hit() -> None:
    views = make_candidates(POOL, max_chars=len(POOL[0].text))
    n = len(views)
    assert views[-n] == views[0] and views[-1] == views[n - 1]
    with pytest.raises(IndexError):
        views[-n - 1]
    for i, (view, hit) in enumerate(zip(views, POOL, strict=True)):
        assert view.rank == i + 1 and view.ref == hit.ref and view.score == hit.score
        assert view.importance == hit.importance and view.matched_by == hit.matched_by
        assert view.channel_scores == hit.channel_scores
    assert views[0].text == POOL[0].text  # exactly max_chars: kept whole
    scores = views.scores()
    assert scores.dtype == np.float64 and scores.shape == (n,)
    assert scores.tolist() == [h.score for h in POOL]


def test_one_dimensional_vectors_stack_and_empty_ones_do_not() -> None:
    ones = [np.array([float(i)], dtype=np.float32) for i in range(len(POOL))]
    matrix = make_candidates(POOL, vectors=ones).embeddings()
    assert matrix is not None and matrix.shape == (len(POOL), 1)
    empty = np.zeros((len(POOL), 0), dtype=np.float32)
    assert make_candidates(POOL, vectors=empty).embeddings() is None
    full = make_candidates(POOL, vectors=np.stack(VECTORS)).embeddings()  # type: ignore[arg-type]
    assert full is not None and full.shape == (len(POOL), 16)


def test_pool_sizes_at_the_bounds_are_accepted_and_others_refused() -> None:
    assert validate_pool_size(MIN_POOL) == MIN_POOL == 1
    assert validate_pool_size(MAX_POOL) == MAX_POOL == 200
    for bad in (0, MAX_POOL + 1, 2.0, True):
        with pytest.raises(ValidationError) as info:
            validate_pool_size(bad)
        assert str(info.value) == (
            f"pool size must be an integer in 1..200, got {bad!r}; the coarse pool is bounded "
            "so that reranking cost stays bounded"
        )


def test_no_reranker_is_spelled_none_empty_or_blank() -> None:
    for choice in (None, "", "   ", "none", " none "):
        assert reranker_choice(choice) is None
    assert reranker_choice("mmr") == "mmr"
    assert reranker_choice("nothing") == "nothing"


# what the first mutation report showed unchecked -------------------------------------------


def test_a_view_carries_the_hits_channel_scores() -> None:
    import attrs

    hit = attrs.evolve(POOL[0], channel_scores={"lexical": 0.75}, matched_by=("lexical",))
    [view] = make_candidates((hit,))
    assert dict(view.channel_scores) == {"lexical": 0.75}


def test_a_vector_fetcher_answering_the_wrong_count_is_named() -> None:
    with pytest.raises(ValidationError) as info:
        make_candidates(POOL, vectors=VECTORS[:2])
    assert str(info.value) == (
        "2 vectors for a pool of 5 hits; a vector fetcher must answer one vector (or None) per "
        "identity, in order"
    )


def test_vectors_reach_only_a_reranker_that_asks_with_their_space() -> None:
    fetched: list[int] = []

    def fetch(refs: Any) -> Any:
        fetched.append(len(refs))
        return list(VECTORS)

    class Wants:
        policy_id = "test.wants.v1"
        needs_embeddings = True

        def __init__(self) -> None:
            self.seen: list[Any] = []

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            self.seen.append((candidates[0].embedding, candidates[0].embedding_space))
            return RerankDecision((1,))

    wants = Wants()
    asyncio.run(rerank_pool("q", POOL, 2, wants, fetch_vectors=fetch, embedding_space="sp-1"))
    assert fetched == [5]
    [(vector, space)] = wants.seen
    assert vector is not None and space == "sp-1"
    asyncio.run(rerank_pool("q", POOL, 2, Answers((1,)), fetch_vectors=fetch))
    assert fetched == [5]  # a reranker that does not ask gets no vectors fetched
    asyncio.run(rerank_pool("q", POOL, 2, wants))  # it asks, but no fetcher: none attached
    assert wants.seen[-1] == (None, None)


def test_an_oversized_pool_and_deadline_are_refused() -> None:
    pool, _ = synthetic_pool(MAX_POOL + 1)
    with pytest.raises(ValidationError) as info:
        asyncio.run(rerank_pool("q", pool, 3, Answers((1,))))
    assert str(info.value) == "the coarse pool holds 201 hits; at most 200 allowed"
    hits, _trace = asyncio.run(rerank_pool("q", POOL, 1, Answers((1,)), deadline_s=86400))
    assert hits == (POOL[0],)
    with pytest.raises(ValidationError, match="in \\(0, 86400\\]"):
        asyncio.run(rerank_pool("q", POOL, 1, Answers((1,)), deadline_s=86400.5))


def test_scored_ranks_keep_their_scores() -> None:
    from rankseam.seam import normalize_scored_ranks

    assert normalize_scored_ranks((2, 9, 1), (0.5, 0.1, 0.25), 3, 3) == ((2, 1), (0.5, 0.25), 1)
    assert normalize_scored_ranks((2, 1), None, 3, 3) == ((2, 1), None, 0)


def test_a_fallback_with_eight_own_ranks_shows_them_all() -> None:
    ranks = (8, 7, 6, 5, 4, 3, 2, 1)
    pool, _ = synthetic_pool(9)
    with pytest.raises(RerankError) as info:
        asyncio.run(rerank_pool("q", pool, 8, _Fixed(ranks, True)))
    assert "answered the ranks (8, 7, 6, 5, 4, 3, 2, 1);" in str(info.value.__cause__)
    with pytest.raises(RerankError) as nine:
        asyncio.run(rerank_pool("q", pool, 9, _Fixed((9, *ranks), True)))
    assert "answered the ranks (9, 8, 7, 6, 5, 4, 3, 2, '...');" in str(nine.value.__cause__)


class _Fixed:
    policy_id = "test.fixed.v1"

    def __init__(self, ranks: tuple[int, ...], used_fallback: bool = False) -> None:
        self.decision = RerankDecision(ranks, used_fallback=used_fallback)

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        return self.decision


def test_an_object_without_rerank_fails_its_stage_with_a_type_error() -> None:
    with pytest.raises(RerankError) as info:
        asyncio.run(rerank_pool("q", POOL, 2, object()))  # type: ignore[arg-type]
    cause = info.value.__cause__
    assert isinstance(cause, TypeError)
    assert str(cause).endswith("has no callable rerank(query, candidates, limit)")
    assert prepare_reranker(Inline()).inline is True
    assert prepare_reranker(Answers(())).inline is False


def test_a_plugin_raising_system_exit_is_named_with_its_cost() -> None:
    class Exits:
        policy_id = "test.exits.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
            exc = SystemExit(3)
            exc.usage = Usage(2, 2, 2)  # type: ignore[attr-defined]
            raise exc

    with pytest.raises(RerankError) as info:
        asyncio.run(rerank_pool("q", POOL, 2, Exits()))
    cause = info.value.__cause__
    assert isinstance(cause, RerankError)
    assert (cause.policy_id, cause.reason, cause.usage) == (
        "test.exits.v1",
        "exception",
        Usage(2, 2, 2),
    )
    assert info.value.usage == Usage(2, 2, 2)
    assert str(cause) == (
        "reranker 'test.exits.v1' raised SystemExit(3); a plugin may not stop the process, "
        "interrupt or cancel the search. The search treats it as the reranker's failure; fix "
        "the reranker"
    )


def test_latencies_are_measured_within_the_call() -> None:
    started = time.perf_counter()
    _hits, trace = asyncio.run(rerank_pool("q", POOL, 2, Answers((1,))))
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    assert 0.0 < trace.latency_ms <= elapsed_ms
    started = time.perf_counter()
    _hits, failed = asyncio.run(rerank_pool("q", POOL, 2, _Raises(), on_error="coarse"))
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    assert 0.0 < failed.latency_ms <= elapsed_ms


class _Raises:
    policy_id = "test.raises.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
        raise RuntimeError("x")


def test_a_loop_blocking_reranker_is_abandoned_after_the_deadline_and_margin() -> None:
    release = threading.Event()

    class Blocks:
        policy_id = "test.blocks.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
            release.wait(60)  # blocks the loop thread until the test releases it
            return RerankDecision((1,))

    runner = LoopRunner()
    started = time.perf_counter()
    try:
        hits, trace = _stage(Blocks(), on_error="coarse", deadline_s=0.2).run_sync(runner)
    finally:
        release.set()
        runner.close()
    elapsed_ms = (time.perf_counter() - started) * 1000.0
    assert hits == POOL[:3] and trace.status is RerankStatus.DEGRADED
    assert trace.reason == "timeout: RerankError"
    assert 0.0 < trace.latency_ms <= elapsed_ms


def test_trace_candidates_number_the_pool_from_one() -> None:
    from rankseam.seam import trace_candidates

    shown = trace_candidates(POOL[:3])
    assert [c.rank for c in shown] == [1, 2, 3]
    assert [c.text for c in shown] == [h.text for h in POOL[:3]]
    assert [c.text for c in trace_candidates(POOL[:2], text=False)] == [None, None]


class Declares:
    """A reranker that declares its own deadline and waits until the test releases it."""

    policy_id = "test.declares.v1"

    def __init__(self, deadline_s: Any) -> None:
        self.deadline_s = deadline_s
        self.cancelled = False

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise


def test_the_host_enforces_a_rerankers_own_deadline_below_the_searchs() -> None:
    reranker = Declares(0.01)
    stage = _stage(reranker, deadline_s=20.0)
    assert stage.deadline_s == 0.01 and stage.own_deadline
    with pytest.raises(RerankError) as info:
        asyncio.run(stage.run())
    assert reranker.cancelled and info.value.reason == "timeout"
    assert str(info.value.__cause__) == (
        "reranker 'test.declares.v1' did not answer within its own deadline of 0.01 s (the "
        "reranker's deadline_s) (it was cancelled). Raise the reranker's deadline_s option (for "
        "example [rerankers.decision] deadline_s), lower the pool size, or fix the reranker"
    )
    # the search's deadline, when lower, is the one that holds and is named
    lower = _stage(Declares(30.0), deadline_s=0.01)
    assert lower.deadline_s == 0.01 and not lower.own_deadline
    with pytest.raises(RerankError, match=r"the rerank deadline of 0\.01 s"):
        asyncio.run(lower.run())
    assert _stage(Declares(None)).deadline_s == 20.0


@pytest.mark.parametrize("declared", [0, -1.0, float("nan"), float("inf"), "5", True])
def test_a_rerankers_bad_deadline_is_its_defect(declared: Any) -> None:
    with pytest.raises(RerankError, match="test.declares.v1.*deadline_s") as info:
        _stage(Declares(declared))
    assert info.value.reason == "exception" and info.value.policy_id == "test.declares.v1"
