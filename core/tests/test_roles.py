"""Role resolution exists once, every role has a deadline, and the write gate's answers and
log records are pinned field by field (docs/decision-port.md).

The deadline tests never let timing decide: a hanging backend waits until it is cancelled, and
an outer guard of 20 s only turns a hang (a role whose deadline is not enforced) into a failure.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Mapping
from typing import Any

import pytest

from rankseam import RerankDecision, RerankStatus, WriteGateError, seam
from rankseam import decision as decision_port
from rankseam.compose import GENERATION_ROLE, ComponentContext, Config
from rankseam.decision import (
    DEFAULT_ROLE_TIMEOUT_S,
    DEFAULT_WRITE_GATE_TIMEOUT_S,
    RERANK_ROLE,
    WRITE_GATE_DECISION_KIND,
    WRITE_GATE_ROLE,
    DecisionFailurePolicy,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
    FailOpenDecisionBackend,
    Role,
    rerank_request,
    wrap_for_role,
)
from rankseam.errors import BackendUnavailableError, ConfigurationError
from rankseam.generation import FailOpenGenerationBackend, GenerationRequest, GenerationResult
from rankseam.registry import (
    DecisionBackendRegister,
    GenerationBackendRegister,
    Registry,
    RerankerRegister,
)
from rankseam.testing import synthetic_pool
from rankseam.types import Usage
from rankseam.writing.gate import GateVerdict, ask_write_gate, gate_without_verdict

GUARD_S = 20.0  # only turns a hang into a failure (below the 30 s default role timeout)


def run(call: Awaitable[Any]) -> Any:
    async def guarded() -> Any:
        try:
            return await asyncio.wait_for(call, GUARD_S)
        except TimeoutError:
            pytest.fail("the role's deadline was not enforced: the call hung")

    return asyncio.run(guarded())


class Hanging:
    """A decision backend that answers only when cancelled (and says what that cost)."""

    policy_id = "test.hanging.v1"
    deterministic = True

    def __init__(self) -> None:
        self.cancelled = 0

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            self.cancelled += 1
            exc.usage = Usage(4, 7, None)  # type: ignore[attr-defined]
            raise
        raise AssertionError("unreachable")


class Answers:
    policy_id = "test.answers.v1"

    def __init__(self, outcome: DecisionOutcome, rationale: str | None = None) -> None:
        self.outcome = outcome
        self.rationale = rationale

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        return DecisionResult(self.outcome, self.policy_id, Usage(1, 3, 1), self.rationale)


class Failing:
    policy_id = "test.failing.v1"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        raise self.error


def _context(**backends: Any) -> ComponentContext:
    registry = Registry()
    register = DecisionBackendRegister(registry, "tests")
    for name, backend in backends.items():
        register(name, lambda options, context, _b=backend: _b)
    return ComponentContext(Config(), registry)


# every role has a finite default deadline ------------------------------------------------------


def test_every_role_has_a_finite_default_timeout() -> None:
    assert DEFAULT_ROLE_TIMEOUT_S == 30.0
    assert Role("advisor").timeout_s == DEFAULT_ROLE_TIMEOUT_S
    assert GENERATION_ROLE.timeout_s == DEFAULT_ROLE_TIMEOUT_S
    assert GENERATION_ROLE.failure_policy is DecisionFailurePolicy.FAIL_OPEN
    assert GENERATION_ROLE.name == "generation"
    assert RERANK_ROLE.timeout_s == DEFAULT_ROLE_TIMEOUT_S
    assert WRITE_GATE_ROLE.timeout_s == DEFAULT_WRITE_GATE_TIMEOUT_S == 10.0
    for role in (Role("advisor"), GENERATION_ROLE, RERANK_ROLE, WRITE_GATE_ROLE):
        assert math.isfinite(role.timeout_s) and role.timeout_s > 0
    # the envelopes built without a role wait no longer than a role would
    assert FailOpenDecisionBackend(Hanging(), role="r").timeout_s == DEFAULT_ROLE_TIMEOUT_S
    assert FailOpenGenerationBackend(Hanging(), role="r").timeout_s == DEFAULT_ROLE_TIMEOUT_S  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [None, 0, -1.0, float("nan"), float("inf"), "5", True])
def test_a_role_without_a_finite_timeout_is_refused(value: Any) -> None:
    with pytest.raises(ValueError) as info:
        Role("advisor", timeout_s=value)
    assert str(info.value) == (
        f"Role.timeout_s must be a finite number of seconds > 0 (default 30), got {value!r}; "
        "every role has a deadline"
    )


def test_the_default_generation_role_gives_up_on_a_hanging_backend() -> None:
    class HangingGeneration:
        policy_id = "test.hanging-generation.v1"

        async def generate(self, request: GenerationRequest, /) -> GenerationResult:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    registry = Registry()
    GenerationBackendRegister(registry, "tests")("hangs", lambda o, c: HangingGeneration())
    context = ComponentContext(Config(), registry)
    handle = context.generation_backend("hangs")  # the default role: fail-open, 30 s
    assert isinstance(handle, FailOpenGenerationBackend)
    assert (handle.role, handle.timeout_s) == ("generation", DEFAULT_ROLE_TIMEOUT_S)
    quick = context.generation_backend("hangs", Role("summary", timeout_s=0.2))
    request = GenerationRequest("test.request", "answer", {}, {"type": "object"})
    result = run(quick.generate(request))
    assert result.used_fallback is True and result.output is None


# one resolution: every role, the write gate included ------------------------------------------


def test_a_fail_open_role_gets_one_envelope_with_its_name_and_deadline() -> None:
    backend = Hanging()
    context = _context(hangs=backend)
    role = Role("advisor", timeout_s=0.2)
    handle = context.decision_backend("hangs", role)
    assert isinstance(handle, FailOpenDecisionBackend)
    assert handle.delegate is backend and handle.role == "advisor" and handle.timeout_s == 0.2
    assert handle.policy_id == backend.policy_id
    assert handle.deterministic is True  # the envelope keeps the backend's flag
    assert context.decision_backend("hangs", RERANK_ROLE) is backend  # fail-closed: bare
    # re-resolving an envelope replaces it, never nests it
    again = wrap_for_role(handle, Role("other", timeout_s=5.0))
    assert again.delegate is backend and (again.role, again.timeout_s) == ("other", 5.0)
    assert wrap_for_role(handle, RERANK_ROLE) is backend


def test_a_fail_open_backend_without_the_flag_is_not_deterministic() -> None:
    handle = wrap_for_role(Answers(DecisionOutcome.YES), Role("advisor"))
    assert handle.deterministic is False


def test_the_deadline_of_a_reranker_role_is_enforced() -> None:
    """A reranker whose factory asks for a fail-open role with a 0.2 s deadline: a hanging
    backend degrades (abstains, marked) instead of blocking the search."""
    backend = Hanging()
    registry = Registry()
    DecisionBackendRegister(registry, "tests")("hangs", lambda options, context: backend)
    seen: list[DecisionResult] = []

    class Advised:
        policy_id = "test.advised.v1"

        def __init__(self, handle: Any) -> None:
            self.handle = handle

        async def rerank(self, query: str, candidates: Any, limit: int, /) -> RerankDecision:
            verdict = await self.handle.evaluate(rerank_request(query, candidates[0].text))
            seen.append(verdict)
            return RerankDecision(tuple(range(limit, 0, -1)), usage=verdict.usage)

    def make(options: Mapping[str, Any], context: ComponentContext) -> Advised:
        return Advised(context.decision_backend("hangs", Role("advice", timeout_s=0.2)))

    RerankerRegister(registry, "tests")("advised", make)
    reranker = ComponentContext(Config(), registry).reranker("advised")
    pool, _ = synthetic_pool(4)
    hits, trace = run(seam.rerank_pool("q", pool, 3, reranker, deadline_s=25.0))
    [verdict] = seen
    assert backend.cancelled == 1  # the role's deadline cancelled the call
    assert (verdict.outcome, verdict.used_fallback) == (DecisionOutcome.ABSTAIN, True)
    assert verdict.usage == Usage(4, 7, None)  # what the cancelled call had spent
    assert trace.status is RerankStatus.OK and hits == (pool[2], pool[1], pool[0])
    assert trace.usage == Usage(4, 7, None)


def test_the_write_gate_enforces_its_role_deadline_through_the_context_handle() -> None:
    """The handle the Memory gets (context.decision_backend with the configured role) and
    ask_write_gate resolve through the same function: the 0.2 s deadline holds."""
    backend = Hanging()
    context = _context(hangs=backend)
    role = Role("write_gate", "fail_open", 0.2)
    handle = context.decision_backend("hangs", role)
    verdict = run(ask_write_gate(handle, "remember this", role=role))
    assert backend.cancelled == 1
    assert verdict == GateVerdict(
        DecisionOutcome.ABSTAIN, True, True, "test.hanging.v1", Usage(4, 7, None)
    )
    # a bare backend is resolved the same way
    verdict = run(ask_write_gate(backend, "remember this", role=role))
    assert backend.cancelled == 2 and verdict.degraded


def test_the_write_gate_uses_its_own_role_for_a_handle_resolved_for_another() -> None:
    backend = Hanging()
    handle = wrap_for_role(backend, Role("write_gate", "fail_open", 3600.0))
    verdict = run(ask_write_gate(handle, "t", role=Role("write_gate", "fail_open", 0.2)))
    assert backend.cancelled == 1 and verdict.degraded
    with pytest.raises(WriteGateError) as info:
        run(ask_write_gate(handle, "t", role=Role("write_gate", "fail_closed", 0.2)))
    assert backend.cancelled == 2 and info.value.reason == "timeout"


def test_a_role_that_is_no_role_is_refused() -> None:
    context = _context(ok=Answers(DecisionOutcome.YES))
    with pytest.raises(ConfigurationError) as info:
        context.decision_backend("ok", "write_gate")  # type: ignore[arg-type]
    assert str(info.value) == (
        "the role asking for decision backend 'ok' must be a rankseam Role, got 'write_gate'"
    )
    with pytest.raises(ValueError) as bad_kind:
        context.backend_for_role("reranker", "ok", Role("r"))
    assert str(bad_kind.value) == (
        "backend_for_role serves ['decision_backend', 'generation_backend'], not 'reranker'"
    )


def test_a_role_without_a_backend_name_says_how_to_name_one() -> None:
    context = _context(ok=Answers(DecisionOutcome.YES))
    with pytest.raises(ConfigurationError) as info:
        context.decision_backend(None, Role("advice"))
    assert str(info.value) == (
        "the advice role needs a decision backend; name one of the installed ones (ok) in the "
        "options of the component that asks for it (the write gate: [write_gate] backend = "
        "'NAME'; a reranker: its 'backend' option)"
    )
    with pytest.raises(ConfigurationError) as empty:
        ComponentContext(Config(), Registry()).generation_backend("", Role("advice"))
    assert "needs a generation backend; name one of the installed ones (none)" in str(empty.value)


def test_an_object_that_is_not_a_backend_is_refused() -> None:
    class SyncEvaluate:
        policy_id = "test.sync.v1"

        def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
            raise AssertionError("never called")

    class NoPolicy:
        async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
            raise AssertionError("never called")

    context = _context(sync=SyncEvaluate(), nopolicy=NoPolicy())
    for name in ("sync", "nopolicy"):
        with pytest.raises(ConfigurationError) as info:
            context.decision_backend(name, Role("advice"))
        assert str(info.value) == (
            f"decision backend {name!r} does not implement DecisionBackend (a policy_id string "
            "and an async def evaluate(request))"
        )


# the write gate: its verdict, its error and its log records ----------------------------------


def test_a_healthy_verdict_is_pinned_field_by_field() -> None:
    verdict = run(ask_write_gate(Answers(DecisionOutcome.NO, "small talk"), "hi"))
    assert verdict == GateVerdict(
        DecisionOutcome.NO, False, False, "test.answers.v1", Usage(1, 3, 1), "small talk"
    )
    assert verdict.to_dict() == {
        "outcome": "no",
        "store": False,
        "degraded": False,
        "policy_id": "test.answers.v1",
        "usage": Usage(1, 3, 1).to_dict(),
        "rationale": "small talk",
    }
    for outcome in (DecisionOutcome.YES, DecisionOutcome.ABSTAIN):
        kept = run(ask_write_gate(Answers(outcome), "hi"))
        assert (kept.store, kept.degraded, kept.outcome) == (True, False, outcome)


def test_the_gate_asks_its_question_about_the_text() -> None:
    asked: list[DecisionRequest] = []

    class Records:
        policy_id = "test.records.v1"

        async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
            asked.append(request)
            return DecisionResult(DecisionOutcome.YES, self.policy_id)

    for policy in ("fail_open", "fail_closed"):
        run(ask_write_gate(Records(), "the blue door", role=Role("write_gate", policy, 5.0)))
    expected = DecisionRequest(
        WRITE_GATE_DECISION_KIND, "is this worth remembering?", "the blue door", ()
    )
    assert asked == [expected, expected]


def test_a_fail_open_gate_logs_its_fallback_fields(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
        verdict = run(ask_write_gate(Failing(RuntimeError("secret text")), "the subject"))
    assert verdict == GateVerdict(
        DecisionOutcome.ABSTAIN, True, True, "test.failing.v1", Usage(1, None, None)
    )
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert record.getMessage() == "decision backend failed; failing open with abstain"
    fields = {k: getattr(record, k) for k in ("event", "decision_kind", "policy_id", "role")}
    assert fields == {
        "event": "decision.fallback",
        "decision_kind": WRITE_GATE_DECISION_KIND,
        "policy_id": "test.failing.v1",
        "role": "write_gate",
    }
    assert record.error_type == "RuntimeError"


def test_a_fail_open_answer_of_the_wrong_type_is_a_marked_abstain() -> None:
    class WrongType:
        policy_id = "test.wrong-type.v1"

        async def evaluate(self, request: DecisionRequest, /) -> Any:
            return "yes"

    verdict = run(wrap_for_role(WrongType(), Role("advice")).evaluate(rerank_request("q", "t")))
    assert verdict == DecisionResult(
        DecisionOutcome.ABSTAIN, "test.wrong-type.v1", Usage(1, None, None), used_fallback=True
    )
    with pytest.raises(decision_port.InvalidOutputError) as info:
        decision_port.checked_result("yes", WrongType())
    assert str(info.value) == (
        "decision backend 'test.wrong-type.v1' returned str, not a DecisionResult; fix the "
        "backend's evaluate() to return rankseam.decision.DecisionResult"
    )


def test_a_fail_closed_gate_refuses_with_its_reason_usage_and_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    role = Role("write_gate", "fail_closed", 5.0)
    error = BackendUnavailableError("down", usage=Usage(2, 0, 0))
    with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
        with pytest.raises(WriteGateError) as info:
            run(ask_write_gate(Failing(error), "the subject", role=role))
    assert info.value.reason == "unavailable" and info.value.usage == Usage(2, 0, 0)
    assert info.value.__cause__ is error
    assert str(info.value) == (
        "the write gate (fail-closed) got no verdict (unavailable: BackendUnavailableError: "
        "down); the memory was NOT stored. Add it again when the backend is back, raise "
        "[write_gate] timeout_s, or set [write_gate] failure_policy = 'fail_open' to store "
        "memories with a degraded verdict instead"
    )
    [record] = caplog.records
    assert record.getMessage() == "write gate failed closed; the memory was not stored"
    fields = {
        k: getattr(record, k) for k in ("event", "decision_kind", "policy_id", "role", "error_type")
    }
    assert fields == {
        "event": "write_gate.refused",
        "decision_kind": WRITE_GATE_DECISION_KIND,
        "policy_id": "test.failing.v1",
        "role": "write_gate",
        "error_type": "BackendUnavailableError",
    }


def test_a_fail_closed_gate_names_a_plain_error_and_a_wrong_answer() -> None:
    role = Role("write_gate", "fail_closed", 5.0)
    plain = RuntimeError("boom")
    with pytest.raises(WriteGateError) as info:
        run(ask_write_gate(Failing(plain), "t", role=role))
    assert info.value.reason == "exception" and info.value.__cause__ is plain
    assert info.value.usage == Usage(1, None, None)
    assert str(info.value).startswith(
        "the write gate (fail-closed) got no verdict (exception: RuntimeError: boom); "
    )

    class WrongType:
        policy_id = "test.wrong-type.v1"

        async def evaluate(self, request: DecisionRequest, /) -> Any:
            return None

    with pytest.raises(WriteGateError) as wrong:
        run(ask_write_gate(WrongType(), "t", role=role))
    assert wrong.value.reason == "invalid_output"
    assert str(wrong.value).startswith(
        "the write gate (fail-closed) got no verdict (invalid_output: InvalidOutputError: "
        "decision backend 'test.wrong-type.v1' returned NoneType"
    )


def test_a_fail_closed_gate_timeout_is_a_typed_timeout(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend = Hanging()
    with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
        with pytest.raises(WriteGateError) as info:
            run(ask_write_gate(backend, "t", role=Role("write_gate", "fail_closed", 0.2)))
    assert backend.cancelled == 1
    cause = info.value.__cause__
    assert type(cause).__name__ == "BackendTimeoutError"
    assert str(cause) == "no verdict within the write gate's timeout_s=0.2"
    assert cause.usage == Usage(4, 7, None)  # type: ignore[union-attr]
    assert info.value.reason == "timeout" and info.value.usage == Usage(4, 7, None)
    assert str(info.value).startswith(
        "the write gate (fail-closed) got no verdict (timeout: BackendTimeoutError: no verdict "
        "within the write gate's timeout_s=0.2); the memory was NOT stored."
    )
    [record] = caplog.records
    assert (record.event, record.error_type, record.policy_id) == (
        "write_gate.refused",
        "TimeoutError",
        "test.hanging.v1",
    )


@pytest.mark.parametrize("policy", ["fail_open", "fail_closed"])
def test_a_gate_without_verdict_applies_its_policy_and_logs_it(
    policy: str, caplog: pytest.LogCaptureFixture
) -> None:
    role = Role("write_gate", policy, 0.5)
    with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
        if policy == "fail_open":
            verdict = gate_without_verdict(role, "test.p.v1", "it blocked")
            assert verdict == GateVerdict(
                DecisionOutcome.ABSTAIN, True, True, "test.p.v1", Usage(1, None, None)
            )
        else:
            with pytest.raises(WriteGateError) as info:
                gate_without_verdict(role, "test.p.v1", "it blocked", reason="exception")
            assert info.value.reason == "exception"
            assert info.value.usage == Usage(1, None, None)
            assert str(info.value) == (
                "the write gate (fail-closed) got no verdict: it blocked; the memory was NOT "
                "stored. Fix the decision backend (blocking work belongs in a thread), or set "
                "[write_gate] failure_policy = 'fail_open' to store memories with a degraded "
                "verdict instead"
            )
            with pytest.raises(WriteGateError) as default_reason:
                gate_without_verdict(role, "test.p.v1", "it blocked")
            assert default_reason.value.reason == "timeout"
    records = caplog.records
    assert records[0].getMessage() == "write gate got no verdict; applying its failure policy"
    fields = {
        k: getattr(records[0], k)
        for k in ("event", "decision_kind", "policy_id", "role", "failure_policy")
    }
    assert fields == {
        "event": "write_gate.no_verdict",
        "decision_kind": WRITE_GATE_DECISION_KIND,
        "policy_id": "test.p.v1",
        "role": "write_gate",
        "failure_policy": policy,
    }


def test_the_old_policy_name_warns_with_the_new_name() -> None:
    with pytest.warns(DeprecationWarning) as warned:
        alias = decision_port.FailurePolicy  # type: ignore[attr-defined]
    assert alias is DecisionFailurePolicy
    [warning] = warned.list
    assert str(warning.message) == (
        "rankseam.decision.FailurePolicy is deprecated; its name is DecisionFailurePolicy "
        "(same values). The alias will be removed in a future release"
    )
    with pytest.raises(AttributeError) as info:
        decision_port.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    assert str(info.value) == "module 'rankseam.decision' has no attribute 'NoSuchName'"


# the port's value objects say what is wrong -----------------------------------------------


def test_evidence_must_be_strings_and_says_how_to_write_it() -> None:
    with pytest.raises(TypeError) as one:
        DecisionRequest("k", "q?", "s", "the query")  # type: ignore[arg-type]
    assert str(one.value) == (
        "DecisionRequest.evidence is a sequence of strings, not one string; write evidence=(text,)"
    )
    with pytest.raises(TypeError) as scalar:
        DecisionRequest("k", "q?", "s", 5)  # type: ignore[arg-type]
    assert str(scalar.value) == "DecisionRequest.evidence must be a sequence of strings, got 5"
    with pytest.raises(TypeError) as item:
        DecisionRequest("k", "q?", "s", ["a", 2])  # type: ignore[list-item]
    assert str(item.value) == "DecisionRequest.evidence items must be strings, got int"
    assert DecisionRequest("k", "q?", "s", ["a", "b"]).evidence == ("a", "b")


def test_confidence_is_none_or_in_the_unit_interval() -> None:
    for ok in (None, 0.0, 0, 1.0, 0.5):
        assert DecisionResult(DecisionOutcome.YES, "p", confidence=ok).confidence == ok
    for bad in (-0.01, 1.01, float("nan"), "0.5", True):
        with pytest.raises(ValueError) as info:
            DecisionResult(DecisionOutcome.YES, "p", confidence=bad)
        assert str(info.value) == (
            f"DecisionResult.confidence must be None or in [0, 1], got {bad!r}"
        )


def test_the_envelope_is_never_nested_and_names_a_backend_without_policy() -> None:
    backend = Answers(DecisionOutcome.YES)
    inner = FailOpenDecisionBackend(backend, role="a", timeout_s=1.0)
    outer = FailOpenDecisionBackend(inner, role="b", timeout_s=2.0)
    assert outer.delegate is backend and (outer.role, outer.timeout_s) == ("b", 2.0)
    assert repr(outer) == f"FailOpenDecisionBackend({backend!r}, role='b')"
    assert decision_port.unwrap(outer) is backend and decision_port.unwrap(backend) is backend

    class Nameless:
        pass

    with pytest.raises(decision_port.InvalidOutputError) as info:
        decision_port.checked_result(3, Nameless())
    assert str(info.value).startswith("decision backend 'Nameless' returned int, not a")


def test_the_installed_backends_are_listed_when_none_is_named() -> None:
    context = _context(first=Answers(DecisionOutcome.YES), second=Answers(DecisionOutcome.NO))
    with pytest.raises(ConfigurationError) as info:
        context.decision_backend("", Role("advice"))
    assert "name one of the installed ones (first, second) in the" in str(info.value)


def test_a_fail_closed_gate_logs_a_backend_without_policy_id_as_none(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Nameless:
        async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
            raise RuntimeError("down")

    role = Role("write_gate", "fail_closed", 5.0)
    with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
        with pytest.raises(WriteGateError) as info:
            run(ask_write_gate(Nameless(), "t", role=role))  # type: ignore[arg-type]
    assert info.value.reason == "exception"
    [record] = caplog.records
    assert record.policy_id is None and record.event == "write_gate.refused"
