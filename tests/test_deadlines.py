"""The search's rerank deadline holds for the first-party decision reranker whatever its
backend does: block the event loop (synchronous code in an ``async def``) or ignore
cancellation, with several calls in flight (``window = 4``).

No timing decides a test: a blocking backend waits on an event that the test sets only after
the search came back, so the assertion is "the search returned while the backend was still
blocked"."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import rankseam
from rankseam.decision import DecisionOutcome, DecisionRequest, DecisionResult
from rankseam_decision import DecisionReranker

HANG = 60.0


@pytest.fixture
def memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[rankseam.Memory]:
    monkeypatch.delenv("RANKSEAM_RERANK", raising=False)
    with rankseam.open_memory(tmp_path / "m.sqlite3") as mem:
        for i in range(12):
            mem.add(f"note {i}: the spare key is under flowerpot number {i}")
        yield mem


def returns(fn: Any) -> Any:
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
        pytest.fail(f"the search did not return within {HANG} s: it hangs")
    if "error" in box:
        raise box["error"]
    return box["value"]


class BlocksTheLoop:
    """Blocks the event loop on every call until released (like ``time.sleep`` in async)."""

    policy_id = "test.blocking-backend.v1"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls = 0

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        self.calls += 1
        self.release.wait()
        return DecisionResult(DecisionOutcome.YES, self.policy_id)


class IgnoresCancellation:
    policy_id = "test.stubborn-backend.v1"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.cancelled = 0

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        while not self.release.is_set():
            try:
                await asyncio.sleep(0.01)
            except asyncio.CancelledError:
                self.cancelled += 1
        return DecisionResult(DecisionOutcome.YES, self.policy_id)


@pytest.mark.parametrize("backend_type", [BlocksTheLoop, IgnoresCancellation])
@pytest.mark.parametrize("on_error", ["raise", "coarse"])
def test_a_misbehaving_decision_backend_cannot_overrun_the_search_deadline(
    memory: rankseam.Memory, backend_type: type[Any], on_error: str
) -> None:
    backend = backend_type()
    reranker = DecisionReranker(backend, window=4, deadline_s=600.0)
    try:

        def search() -> Any:
            return memory.search(
                "spare key", limit=3, reranker=reranker, on_error=on_error, rerank_deadline_s=0.3
            )

        if on_error == "raise":
            with pytest.raises(rankseam.RerankError) as info:
                returns(search)
            assert info.value.reason == "timeout"
        else:
            result = returns(search)
            assert result.status is rankseam.RerankStatus.DEGRADED
            assert result.trace.rerank.reason.startswith("timeout")
        assert not backend.release.is_set()  # came back while the backend was still stuck
        healthy = returns(  # the decision reranker needs the (replaced) event loop
            lambda: memory.search(
                "spare key",
                limit=3,
                reranker="decision",
                reranker_options={"backend": "heuristic", "window": 4},
            )
        )
        assert healthy.status is rankseam.RerankStatus.OK
    finally:
        backend.release.set()
