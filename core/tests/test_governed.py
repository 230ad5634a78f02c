"""The governed call (rankseam.governed): one runner for every plugin call under a deadline, a
failure policy and a fallback; and the one failure vocabulary (docs/seam.md, "The governed
call"). Roles that use it are tested in test_roles.py, test_write_gate.py and the seam's tests;
these pin the runner itself."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from rankseam.governed import (
    CANCEL_GRACE_S,
    DEFAULT_ROLE_TIMEOUT_S,
    LEGACY_POLICY_SPELLINGS,
    DecisionFailurePolicy,
    Governed,
    attempt,
    deadline_exceeded,
    failure_policy,
    foreign,
    is_deadline,
)
from rankseam.loop import LoopRunner, LoopStopped, LoopTimeout
from rankseam.types import Usage

OPEN = DecisionFailurePolicy.FAIL_OPEN
CLOSED = DecisionFailurePolicy.FAIL_CLOSED


class Refused(Exception):
    pass


class Outcomes:
    """Records what the runner asked of the role."""

    def __init__(self, note: bool = True) -> None:
        self.notes: list[tuple[Exception, DecisionFailurePolicy]] = []
        self.with_note = note

    def accept(self, value: Any) -> Any:
        if value == "bad":
            raise ValueError("not an answer")
        return ("answer", value)

    def fallback(self, error: Exception) -> Any:
        return ("fallback", error)

    def refuse(self, error: Exception) -> Exception:
        return Refused(f"refused: {error}")

    def note(self, error: Exception, policy: DecisionFailurePolicy) -> Any:
        self.notes.append((error, policy))
        if not self.with_note:
            return None
        return "it failed", "test.failed", {"extra": "x"}


def governed(policy: Any = OPEN, deadline_s: float = 5.0, **kw: Any) -> Governed[Any]:
    return Governed(
        "tester", "test.plugin.v1", policy, deadline_s, labels={"decision_kind": "k"}, **kw
    )


async def answer(value: Any) -> Any:
    return value


async def fail(error: BaseException) -> Any:
    raise error


async def answers_when_cancelled(late: Any) -> Any:
    """A call that waits for ever and, cancelled at its deadline, answers ``late``."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        return late
    raise AssertionError("unreachable")


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# the vocabulary --------------------------------------------------------------------------------


def test_one_vocabulary_with_the_earlier_spellings() -> None:
    assert {p.value for p in DecisionFailurePolicy} == {"fail_open", "fail_closed"}
    assert failure_policy("fail_open") is OPEN and failure_policy("fail_closed") is CLOSED
    assert failure_policy(OPEN) is OPEN and failure_policy(CLOSED) is CLOSED
    assert failure_policy("raise") is CLOSED and failure_policy("coarse") is OPEN
    assert dict(LEGACY_POLICY_SPELLINGS) == {"raise": CLOSED, "coarse": OPEN}
    for bad in ("ignore", "FAIL_OPEN", "", None, 1, True):
        with pytest.raises(ValueError) as info:
            failure_policy(bad)
        assert str(info.value) == (
            "a failure policy is 'fail_closed' (raise an error) or 'fail_open' (degrade visibly "
            "to the fallback); 'raise' and 'coarse' are accepted for them too; got " + repr(bad)
        )
    assert governed("coarse").failure_policy is OPEN  # the runner converts either spelling
    assert DEFAULT_ROLE_TIMEOUT_S == 30.0 and CANCEL_GRACE_S == 0.5


# an answer, a failure, the policy --------------------------------------------------------------


@pytest.mark.parametrize("policy", [OPEN, CLOSED])
def test_an_answer_is_accepted_and_logs_nothing(
    policy: DecisionFailurePolicy, caplog: pytest.LogCaptureFixture
) -> None:
    outcomes = Outcomes()
    with caplog.at_level(logging.DEBUG, logger="rankseam"):
        assert run(governed(policy).run(answer(7), outcomes)) == ("answer", 7)
    assert outcomes.notes == [] and [r for r in caplog.records if r.name != "asyncio"] == []


def test_fail_open_returns_the_fallback_and_logs_the_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    outcomes = Outcomes()
    error = RuntimeError("secret memory text")
    logger = logging.getLogger("rankseam.test-governed")
    with caplog.at_level(logging.WARNING, logger="rankseam.test-governed"):
        got = run(governed(OPEN, logger=logger).run(fail(error), outcomes))
    assert got == ("fallback", error)
    assert outcomes.notes == [(error, OPEN)]
    [record] = caplog.records
    assert record.levelno == logging.WARNING and record.name == "rankseam.test-governed"
    assert record.getMessage() == "it failed"
    fields = {
        k: getattr(record, k)
        for k in ("event", "policy_id", "role", "decision_kind", "error_type", "extra")
    }
    assert fields == {
        "event": "test.failed",
        "policy_id": "test.plugin.v1",
        "role": "tester",
        "decision_kind": "k",
        "error_type": "RuntimeError",
        "extra": "x",
    }
    assert "secret" not in str(record.__dict__.values())


def test_fail_closed_raises_the_roles_error_from_the_failure() -> None:
    error = RuntimeError("boom")
    with pytest.raises(Refused) as info:
        run(governed(CLOSED).run(fail(error), Outcomes()))
    assert str(info.value) == "refused: boom" and info.value.__cause__ is error


def test_a_refusal_that_names_its_own_cause_keeps_it() -> None:
    class OwnCause(Outcomes):
        def refuse(self, error: Exception) -> Exception:
            own = KeyError("mine")
            refused = Refused("x")
            refused.__cause__ = own
            return refused

    with pytest.raises(Refused) as info:
        run(governed(CLOSED).run(fail(RuntimeError("boom")), OwnCause()))
    assert isinstance(info.value.__cause__, KeyError)


def test_an_answer_the_role_rejects_is_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        got = run(governed(OPEN).run(answer("bad"), Outcomes()))
    assert got[0] == "fallback" and str(got[1]) == "not an answer"
    assert caplog.records[0].error_type == "ValueError"
    with pytest.raises(Refused, match="refused: not an answer"):
        run(governed(CLOSED).run(answer("bad"), Outcomes()))


def test_a_role_that_notes_nothing_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="rankseam"):
        got = run(governed(OPEN).run(fail(RuntimeError("x")), Outcomes(note=False)))
    assert got[0] == "fallback" and [r for r in caplog.records if r.name != "asyncio"] == []


# what is not an Exception -------------------------------------------------------------------


@pytest.mark.parametrize("raised", [SystemExit(2), KeyboardInterrupt(), asyncio.CancelledError()])
def test_a_base_exception_propagates_unless_contained(raised: BaseException) -> None:
    with pytest.raises(type(raised)):
        run(governed(OPEN).run(fail(raised), Outcomes()))
    got = run(governed(OPEN, contain=True).run(fail(raised), Outcomes()))
    assert got[0] == "fallback" and foreign(got[1]) is raised
    assert got[1].__cause__ is raised and str(got[1]) == f"{type(raised).__name__}({raised})"
    assert foreign(RuntimeError("plain")) is None


def test_a_contained_base_exception_keeps_its_usage_and_logs_its_own_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    raised = SystemExit(1)
    raised.usage = Usage(2, 3, 4)  # type: ignore[attr-defined]
    with caplog.at_level(logging.WARNING):
        got = run(governed(OPEN, contain=True).run(fail(raised), Outcomes()))
    assert got[1].usage == Usage(2, 3, 4)
    assert caplog.records[0].error_type == "SystemExit"
    bare = run(governed(OPEN, contain=True).run(fail(SystemExit(1)), Outcomes()))
    assert bare[1].usage is None


# the deadline ------------------------------------------------------------------------------


def test_a_call_past_its_deadline_is_cancelled_and_counted() -> None:
    cancelled: list[bool] = []

    async def hangs() -> Any:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError as exc:
            cancelled.append(True)
            exc.usage = Usage(3, 40, None)  # type: ignore[attr-defined]
            raise
        raise AssertionError("unreachable")

    got = run(governed(OPEN, deadline_s=0.05).run(hangs(), Outcomes()))
    error = got[1]
    assert got[0] == "fallback" and cancelled == [True]
    assert isinstance(error, TimeoutError) and is_deadline(error)
    assert error.usage == Usage(3, 40, None)  # type: ignore[attr-defined]
    assert error.abandoned is False and error.deadline_s == 0.05  # type: ignore[attr-defined]
    assert str(error) == "no answer within the deadline of 0.05 s (it was cancelled)"
    assert Usage.of_failed_call(error) == Usage(3, 40, None)


def test_a_late_answer_after_the_cancellation_still_counts_its_usage() -> None:
    class Late:
        usage = Usage(5, 1, 1)

    ok, error = run(attempt(answers_when_cancelled(Late()), 0.05))
    assert ok is False and error.usage == Usage(5, 1, 1)


def test_a_call_that_ignores_its_cancellation_is_abandoned_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state: dict[str, Any] = {"ignored": 0}

    async def stubborn() -> Any:
        while not state["release"].is_set():
            try:
                await state["release"].wait()
            except asyncio.CancelledError:
                state["ignored"] += 1
        return "late"

    async def scenario() -> Any:
        state["release"] = asyncio.Event()
        try:
            return await governed(OPEN, deadline_s=0.05).run(stubborn(), Outcomes())
        finally:
            state["release"].set()
            await asyncio.sleep(0)

    with caplog.at_level(logging.WARNING, logger="rankseam.governed"):
        got = run(scenario())
    error = got[1]
    assert state["ignored"] == 1 and is_deadline(error)
    assert error.abandoned is True and error.usage is None  # type: ignore[attr-defined]
    assert str(error).endswith("(it ignored its cancellation and was abandoned)")
    [abandoned] = [r for r in caplog.records if "abandoned" in r.getMessage()]
    assert abandoned.getMessage() == (
        "a plugin call ignored its cancellation at the deadline; abandoned"
    )
    assert (abandoned.policy_id, abandoned.role, abandoned.reason) == (
        "test.plugin.v1",
        "tester",
        "timeout",
    )


def test_is_deadline_knows_only_the_runners_timeout() -> None:
    assert is_deadline(deadline_exceeded(1.0, abandoned=False, usage=None))
    assert not is_deadline(TimeoutError("a backend's own"))
    assert not is_deadline(RuntimeError("x"))


def test_a_cancelled_caller_cancels_the_call_and_carries_its_usage() -> None:
    started = asyncio.Event

    async def scenario() -> BaseException:
        began = started()

        async def hangs() -> Any:
            began.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError as exc:
                exc.usage = Usage(4, None, None)  # type: ignore[attr-defined]
                raise
            raise AssertionError("unreachable")

        task = asyncio.ensure_future(governed(OPEN, deadline_s=60).run(hangs(), Outcomes()))
        await began.wait()
        task.cancel()
        try:
            await task
        except BaseException as exc:  # the cancellation, with what it carries
            return exc
        raise AssertionError("the call should have been cancelled")

    error = run(scenario())
    assert isinstance(error, asyncio.CancelledError)
    assert error.usage == Usage(4, None, None)  # type: ignore[attr-defined]


def test_a_cancelled_caller_of_a_stubborn_call_abandons_it() -> None:
    state: dict[str, Any] = {}

    async def scenario() -> BaseException:
        state["release"] = asyncio.Event()
        began = asyncio.Event()

        async def stubborn() -> Any:
            began.set()
            while not state["release"].is_set():
                try:
                    await state["release"].wait()
                except asyncio.CancelledError:
                    pass
            return "late"

        task = asyncio.ensure_future(governed(OPEN, deadline_s=60).run(stubborn(), Outcomes()))
        await began.wait()
        task.cancel()
        try:
            await task
        except BaseException as exc:
            return exc
        finally:
            state["release"].set()
            await asyncio.sleep(0)
        raise AssertionError("the call should have been cancelled")

    error = run(scenario())
    assert isinstance(error, asyncio.CancelledError) and not hasattr(error, "usage")


# synchronous callers ---------------------------------------------------------------------------


def test_run_sync_answers_through_the_runner() -> None:
    runner = LoopRunner()
    try:
        g = governed(OPEN)
        outcomes = Outcomes()
        assert g.run_sync(runner, lambda: g.run(answer(3), outcomes), 1.0, outcomes) == (
            "answer",
            3,
        )
    finally:
        runner.close()


@pytest.mark.parametrize("lost", [LoopTimeout("blocked"), LoopStopped("stopped")])
def test_a_lost_loop_fails_the_call_under_its_policy(lost: Exception) -> None:
    class Lost:
        def run(self, coro: Any, timeout: float) -> Any:
            coro.close()
            assert timeout == 5.0 + 0.25  # the deadline plus the caller's margin
            raise lost

    outcomes = Outcomes()
    got = governed(OPEN).run_sync(Lost(), lambda: answer(1), 0.25, outcomes)  # type: ignore[arg-type]
    assert got == ("fallback", lost) and outcomes.notes == [(lost, OPEN)]
    with pytest.raises(Refused):
        governed(CLOSED).run_sync(Lost(), lambda: answer(1), 0.25, Outcomes())  # type: ignore[arg-type]


# the fail-open envelope: one runner, two faces -------------------------------------------------


def test_both_faces_hand_the_request_on_and_log_on_their_ports_logger(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from rankseam.decision import FailOpenDecisionBackend, rerank_request
    from rankseam.generation import FailOpenGenerationBackend, GenerationRequest

    seen: list[Any] = []

    class Backend:
        policy_id = "test.both.v1"

        async def evaluate(self, request: Any, /) -> Any:
            seen.append(request)
            raise RuntimeError("down")

        async def generate(self, request: Any, /) -> Any:
            seen.append(request)
            raise RuntimeError("down")

    asked = rerank_request("q", "t")
    generated = GenerationRequest("test.request", "answer", {"x": 1}, {"type": "object"})
    with caplog.at_level(logging.WARNING):
        verdict = run(FailOpenDecisionBackend(Backend(), role="r").evaluate(asked))
        result = run(FailOpenGenerationBackend(Backend(), role="r").generate(generated))  # type: ignore[arg-type]
    assert seen == [asked, generated]
    assert verdict.used_fallback and result.used_fallback and result.output is None
    names = [(r.name, r.event) for r in caplog.records]  # type: ignore[attr-defined]
    assert names == [
        ("rankseam.decision", "decision.fallback"),
        ("rankseam.generation", "generation.fallback"),
    ]
    assert caplog.records[1].request_name == "test.request"  # type: ignore[attr-defined]


def test_only_a_usage_is_read_from_a_late_answer() -> None:
    class NotAUsage:
        usage = "3 calls"

    ok, error = run(attempt(answers_when_cancelled(NotAUsage()), 0.05))
    assert ok is False and error.usage is None
