"""The write gate's timeout, its two failure policies, its configuration and its honest cost.

The end-to-end form (``Memory.add`` over a real loopback model server that never answers) is in
``tests/test_failure_matrix.py``; here the gate runs over backend doubles through the public
``ask_write_gate`` and the configuration through ``Config``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from rankseam import WriteGateError
from rankseam.compose import Config
from rankseam.decision import (
    DEFAULT_WRITE_GATE_TIMEOUT_S,
    WRITE_GATE_ROLE,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
    Role,
    wrap_for_role,
)
from rankseam.errors import BackendUnavailableError, ConfigurationError
from rankseam.types import Usage
from rankseam.writing.gate import ask_write_gate


class Hanging:
    """A backend that never answers (until cancelled); says what its cancellation cost."""

    policy_id = "test.hanging.v1"

    def __init__(self, spent: Usage | None = Usage(3, None, None)) -> None:
        self.spent = spent
        self.cancelled = False

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            self.cancelled = True
            if self.spent is not None:
                exc.usage = self.spent  # type: ignore[attr-defined]  # as rankseam-openai does
            raise
        raise AssertionError("unreachable")


class Failing:
    policy_id = "test.failing.v1"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        raise self.error


def _role(policy: str, timeout_s: float = 0.05) -> Role:
    return Role("write_gate", policy, timeout_s)


def test_the_gate_has_a_default_timeout() -> None:
    assert DEFAULT_WRITE_GATE_TIMEOUT_S == 10.0
    assert WRITE_GATE_ROLE.timeout_s == DEFAULT_WRITE_GATE_TIMEOUT_S
    role = Config().write_gate_role
    assert (role.failure_policy, role.timeout_s) == ("fail_open", 10.0)


def test_a_hanging_backend_fails_open_with_a_degraded_verdict_and_its_cost() -> None:
    backend = Hanging()
    verdict = asyncio.run(ask_write_gate(backend, "text", role=_role("fail_open")))
    assert backend.cancelled
    assert (verdict.store, verdict.degraded, verdict.outcome) == (
        True,
        True,
        DecisionOutcome.ABSTAIN,
    )
    assert verdict.usage == Usage(3, None, None)  # what the cancelled call had sent


def test_a_hanging_backend_fails_closed_with_a_typed_error_and_its_cost() -> None:
    backend = Hanging()
    with pytest.raises(WriteGateError) as info:
        asyncio.run(ask_write_gate(backend, "text", role=_role("fail_closed")))
    assert backend.cancelled
    assert info.value.reason == "timeout"
    assert info.value.usage == Usage(3, None, None)
    assert "NOT stored" in str(info.value) and "timeout_s" in str(info.value)


def test_a_failing_backend_fails_closed_with_its_error_as_cause() -> None:
    error = BackendUnavailableError("down", usage=Usage(2, 0, 0))
    with pytest.raises(WriteGateError) as info:
        asyncio.run(ask_write_gate(Failing(error), "text", role=_role("fail_closed")))
    assert info.value.reason == "unavailable" and info.value.__cause__ is error
    assert info.value.usage == Usage(2, 0, 0)


def test_a_fail_open_verdict_counts_what_the_failed_call_spent() -> None:
    error = BackendUnavailableError("down", usage=Usage(2, 0, 0))
    verdict = asyncio.run(ask_write_gate(Failing(error), "text"))
    assert verdict.degraded and verdict.usage == Usage(2, 0, 0)
    # an envelope handed in with another timeout gets the role's
    handle = wrap_for_role(Hanging(), Role("write_gate", "fail_open", 3600.0))
    verdict = asyncio.run(ask_write_gate(handle, "text", role=_role("fail_open")))
    assert verdict.degraded and verdict.usage == Usage(3, None, None)


def test_a_healthy_verdict_is_the_same_under_both_policies() -> None:
    class No:
        policy_id = "test.no.v1"

        async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
            return DecisionResult(DecisionOutcome.NO, self.policy_id, Usage(1, 5, 1))

    for policy in ("fail_open", "fail_closed"):
        verdict = asyncio.run(ask_write_gate(No(), "text", role=_role(policy, 5.0)))
        assert (verdict.store, verdict.degraded, verdict.usage) == (False, False, Usage(1, 5, 1))


def test_write_gate_table_sets_timeout_and_policy() -> None:
    config = Config.from_mapping(
        {
            "write_gate": {
                "backend": "heuristic",
                "timeout_s": 2.5,
                "failure_policy": "fail_closed",
            }
        }
    )
    assert config.write_gate and config.write_gate_backend == "heuristic"
    role = config.write_gate_role
    assert (role.name, role.failure_policy, role.timeout_s) == (
        "write_gate",
        "fail_closed",
        2.5,
    )


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"timeout_s": "10"}, "timeout_s"),
        ({"timeout_s": True}, "timeout_s"),
        ({"timeout_s": float("nan")}, "timeout_s"),
        ({"failure_policy": "closed"}, "failure_policy"),
        ({"failure_policy": "FAIL_OPEN"}, "failure_policy"),
        ({"timeout": 5}, "unknown [write_gate] key"),
    ],
)
def test_write_gate_table_refuses_bad_values(table: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message.replace("[", r"\[")):
        Config.from_mapping({"write_gate": {"backend": "heuristic", **table}})


# a backend that blocks the event-loop thread: Memory.add returns all the same ----------------

BLOCKING_PLUGIN = """
import threading

from rankseam.plugin import hookimpl
from rankseam.plugin.decision import DecisionOutcome, DecisionResult

RELEASE = threading.Event()


class Blocking:
    policy_id = "test.blocking-gate.v1"

    async def evaluate(self, request, /):
        RELEASE.wait(120)  # synchronous: blocks the event-loop thread; no timeout can cut it
        return DecisionResult(DecisionOutcome.NO, self.policy_id)


@hookimpl
def register_decision_backends(register):
    register("blocking", lambda options, context: Blocking())
"""


def _returns(fn: Any) -> Any:
    """``fn()`` run in a thread; fails the test if it has not returned within 60 s."""
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(60)
    if thread.is_alive():
        pytest.fail("Memory.add did not return: the gate's backend blocked it")
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.mark.parametrize("policy", ["fail_open", "fail_closed"])
def test_a_backend_blocking_the_loop_cannot_block_add(
    install: Any, tmp_path: Any, policy: str
) -> None:
    """No timing decides: the backend blocks until the test releases it, after add()
    returned."""
    import sys

    from rankseam import open_memory

    install("blockgate", BLOCKING_PLUGIN)
    config = {"write_gate": {"backend": "blocking", "timeout_s": 0.2, "failure_policy": policy}}
    memory = open_memory(tmp_path / "m.sqlite3", config=config)
    try:
        if policy == "fail_open":
            added = _returns(lambda: memory.add("remember the blue door", gate=True))
            assert added.stored and added.gate is not None and added.gate.degraded
            assert added.gate.usage == Usage(1, None, None)
        else:
            with pytest.raises(WriteGateError) as info:
                _returns(lambda: memory.add("remember the blue door", gate=True))
            assert info.value.reason == "timeout" and "NOT stored" in str(info.value)
            assert memory.search("blue door", 5, reranker=None).hits == ()
        # the Memory keeps working: the next add (gate off) and a search are served
        assert _returns(lambda: memory.add("the red door", gate=False)).stored
    finally:
        sys.modules["rs_test_blockgate"].RELEASE.set()
        memory.close()
