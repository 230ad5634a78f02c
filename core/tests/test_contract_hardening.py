"""Issue 17 (contract and isolation): the user's names, every role resolved, over-answers in
the trace, environment overrides that say so, reranker objects, truthful fallbacks, a deadline
for every reranker, and plugins that cannot wedge a Memory.

Nothing here depends on machine speed: a reranker that blocks waits on an event the test sets
only after the search has come back, so "the search returned while the reranker was still
blocked" is the assertion, never an elapsed time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam import RerankDecision, RerankError, RerankStatus, seam
from rankseam import decision as decision_port
from rankseam.compose import ComponentContext, Config, SearchConfig
from rankseam.decision import RERANK_ROLE, Role
from rankseam.errors import BackendUnavailableError, ConfigurationError
from rankseam.generation import GenerationRequest, GenerationResult
from rankseam.registry import GenerationBackendRegister, Registry
from rankseam.seam import rerank_pool
from rankseam.testing import synthetic_pool

DOCS = Path(__file__).resolve().parents[2] / "docs"
TEXTS = [
    "the spare key is under the blue flowerpot",
    "the spare tyre is in the boot of the car",
    "the blue jacket is at the dry cleaner",
    "key lime pie recipe from grandma",
    "the garden key hangs by the back door",
]
QUERY = "spare key blue"
#: Generous bound for "the call came back at all"; only reached when the code under test is
#: broken (a hang), never a measure of speed.
HANG = 60.0


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[rankseam.Memory]:
    for var in ("RANKSEAM_RERANK", "RANKSEAM_ON_ERROR", "RANKSEAM_POOL"):
        monkeypatch.delenv(var, raising=False)
    with rankseam.open_memory(tmp_path / "m.sqlite3") as mem:
        for text in TEXTS:
            mem.add(text)
        yield mem


def returns(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a thread; fail (instead of hanging the suite) if it never comes back."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(HANG)
    if thread.is_alive():
        pytest.fail(f"the call did not return within {HANG} s: it hangs")
    if "error" in box:
        raise box["error"]
    return box["value"]


class Reverse:
    """A healthy async reranker that needs the event loop (it awaits)."""

    policy_id = "test.reverse.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        await asyncio.sleep(0)
        return RerankDecision(tuple(c.rank for c in reversed(candidates))[:limit])


def assert_healthy_again(memory: rankseam.Memory) -> None:
    later = returns(lambda: memory.search(QUERY, limit=3, reranker=Reverse()))
    assert later.status is RerankStatus.OK
    assert [h.ref for h in later.hits] == [c.ref for c in later.trace.coarse][::-1][:3]


# 1. the user's name ---------------------------------------------------------------------------


def test_decision_failure_policy_is_the_public_name() -> None:
    from rankseam import plugin
    from rankseam.decision import DecisionFailurePolicy as FromDecision
    from rankseam.plugin import decision as plugin_decision
    from rankseam.plugin.decision import DecisionFailurePolicy as FromPlugin

    assert FromDecision is FromPlugin
    assert {p.value for p in FromDecision} == {"fail_open", "fail_closed"}
    assert "DecisionFailurePolicy" in plugin_decision.__all__
    assert "FailurePolicy" not in plugin_decision.__all__ + plugin.__all__


def test_failure_policy_is_only_a_deprecated_alias() -> None:
    with pytest.warns(DeprecationWarning, match="DecisionFailurePolicy"):
        from rankseam.plugin import FailurePolicy
    assert FailurePolicy is decision_port.DecisionFailurePolicy
    with pytest.warns(DeprecationWarning, match="DecisionFailurePolicy"):
        from rankseam.decision import FailurePolicy as Old
    assert Old is decision_port.DecisionFailurePolicy


# 2. every role resolved, fail-open by default ------------------------------------------------


def test_a_role_is_fail_open_unless_it_opts_into_fail_closed() -> None:
    assert Role("advisor").failure_policy is decision_port.DecisionFailurePolicy.FAIL_OPEN
    assert RERANK_ROLE.failure_policy is decision_port.DecisionFailurePolicy.FAIL_CLOSED


class BrokenGeneration:
    policy_id = "test.broken-generation.v1"

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: GenerationRequest, /) -> GenerationResult:
        self.calls += 1
        raise BackendUnavailableError("the model server is down")


def test_generation_backends_are_resolved_per_role_like_decision_backends() -> None:
    registry = Registry()
    built: list[BrokenGeneration] = []

    def factory(options: Mapping[str, Any], context: object) -> BrokenGeneration:
        built.append(BrokenGeneration())
        return built[-1]

    GenerationBackendRegister(registry, "tests")("broken", factory)
    context = ComponentContext(Config(), registry)
    request = GenerationRequest(
        "test.request", "answer", {"q": "x"}, {"type": "object", "properties": {}}
    )

    closed = context.generation_backend("broken", RERANK_ROLE)
    assert closed is built[0]  # the unwrapped handle: failures raise
    with pytest.raises(BackendUnavailableError):
        asyncio.run(closed.generate(request))

    for opened in (
        context.generation_backend("broken", Role("summary", "fail_open")),
        context.generation_backend("broken", Role("summary")),  # fail-open by default
        context.generation_backend("broken"),  # a consumer that names no role
    ):
        result = asyncio.run(opened.generate(request))
        assert result.used_fallback is True and result.output is None
        assert result.usage.calls == 1  # the failed call is counted, not hidden
    assert len(built) == 1  # one instance serves every role


# 3. over-answered ranks are never dropped silently ------------------------------------------


def test_ranks_beyond_the_limit_are_counted_and_named() -> None:
    pool, _ = synthetic_pool(8)

    class OverAnswers:
        policy_id = "test.over-answers.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            return RerankDecision((5, 4, 3, 2, 1, 6, 7, 8))

    hits, trace = asyncio.run(rerank_pool("q", pool, 3, OverAnswers()))
    assert hits == (pool[4], pool[3], pool[2])
    # the selection is the reranker's own top 3, and the status shows the cut (repaired)
    assert trace.status is RerankStatus.REPAIRED
    assert trace.discarded_rank_count == 0
    assert trace.over_limit_count == 5
    assert "over-answered" in (trace.reason or "") and "8 ranks for a limit of 3" in trace.reason
    assert trace.to_dict()["over_limit_count"] == 5


def test_an_answer_within_the_limit_reports_no_over_answer() -> None:
    pool, _ = synthetic_pool(8)
    _hits, trace = asyncio.run(rerank_pool("q", pool, 3, Reverse()))
    assert trace.over_limit_count == 0 and trace.reason is None


# 4. environment overrides say so; reranker objects; truthful fallbacks ------------------------


def test_rerank_none_in_the_environment_over_a_file_configured_reranker_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RANKSEAM_RERANK", "none")
    toml = tmp_path / "rankseam.toml"
    toml.write_text('[search]\nreranker = "identity"\n')
    with caplog.at_level(logging.WARNING, logger="rankseam"):
        mem = rankseam.open_memory(tmp_path / "m.sqlite3", config_file=toml)
    with mem:
        warned = [r for r in caplog.records if "RANKSEAM_RERANK" in r.getMessage()]
        assert warned and "'identity'" in warned[0].getMessage()
        assert warned[0].levelno == logging.WARNING
        mem.add(TEXTS[0])
        result = mem.search("spare key")
        assert result.status is RerankStatus.SKIPPED  # the environment still wins ...
        [note] = result.trace.notes  # ... visibly
        assert "RANKSEAM_RERANK" in note and "'identity'" in note and "off" in note
        assert result.trace.to_dict()["notes"] == [note]
        chosen = mem.search("spare key", reranker="identity")  # the caller chose: no note
        assert chosen.trace.notes == () and chosen.status is RerankStatus.OK


def test_rerank_none_without_a_configured_reranker_says_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("RANKSEAM_RERANK", "none")
    with caplog.at_level(logging.WARNING, logger="rankseam"):
        mem = rankseam.open_memory(tmp_path / "m.sqlite3")
    with mem:
        mem.add(TEXTS[0])
        assert mem.search("spare key").trace.notes == ()
    assert not [r for r in caplog.records if "RANKSEAM_RERANK" in r.getMessage()]


def test_open_memory_accepts_a_reranker_object(tmp_path: Path) -> None:
    with rankseam.open_memory(tmp_path / "m.sqlite3", reranker=Reverse()) as mem:
        for text in TEXTS:
            mem.add(text)
        result = mem.search(QUERY, limit=3)
        assert result.trace.rerank is not None
        assert result.trace.rerank.policy_id == Reverse.policy_id
        assert [h.ref for h in result.hits] == [c.ref for c in result.trace.coarse][::-1][:3]
        assert mem.search(QUERY, limit=3, reranker=None).status is RerankStatus.SKIPPED


def test_open_memory_says_what_to_pass_for_a_reranker(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="policy_id") as info:
        rankseam.open_memory(tmp_path / "m.sqlite3", reranker=object())
    assert "registered reranker name" in str(info.value)


@pytest.mark.parametrize("ranks", [(5, 4, 3), (2, 1), (1, 3)])
def test_used_fallback_with_ranks_that_are_not_the_coarse_ones_is_invalid_output(
    ranks: tuple[int, ...],
) -> None:
    pool, _ = synthetic_pool(6)

    class Lies:
        policy_id = "test.lies.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            return RerankDecision(ranks, used_fallback=True)

    with pytest.raises(RerankError, match="used_fallback=True") as info:
        asyncio.run(rerank_pool("q", pool, 3, Lies()))
    assert info.value.reason == "invalid_output"
    hits, trace = asyncio.run(rerank_pool("q", pool, 3, Lies(), on_error="coarse"))
    assert trace.status is RerankStatus.DEGRADED and trace.reason.startswith("invalid_output")
    assert hits == pool[:3]


def test_a_true_fallback_to_coarse_ranks_is_traced_as_one() -> None:
    pool, _ = synthetic_pool(6)

    class FallsBack:
        policy_id = "test.falls-back.v1"

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            return RerankDecision((1, 2), used_fallback=True)

    hits, trace = asyncio.run(rerank_pool("q", pool, 3, FallsBack()))
    assert hits == pool[:2] and trace.status is RerankStatus.FELL_BACK and trace.used_fallback
    assert trace.reason == "the reranker fell back to coarse ranks"


# 6. a deadline for every reranker ------------------------------------------------------------


def test_the_default_deadline_is_configurable_and_documented(tmp_path: Path) -> None:
    assert SearchConfig().rerank_deadline_s == seam.DEFAULT_RERANK_DEADLINE_S == 90.0
    cfg = Config.from_mapping({"search": {"rerank_deadline_s": 2.5}})
    assert cfg.search.rerank_deadline_s == 2.5
    for bad in (0, -1, float("nan"), float("inf"), "5", True):
        with pytest.raises(ConfigurationError, match="rerank_deadline_s"):
            Config.from_mapping({"search": {"rerank_deadline_s": bad}})
    for page in ("seam.md", "configuration.md"):
        text = (DOCS / page).read_text(encoding="utf-8")
        assert "rerank_deadline_s" in text and "90" in text, page
    assert f"{seam.DEADLINE_MARGIN_S:g} s" in (DOCS / "seam.md").read_text(encoding="utf-8")


class AwaitsForever:
    policy_id = "test.awaits-forever.v1"

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


class BlocksInAThread:
    """A synchronous reranker that blocks (like ``time.sleep``) until the test releases it."""

    policy_id = "test.blocks-sync.v1"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        self.entered.set()
        self.release.wait()
        return RerankDecision((1,))


class BlocksTheLoop(BlocksInAThread):
    """An async reranker that runs blocking code on the event loop (never awaits)."""

    policy_id = "test.blocks-loop.v1"

    async def rerank(  # type: ignore[override]
        self, query: str, candidates: Any, limit: int, /
    ) -> RerankDecision:
        return BlocksInAThread.rerank(self, query, candidates, limit)


class IgnoresCancellation:
    policy_id = "test.ignores-cancel.v1"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.cancelled = 0

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        while not self.release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                self.cancelled += 1
        return RerankDecision((1,))


def test_a_reranker_that_awaits_forever_is_cut_at_the_deadline(
    memory: rankseam.Memory,
) -> None:
    degraded = returns(
        lambda: memory.search(
            QUERY, limit=3, reranker=AwaitsForever(), on_error="coarse", rerank_deadline_s=0.2
        )
    )
    assert degraded.status is RerankStatus.DEGRADED
    assert degraded.trace.rerank.reason.startswith("timeout")
    assert [h.ref for h in degraded.hits] == [c.ref for c in degraded.trace.coarse][:3]
    with pytest.raises(RerankError, match="rerank deadline of 0.2 s") as info:
        returns(lambda: memory.search(QUERY, reranker=AwaitsForever(), rerank_deadline_s=0.2))
    assert info.value.reason == "timeout"
    assert_healthy_again(memory)


@pytest.mark.parametrize("kind", [BlocksInAThread, BlocksTheLoop])
def test_a_blocking_reranker_releases_the_search_at_the_deadline(
    memory: rankseam.Memory, kind: type[BlocksInAThread]
) -> None:
    blocked = kind()
    try:
        degraded = returns(
            lambda: memory.search(
                QUERY, limit=3, reranker=blocked, on_error="coarse", rerank_deadline_s=0.2
            )
        )
        assert blocked.entered.is_set() and not blocked.release.is_set()  # still blocked
        assert degraded.status is RerankStatus.DEGRADED
        assert degraded.trace.rerank.reason.startswith("timeout")
        # the same Memory keeps serving reranked searches while that work is abandoned
        assert_healthy_again(memory)
        with pytest.raises(RerankError) as info:
            returns(lambda: memory.search(QUERY, reranker=kind(), rerank_deadline_s=0.2))
        assert info.value.reason == "timeout"
        assert_healthy_again(memory)
    finally:
        blocked.release.set()


def test_a_blocking_reranker_releases_an_async_search_when_it_runs_in_a_thread(
    memory: rankseam.Memory,
) -> None:
    blocked = BlocksInAThread()
    try:
        result = returns(
            lambda: asyncio.run(
                memory.asearch(QUERY, reranker=blocked, on_error="coarse", rerank_deadline_s=0.2)
            )
        )
        assert not blocked.release.is_set() and result.status is RerankStatus.DEGRADED
    finally:
        blocked.release.set()


def test_a_reranker_that_ignores_cancellation_is_abandoned(memory: rankseam.Memory) -> None:
    stubborn = IgnoresCancellation()
    try:
        degraded = returns(
            lambda: memory.search(
                QUERY, reranker=stubborn, on_error="coarse", rerank_deadline_s=0.2
            )
        )
        assert degraded.status is RerankStatus.DEGRADED and not stubborn.release.is_set()
        assert stubborn.cancelled >= 1
        assert_healthy_again(memory)
    finally:
        stubborn.release.set()


# 7. no plugin exception of any kind wedges a Memory ------------------------------------------


class Fatal(BaseException):
    """A BaseException that is neither SystemExit nor KeyboardInterrupt."""


FATAL = [SystemExit(3), KeyboardInterrupt(), Fatal("boom"), asyncio.CancelledError()]


class Raises:
    policy_id = "test.raises.v1"

    def __init__(self, exc: BaseException, where: str) -> None:
        self.exc = exc
        self.where = where

    async def _raise(self) -> None:
        await asyncio.sleep(0)
        raise self.exc

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        if self.where == "task":  # in a task of the plugin's own, on the Memory's loop
            await asyncio.ensure_future(self._raise())
        await asyncio.sleep(0)
        raise self.exc


class RaisesSync:
    policy_id = "test.raises-sync.v1"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        raise self.exc


class RaisesInline:
    policy_id = "test.raises-inline.v1"
    needs_event_loop = False

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
        raise self.exc


def _makers() -> list[tuple[str, Callable[[BaseException], Any]]]:
    return [
        ("async", lambda exc: Raises(exc, "coroutine")),
        ("async-task", lambda exc: Raises(exc, "task")),
        ("sync", RaisesSync),
        ("inline", RaisesInline),
    ]


@pytest.mark.parametrize("exc", FATAL, ids=lambda e: type(e).__name__)
@pytest.mark.parametrize(("how", "make"), _makers(), ids=[m[0] for m in _makers()])
def test_a_fatal_plugin_exception_fails_one_search_and_the_memory_keeps_working(
    memory: rankseam.Memory, exc: BaseException, how: str, make: Callable[..., Any]
) -> None:
    with pytest.raises(RerankError) as info:
        returns(lambda: memory.search(QUERY, limit=3, reranker=make(exc)))
    assert info.value.reason == "exception"
    assert type(exc).__name__ in str(info.value)
    degraded = returns(lambda: memory.search(QUERY, limit=3, reranker=make(exc), on_error="coarse"))
    assert degraded.status is RerankStatus.DEGRADED
    assert degraded.trace.rerank.reason == f"exception: {type(exc).__name__}"
    assert_healthy_again(memory)


def test_a_genuine_cancellation_of_the_search_still_propagates(memory: rankseam.Memory) -> None:
    async def scenario() -> None:
        entered = asyncio.Event()

        class Slow:
            policy_id = "test.slow.v1"

            async def rerank(self, query: str, candidates: Any, limit: int, /) -> Any:
                entered.set()
                await asyncio.sleep(3600)

        task = asyncio.ensure_future(memory.asearch(QUERY, reranker=Slow(), on_error="coarse"))
        await entered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    returns(lambda: asyncio.run(scenario()))


def test_a_fatal_exception_in_a_trace_stays_json(memory: rankseam.Memory) -> None:
    degraded = returns(
        lambda: memory.search(QUERY, reranker=Raises(SystemExit(1), "task"), on_error="coarse")
    )
    json.dumps(degraded.to_dict())


# trace_text = false ---------------------------------------------------------------------------


@pytest.mark.parametrize("trace_text", [True, False])
def test_trace_text_false_keeps_memory_text_out_of_traces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace_text: bool
) -> None:
    monkeypatch.delenv("RANKSEAM_RERANK", raising=False)
    with rankseam.open_memory(tmp_path / "m.sqlite3", trace_text=trace_text) as mem:
        for text in TEXTS:
            mem.add(text)
        result = mem.search(QUERY, limit=2, reranker=Reverse())
        trace = json.dumps(result.trace.to_dict())
        in_pool = [c.text for c in result.trace.coarse]
        assert len(in_pool) >= 3
        found = [t for t in TEXTS if t in trace]
        if trace_text:  # the positive control: text is there by default
            assert in_pool == [mem.get(c.ref).text for c in result.trace.coarse]
            assert len(found) == len(in_pool)
        else:
            assert in_pool == [None] * len(in_pool) and found == []
            assert [h.text for h in result.hits] == [mem.get(h.ref).text for h in result.hits]
