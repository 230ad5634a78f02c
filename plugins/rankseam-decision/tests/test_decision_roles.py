"""One backend instance, two roles: the write gate fails open, the reranker fails closed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest

import rankseam_decision
from rankseam.compose import ComponentContext, Config
from rankseam.decision import (
    RERANK_ROLE,
    WRITE_GATE_ROLE,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
    ask_write_gate,
)
from rankseam.errors import BackendUnavailableError, RerankError
from rankseam.registry import DecisionBackendRegister, Registry, RerankerRegister
from rankseam.seam import rerank_pool
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


def assembled() -> tuple[ComponentContext, list[SwitchableBackend]]:
    """A registry filled through the real registration hooks: the plugin's own hookimpl and a
    test plugin's backend registered the way a plugin registers one."""
    registry = Registry()
    rankseam_decision.register_rerankers(register=RerankerRegister(registry, "decision"))
    built: list[SwitchableBackend] = []

    def factory(options: Mapping[str, Any], context: object) -> SwitchableBackend:
        built.append(SwitchableBackend())
        return built[-1]

    DecisionBackendRegister(registry, "test-backends")("switchable", factory)
    config = Config.from_mapping({"rerankers": {"decision": {"backend": "switchable"}}})
    return ComponentContext(config, registry), built


def test_same_backend_instance_serves_the_gate_open_and_the_reranker_closed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    context, built = assembled()
    reranker = context.reranker("decision")
    gate = context.decision_backend("switchable", WRITE_GATE_ROLE)
    assert len(built) == 1  # one instance ...
    backend = built[0]
    assert reranker.backend is backend  # ... unwrapped for the fail-closed rerank role
    assert context.decision_backend("switchable", RERANK_ROLE) is backend
    pool = tuple(Hit(MemoryRef("t", f"m{i}", 1), f"memory {i}", 1.0) for i in range(3))

    async def scenario() -> None:
        # healthy: the gate refuses a NO, the reranker falls back (all NO)
        verdict = await ask_write_gate(gate, "memory text")
        assert (verdict.store, verdict.degraded, verdict.outcome) == (False, False, "no")
        _out, trace = await rerank_pool("q", pool, 2, reranker)
        assert trace is not None and trace.used_fallback and trace.usage.calls == 3
        assert trace.usage.input_tokens is None  # unknown token counts stay unknown

        backend.healthy = False
        # down: the gate stores anyway and says so; the rerank raises
        with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
            verdict = await ask_write_gate(gate, "secret memory text")
        assert (verdict.store, verdict.degraded) == (True, True)
        # the failed call counts: once, tokens unknown (this backend attaches no usage)
        assert verdict.usage == Usage(1, None, None)
        record = next(r for r in caplog.records if getattr(r, "event", "") == "decision.fallback")
        assert record.role == "write_gate" and record.decision_kind == "memory.write-gate"
        assert "secret" not in caplog.text
        with pytest.raises(RerankError) as info:
            await rerank_pool("q", pool, 2, reranker)
        assert info.value.reason == "unavailable"
        # both roles, concurrently, on the one instance
        results = await asyncio.gather(
            ask_write_gate(gate, "x"), rerank_pool("q", pool, 2, reranker), return_exceptions=True
        )
        assert results[0].store is True and isinstance(results[1], RerankError)

    asyncio.run(scenario())
    assert backend.calls == (1 + 3) + (1 + 1) + (1 + 1)  # healthy, down, concurrent


@pytest.fixture
def switchable_in_the_global_registry() -> Any:
    """Register a test backend in the process registry through the public register object (as a
    plugin's hook would), and forget it afterwards so other tests see a clean registry."""
    from rankseam.plugins import get_registry, reset_plugins

    built: list[SwitchableBackend] = []

    def factory(options: Mapping[str, Any], context: object) -> SwitchableBackend:
        built.append(SwitchableBackend())
        return built[-1]

    reset_plugins()
    DecisionBackendRegister(get_registry(), "test-backends")("switchable", factory)
    try:
        yield built
    finally:
        reset_plugins()


def test_memory_write_gate_and_decision_search_share_one_backend(
    tmp_path: Any, switchable_in_the_global_registry: list[SwitchableBackend]
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
        backend = switchable_in_the_global_registry[0]
        assert len(switchable_in_the_global_registry) == 1  # one instance for both roles
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
    assert len(switchable_in_the_global_registry) == 1
