"""The decision port: value objects, the one fail-open envelope, role resolution, the gate."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest

from rankseam.compose import ComponentContext, Config
from rankseam.decision import (
    RERANK_ROLE,
    WRITE_GATE_ROLE,
    DecisionFailurePolicy,
    DecisionOutcome,
    DecisionRequest,
    DecisionResult,
    FailOpenDecisionBackend,
    Role,
    rerank_request,
    unwrap,
    wrap_for_role,
    write_gate_request,
)
from rankseam.errors import (
    BackendTimeoutError,
    BackendUnavailableError,
    ConfigurationError,
    InvalidOutputError,
)
from rankseam.registry import DecisionBackendRegister, Registry
from rankseam.types import Usage
from rankseam.writing.gate import ask_write_gate


class Backend:
    """A decision backend double (the thing outside us)."""

    policy_id = "test.backend.v1"

    def __init__(self, answer: Any = DecisionOutcome.YES, delay: float = 0.0) -> None:
        self.answer = answer
        self.delay = delay
        self.cancelled = False

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        if isinstance(self.answer, BaseException):
            raise self.answer
        if isinstance(self.answer, DecisionOutcome):
            return DecisionResult(self.answer, self.policy_id, Usage(1, 7, 1), rationale="r")
        return self.answer  # type: ignore[no-any-return]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# value objects -------------------------------------------------------------------------------


def test_request_shape_is_built_in_one_place() -> None:
    request = rerank_request("the query", "candidate text")
    assert request == DecisionRequest(
        "memory.rerank",
        "does this entry contain evidence that answers the query?",
        "candidate text",
        ("the query",),
    )
    gate = write_gate_request("text")
    assert (gate.decision_kind, gate.subject, gate.evidence) == ("memory.write-gate", "text", ())


@pytest.mark.parametrize(
    ("score", "outcome"),
    [
        (0.9, DecisionOutcome.YES),
        (0.6, DecisionOutcome.YES),  # at the yes threshold
        (0.59, DecisionOutcome.ABSTAIN),
        (0.2, DecisionOutcome.ABSTAIN),  # at the no threshold: not below it
        (0.19, DecisionOutcome.NO),
        (float("nan"), DecisionOutcome.ABSTAIN),
    ],
)
def test_outcome_of_a_score_against_two_thresholds(score: float, outcome: DecisionOutcome) -> None:
    assert DecisionOutcome.of_score(score, yes_threshold=0.6, no_threshold=0.2) is outcome


@pytest.mark.parametrize(
    "kwargs",
    [
        {"decision_kind": ""},
        {"question": "  "},
        {"subject": None},
        {"evidence": "a bare string"},
        {"evidence": ("ok", 3)},
    ],
)
def test_request_refuses_bad_fields(kwargs: dict[str, Any]) -> None:
    fields: dict[str, Any] = {"decision_kind": "k", "question": "q?", "subject": "s"}
    fields.update(kwargs)
    with pytest.raises((TypeError, ValueError)):
        DecisionRequest(**fields)


def test_result_validates_and_converts() -> None:
    assert DecisionResult("yes", "p").outcome is DecisionOutcome.YES
    for bad in (
        {"outcome": "maybe"},
        {"policy_id": ""},
        {"usage": 3},
        {"confidence": 1.5},
        {"confidence": float("nan")},
        {"used_fallback": "no"},
    ):
        fields: dict[str, Any] = {"outcome": "no", "policy_id": "p"}
        fields.update(bad)
        with pytest.raises((TypeError, ValueError)):
            DecisionResult(**fields)


def test_role_validates() -> None:
    assert Role("r", "fail_open").failure_policy is DecisionFailurePolicy.FAIL_OPEN
    for bad in (
        {"name": ""},
        {"failure_policy": "sometimes"},
        {"timeout_s": 0},
        {"timeout_s": True},
    ):
        fields: dict[str, Any] = {"name": "r", "failure_policy": "fail_closed"}
        fields.update(bad)
        with pytest.raises((TypeError, ValueError)):
            Role(**fields)
    assert RERANK_ROLE.failure_policy is DecisionFailurePolicy.FAIL_CLOSED
    assert WRITE_GATE_ROLE.failure_policy is DecisionFailurePolicy.FAIL_OPEN


# the fail-open envelope ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "error",
    [
        BackendUnavailableError("down"),
        BackendTimeoutError("slow"),
        InvalidOutputError("garbage"),
        ValueError("plain"),
        ConfigurationError("misconfigured"),
    ],
)
def test_envelope_turns_any_exception_into_marked_abstain(error: Exception) -> None:
    result = run(
        FailOpenDecisionBackend(Backend(error), role="gate").evaluate(rerank_request("q", "s"))
    )
    # the failed call counts: once, tokens unknown (this backend attaches no usage)
    assert result == DecisionResult(
        DecisionOutcome.ABSTAIN, "test.backend.v1", Usage(1, None, None), used_fallback=True
    )


def test_envelope_treats_a_wrong_answer_type_as_failure() -> None:
    result = run(
        FailOpenDecisionBackend(Backend({"yes": 1}), role="gate").evaluate(rerank_request("q", "s"))
    )
    assert result.used_fallback and result.outcome is DecisionOutcome.ABSTAIN


def test_envelope_timeout_cancels_the_call_and_abstains() -> None:
    backend = Backend(DecisionOutcome.YES, delay=5.0)
    envelope = FailOpenDecisionBackend(backend, role="gate", timeout_s=0.02)
    result = run(envelope.evaluate(rerank_request("q", "s")))
    assert result.used_fallback and backend.cancelled


def test_envelope_passes_cancellation_through() -> None:
    backend = Backend(DecisionOutcome.YES, delay=5.0)

    async def scenario() -> None:
        task = asyncio.create_task(
            FailOpenDecisionBackend(backend, role="gate").evaluate(rerank_request("q", "s"))
        )
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(scenario())
    assert backend.cancelled


def test_envelope_leaves_healthy_verdicts_alone() -> None:
    for outcome in DecisionOutcome:
        result = run(
            FailOpenDecisionBackend(Backend(outcome), role="g").evaluate(rerank_request("q", "s"))
        )
        assert result.outcome is outcome and result.used_fallback is False
        assert result.usage == Usage(1, 7, 1) and result.rationale == "r"


def test_envelope_logs_labels_never_content(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rankseam.decision"):
        run(
            FailOpenDecisionBackend(Backend(ValueError("x")), role="gate").evaluate(
                rerank_request("secret query", "secret subject")
            )
        )
    (record,) = caplog.records
    assert record.event == "decision.fallback"  # type: ignore[attr-defined]
    assert record.decision_kind == "memory.rerank"  # type: ignore[attr-defined]
    assert record.role == "gate" and record.policy_id == "test.backend.v1"  # type: ignore[attr-defined]
    assert record.error_type == "ValueError"  # type: ignore[attr-defined]
    assert "secret" not in caplog.text


# role resolution -----------------------------------------------------------------------------


def test_wrap_for_role_resolves_the_policy_once() -> None:
    backend = Backend()
    assert wrap_for_role(backend, RERANK_ROLE) is backend
    gate = wrap_for_role(backend, WRITE_GATE_ROLE)
    assert isinstance(gate, FailOpenDecisionBackend) and gate.delegate is backend
    regated = wrap_for_role(gate, Role("other", DecisionFailurePolicy.FAIL_OPEN, timeout_s=1.0))
    assert isinstance(regated, FailOpenDecisionBackend) and regated.delegate is backend
    assert regated.timeout_s == 1.0 and regated.role == "other"
    assert wrap_for_role(gate, RERANK_ROLE) is backend  # a fail-closed role never gets an envelope
    assert unwrap(gate) is backend and unwrap(backend) is backend


def test_context_hands_one_instance_to_both_roles() -> None:
    registry = Registry()
    built: list[Backend] = []

    def factory(options: Mapping[str, Any], context: object) -> Backend:
        built.append(Backend(BackendUnavailableError("down")))
        return built[-1]

    DecisionBackendRegister(registry, "tests")("flaky", factory)
    DecisionBackendRegister(registry, "tests")("not-a-backend", lambda o, c: object())
    context = ComponentContext(Config(), registry)
    closed = context.decision_backend("flaky", RERANK_ROLE)
    opened = context.decision_backend("flaky", WRITE_GATE_ROLE)
    assert len(built) == 1 and closed is built[0] and unwrap(opened) is built[0]
    with pytest.raises(BackendUnavailableError):
        run(closed.evaluate(rerank_request("q", "s")))
    assert run(opened.evaluate(rerank_request("q", "s"))).used_fallback
    with pytest.raises(ConfigurationError, match="needs a decision backend"):
        context.decision_backend(None, RERANK_ROLE)
    with pytest.raises(ConfigurationError, match="no decision backend named 'nope'"):
        context.decision_backend("nope", RERANK_ROLE)
    with pytest.raises(ConfigurationError, match="does not implement DecisionBackend"):
        context.decision_backend("not-a-backend", RERANK_ROLE)


# the write gate ------------------------------------------------------------------------------


def test_write_gate_verdicts() -> None:
    no = run(ask_write_gate(wrap_for_role(Backend(DecisionOutcome.NO), WRITE_GATE_ROLE), "t"))
    assert (no.store, no.degraded, no.usage) == (False, False, Usage(1, 7, 1))
    for outcome in (DecisionOutcome.YES, DecisionOutcome.ABSTAIN):
        verdict = run(ask_write_gate(Backend(outcome), "t"))
        assert (verdict.store, verdict.degraded) == (True, False)
    down = run(ask_write_gate(Backend(BackendUnavailableError("down")), "t"))  # bare: wrapped
    assert (down.store, down.degraded, down.outcome) == (True, True, DecisionOutcome.ABSTAIN)
    assert down.to_dict()["degraded"] is True
