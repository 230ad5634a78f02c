"""The write gate: "is this worth remembering?" asked of a decision backend before a memory is
stored, as one governed call (:mod:`rankseam.governed`) under the gate's role: its failure
policy (fail-open by default: a degraded verdict stores the memory; fail-closed: nothing is
stored and :class:`~rankseam.errors.WriteGateError` says why) and its deadline (``timeout_s``,
default 10 s). docs/decision-port.md, "The write gate".

- :func:`ask_write_gate` -- the verdict, for async callers;
- :class:`WriteGate` -- the gate of one :class:`~rankseam.Memory` (``Memory.add(gate=True)``):
  its backend built once, on first use, and asked through the Memory's loop runner;
- :func:`gate_without_verdict` -- the policy when no verdict could be awaited at all (the
  backend blocked or stopped the event loop).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import attrs

from rankseam.decision import (
    WRITE_GATE_DECISION_KIND,
    WRITE_GATE_ROLE,
    DecisionBackend,
    DecisionOutcome,
    DecisionResult,
    Role,
    checked_result,
    unwrap,
    write_gate_request,
)
from rankseam.errors import BackendError, BackendTimeoutError, WriteGateError
from rankseam.governed import DecisionFailurePolicy, Governed
from rankseam.loop import LoopRunner, LoopStopped, LoopTimeout
from rankseam.types import Usage

__all__ = [
    "GATE_BLOCKED_MARGIN_S",
    "GateVerdict",
    "WriteGate",
    "ask_write_gate",
    "gate_without_verdict",
]

log = logging.getLogger("rankseam.decision")  # the gate's records keep the decision port's logger
memory_log = logging.getLogger("rankseam.memory")

#: How long past its ``timeout_s`` a synchronous ``Memory.add`` waits for the gate's verdict
#: before it presumes the backend blocked the event-loop thread (synchronous code in an
#: ``async def``, which no timeout can interrupt) and applies the failure policy without it.
GATE_BLOCKED_MARGIN_S = 1.0


@attrs.frozen
class GateVerdict:
    """The write gate's answer for one memory.

    ``store`` is False only for a healthy ``NO``. A degraded verdict (the backend failed and the
    fail-open gate abstained) stores the memory anyway and says so with ``degraded=True``.
    """

    outcome: DecisionOutcome
    store: bool
    degraded: bool
    policy_id: str
    usage: Usage = attrs.field(factory=Usage.zero)
    rationale: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "store": self.store,
            "degraded": self.degraded,
            "policy_id": self.policy_id,
            "usage": self.usage.to_dict(),
            "rationale": self.rationale,
        }


class _NoVerdict(Exception):
    """No verdict could be awaited at all: ``why``, with the error ``reason`` it gives."""

    def __init__(self, why: str, reason: str) -> None:
        super().__init__(why)
        self.why = why
        self.reason = reason


class _GateOutcomes:
    """What the gate makes of its governed call: a verdict, a degraded verdict that stores
    (fail-open), or :class:`WriteGateError` (fail-closed: nothing is stored)."""

    __slots__ = ("backend", "policy_id", "role")

    def __init__(self, role: Role, policy_id: Any, backend: Any = None) -> None:
        self.role = role
        self.policy_id = policy_id
        self.backend = backend

    def why(self, error: Exception) -> Exception:
        if isinstance(error, LoopTimeout):
            return _NoVerdict(
                f"its backend blocked the event-loop thread past timeout_s={self.role.timeout_s}",
                "timeout",
            )
        if isinstance(error, LoopStopped):
            return _NoVerdict("its backend stopped the event loop (loop.stop())", "exception")
        return error

    def accept(self, value: Any) -> GateVerdict:
        result: DecisionResult = checked_result(value, self.backend)
        return GateVerdict(
            outcome=result.outcome,
            store=result.outcome is not DecisionOutcome.NO,
            degraded=False,
            policy_id=result.policy_id,
            usage=result.usage,
            rationale=result.rationale,
        )

    def fallback(self, error: Exception) -> GateVerdict:
        usage = Usage.of_failed_call(self.why(error))
        return GateVerdict(DecisionOutcome.ABSTAIN, True, True, self.policy_id, usage)

    def refuse(self, error: Exception) -> Exception:
        error = self.why(error)
        if isinstance(error, _NoVerdict):
            return WriteGateError(
                f"the write gate (fail-closed) got no verdict: {error.why}; the memory was NOT "
                "stored. Fix the decision backend (blocking work belongs in a thread), or set "
                "[write_gate] failure_policy = 'fail_open' to store memories with a degraded "
                "verdict instead",
                reason=error.reason,
                usage=Usage(1, None, None),
            )
        cause: Exception = error
        if isinstance(error, TimeoutError) and not isinstance(error, BackendError):
            cause = BackendTimeoutError(
                f"no verdict within the write gate's timeout_s={self.role.timeout_s}",
                usage=Usage.of_failed_call(error),
            )
        reason = cause.kind if isinstance(cause, BackendError) else "exception"
        refused = WriteGateError(
            f"the write gate (fail-closed) got no verdict ({reason}: {type(cause).__name__}: "
            f"{cause}); the memory was NOT stored. Add it again when the backend is back, raise "
            "[write_gate] timeout_s, or set [write_gate] failure_policy = 'fail_open' to store "
            "memories with a degraded verdict instead",
            reason=reason,
            usage=Usage.of_failed_call(cause),
        )
        refused.__cause__ = cause
        return refused

    def note(
        self, error: Exception, policy: DecisionFailurePolicy
    ) -> tuple[str, str, dict[str, Any]]:
        if isinstance(self.why(error), _NoVerdict):
            return (
                "write gate got no verdict; applying its failure policy",
                "write_gate.no_verdict",
                {"failure_policy": policy.value},
            )
        if policy is DecisionFailurePolicy.FAIL_OPEN:
            return "decision backend failed; failing open with abstain", "decision.fallback", {}
        return "write gate failed closed; the memory was not stored", "write_gate.refused", {}


def _governed(role: Role, policy_id: Any) -> Governed[GateVerdict]:
    return Governed(
        role.name,
        policy_id,
        role.failure_policy,
        role.timeout_s,
        logger=log,
        labels={"decision_kind": WRITE_GATE_DECISION_KIND},
    )


async def ask_write_gate(
    backend: DecisionBackend, text: str, *, role: Role = WRITE_GATE_ROLE
) -> GateVerdict:
    """Ask "is this worth remembering?" about ``text`` within ``role.timeout_s``.

    ``backend`` is the decision backend (bare, or the fail-open handle
    ``ComponentContext.decision_backend(name, role)`` gives: the gate asks its delegate). A
    **fail-open** role (the default) never raises for a backend failure or an expired timeout:
    a failure gives a degraded verdict that stores the memory. A **fail-closed** role raises
    :class:`~rankseam.errors.WriteGateError` instead (the memory must not be stored), with the
    backend error as ``__cause__``. Either way the verdict or the error carries what the call
    spent (every request the backend made, timed-out ones included).
    """
    bare = unwrap(backend)
    policy_id = getattr(bare, "policy_id", None)
    return await _governed(role, policy_id).run(
        bare.evaluate(write_gate_request(text)), _GateOutcomes(role, policy_id, bare)
    )


def gate_without_verdict(
    role: Role, policy_id: str, why: str, reason: str = "timeout"
) -> GateVerdict:
    """The write gate's answer when no verdict could be awaited at all (its backend blocked
    the event-loop thread past ``role.timeout_s``, or stopped that loop): a degraded verdict
    that stores, for a fail-open role; :class:`~rankseam.errors.WriteGateError` with
    ``reason`` (nothing stored), for a fail-closed one. The call counts once, tokens unknown."""
    return _governed(role, policy_id).settle(
        False, _NoVerdict(why, reason), _GateOutcomes(role, policy_id)
    )


class WriteGate:
    """The write gate of one Memory: its role (from the configuration), its backend (built on
    first use by ``build``, or given), asked through the Memory's loop ``runner``. Thread-safe."""

    def __init__(
        self,
        role: Role,
        build: Callable[[], DecisionBackend],
        runner: LoopRunner,
        backend: DecisionBackend | None = None,
    ) -> None:
        self._role = role
        self._build = build
        self._runner = runner
        self._backend = backend
        self._lock = threading.Lock()

    def backend(self) -> DecisionBackend:
        with self._lock:
            if self._backend is None:
                self._backend = self._build()
            return self._backend

    def verdict(self, text: str) -> GateVerdict:
        """The gate's verdict on ``text`` for a synchronous caller: it waits at most the
        role's ``timeout_s`` plus :data:`GATE_BLOCKED_MARGIN_S` (a backend that blocked or
        stopped the event loop gets no verdict: :func:`gate_without_verdict`'s policy).
        Raises :class:`~rankseam.errors.WriteGateError` when a fail-closed gate got none."""
        backend = self.backend()
        role = self._role
        policy_id = getattr(unwrap(backend), "policy_id", None)
        verdict = _governed(role, policy_id).run_sync(
            self._runner,
            lambda: ask_write_gate(backend, text, role=role),
            GATE_BLOCKED_MARGIN_S,
            _GateOutcomes(role, policy_id, backend),
        )
        if not verdict.store:
            memory_log.info("write gate declined a memory", extra={"event": "write_gate.no"})
        elif verdict.degraded:
            memory_log.warning(
                "write gate degraded; storing anyway", extra={"event": "write_gate.degraded"}
            )
        return verdict
