"""One backend instance, two roles: the write gate fails open, the reranker fails closed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from rankseam.errors import BackendUnavailableError, RerankError
from rankseam.plugin import DecisionBackendRegister, FactoryContext, hookimpl
from rankseam.plugin.decision import (
    RERANK_ROLE,
    WRITE_GATE_ROLE,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
    write_gate_request,
)
from rankseam.testing import arun_reranker, factory_context, installed_plugin
from rankseam.types import Hit, MemoryRef, Usage


class SwitchableBackend:
    """A decision backend (the thing outside us) that can be taken down."""

    policy_id = "test.switchable.v1"

    def __init__(self) -> None:
        self.healthy = True
        self.calls = 0

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        self.calls += 1
        if not self.healthy:
            raise BackendUnavailableError("the decision service is down")
        return DecisionResult(DecisionOutcome.NO, self.policy_id, Usage(1, None, None))


class SwitchablePlugin:
    """A test plugin that registers the 'switchable' backend, the way a plugin's hook does."""

    def __init__(self) -> None:
        self.built: list[SwitchableBackend] = []

    @hookimpl
    def register_decision_backends(self, register: DecisionBackendRegister) -> None:
        register("switchable", self.factory, summary="a backend that can be taken down")

    def factory(self, options: Mapping[str, Any], context: object) -> SwitchableBackend:
        self.built.append(SwitchableBackend())
        return self.built[-1]


@pytest.fixture
def switchable() -> Iterator[list[SwitchableBackend]]:
    """The 'switchable' backend installed next to the decision plugin (which its own entry
    point loads); gone after the test."""
    plugin = SwitchablePlugin()
    with installed_plugin(plugin, name="test-backends"):
        yield plugin.built


def assembled() -> FactoryContext:
    return factory_context({"rerankers": {"decision": {"backend": "switchable"}}})


def test_same_backend_instance_serves_the_gate_open_and_the_reranker_closed(
    caplog: pytest.LogCaptureFixture, switchable: list[SwitchableBackend]
) -> None:
    context, built = assembled(), switchable  # built: every instance the factory made
    reranker = context.build("reranker", "decision")
    gate = context.decision_backend("switchable", WRITE_GATE_ROLE)
    assert len(built) == 1  # one instance ...
    backend = built[0]
    assert reranker.backend is backend  # ... unwrapped for the fail-closed rerank role
    assert context.decision_backend("switchable", RERANK_ROLE) is backend
    pool = tuple(Hit(MemoryRef("t", f"m{i}", 1), f"memory {i}", 1.0) for i in range(3))

    async def scenario() -> None:
        # healthy: the gate refuses a NO, the reranker falls back (all NO)
        verdict = await gate.evaluate(write_gate_request("memory text"))
        assert (verdict.outcome, verdict.used_fallback) == (DecisionOutcome.NO, False)
        trace = (await arun_reranker(reranker, "q", pool, 2)).trace
        assert trace is not None and trace.used_fallback and trace.usage.calls == 3
        assert trace.usage.input_tokens is None  # unknown token counts stay unknown

        backend.healthy = False
        # down: the gate's envelope answers a marked ABSTAIN (so the memory is stored, and
        # the verdict says degraded); the rerank raises
        with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
            verdict = await gate.evaluate(write_gate_request("secret memory text"))
        assert (verdict.outcome, verdict.used_fallback) == (DecisionOutcome.ABSTAIN, True)
        # the failed call counts: once, tokens unknown (this backend attaches no usage)
        assert verdict.usage == Usage(1, None, None)
        record = next(r for r in caplog.records if getattr(r, "event", "") == "decision.fallback")
        assert record.role == "write_gate" and record.decision_kind == "memory.write-gate"
        assert "secret" not in caplog.text
        with pytest.raises(RerankError) as info:
            await arun_reranker(reranker, "q", pool, 2)
        assert info.value.reason == "unavailable"
        # both roles, concurrently, on the one instance
        results = await asyncio.gather(
            gate.evaluate(write_gate_request("x")),
            arun_reranker(reranker, "q", pool, 2),
            return_exceptions=True,
        )
        assert results[0].used_fallback is True and isinstance(results[1], RerankError)

    asyncio.run(scenario())
    assert backend.calls == (1 + 3) + (1 + 1) + (1 + 1)  # healthy, down, concurrent


def test_memory_write_gate_and_decision_search_share_one_backend(
    tmp_path: Any, switchable: list[SwitchableBackend]
) -> None:
    from rankseam import open_memory

    config = {
        "write_gate": {"enabled": False, "backend": "switchable"},
        "search": {"reranker": "decision"},
        "rerankers": {"decision": {"backend": "switchable"}},
    }
    with open_memory(tmp_path / "m.sqlite3", config=config) as memory:
        # healthy: the gate's NO stores nothing; reranking (all NO) falls back visibly
        declined = memory.add("the train to porto leaves at nine", gate=True)
        assert declined.stored is False and declined.ref is None
        assert declined.gate is not None and not declined.gate.degraded
        memory.add("the train to porto leaves at nine")
        memory.add("porto trip is in june")
        result = memory.search("when is the porto trip", limit=1)
        assert result.trace.rerank is not None and result.trace.rerank.used_fallback
        backend = switchable[0]
        assert len(switchable) == 1  # one instance for both roles
        backend.healthy = False
        # down: the gate fails open (stores, says degraded); the search fails closed
        kept = memory.add("porto hotel booked", gate=True)
        assert kept.stored is True and kept.ref is not None
        assert kept.gate is not None and kept.gate.degraded
        assert memory.get(kept.ref.memory_id) is not None
        with pytest.raises(RerankError) as info:
            memory.search("when is the porto trip", limit=1)
        assert info.value.reason == "unavailable"
        degraded = memory.search("when is the porto trip", limit=1, on_error="coarse")
        assert degraded.status.value == "degraded"
    assert len(switchable) == 1
