"""The decision port: one narrow yes/no/abstain question, and role-level failure policy.

A *decision backend* answers a :class:`DecisionRequest` with a :class:`DecisionResult` and
raises on failure. A *role* (a consumer such as the decision reranker or the write gate)
declares a :class:`FailurePolicy`; the host resolves it when it hands the role a backend:

- ``FAIL_CLOSED`` roles get the backend itself (the *unwrapped* handle): failures raise.
- ``FAIL_OPEN`` roles get it inside :class:`FailOpenDecisionBackend`, the one and only fail-open
  envelope: any ``Exception`` (and an optional timeout) becomes ``ABSTAIN`` with
  ``used_fallback=True`` and zero usage; ``asyncio.CancelledError`` always propagates.

One backend instance may serve a fail-open and a fail-closed role at the same time.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from typing import Protocol, runtime_checkable

import attrs

from rankseam.types import Usage

__all__ = [
    "DecisionOutcome",
    "DecisionRequest",
    "DecisionResult",
    "DecisionBackend",
    "FailurePolicy",
    "Role",
    "FailOpenDecisionBackend",
    "wrap_for_role",
    "RERANK_ROLE",
    "WRITE_GATE_ROLE",
    "RERANK_DECISION_KIND",
    "RERANK_QUESTION",
    "WRITE_GATE_DECISION_KIND",
    "WRITE_GATE_QUESTION",
    "rerank_request",
    "write_gate_request",
    "GateVerdict",
    "ask_write_gate",
]

log = logging.getLogger("rankseam.decision")


class DecisionOutcome(str, enum.Enum):
    """A verdict. ``ABSTAIN`` is a deliberate "cannot tell" from a healthy backend *or* a
    degradation by the fail-open envelope; ``DecisionResult.used_fallback`` tells them apart."""

    YES = "yes"
    NO = "no"
    ABSTAIN = "abstain"


def _non_empty(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"DecisionRequest.{attribute.name} must be a non-empty string")


@attrs.frozen
class DecisionRequest:
    """One question. ``decision_kind`` is a low-cardinality label (safe for logs), never content."""

    decision_kind: str = attrs.field(validator=_non_empty)
    question: str = attrs.field(validator=_non_empty)
    subject: str = attrs.field(validator=attrs.validators.instance_of(str))
    evidence: tuple[str, ...] = attrs.field(default=(), converter=tuple)


@attrs.frozen
class DecisionResult:
    """A verdict with its cost. ``used_fallback`` is set only by the fail-open envelope."""

    outcome: DecisionOutcome = attrs.field(converter=DecisionOutcome)
    policy_id: str
    usage: Usage = attrs.field(factory=Usage.zero)
    rationale: str | None = None
    confidence: float | None = None
    used_fallback: bool = False


@runtime_checkable
class DecisionBackend(Protocol):
    """What a decision backend implements. ``evaluate`` raises on failure (prefer the typed
    :mod:`rankseam.errors` backend errors); it never degrades quietly on its own."""

    policy_id: str

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult: ...


class FailurePolicy(str, enum.Enum):
    FAIL_OPEN = "fail_open"
    FAIL_CLOSED = "fail_closed"


@attrs.frozen
class Role:
    """A consumer of a backend and the failure policy it declares.

    ``timeout_s`` applies only to fail-open roles (a fail-closed consumer keeps its own deadline).
    """

    name: str
    failure_policy: FailurePolicy
    timeout_s: float | None = None


#: The reranking role: fails closed (an error is raised, never a quiet coarse result).
RERANK_ROLE = Role("rerank", FailurePolicy.FAIL_CLOSED)
#: The advisory write gate: fails open (a degraded verdict never blocks a write).
WRITE_GATE_ROLE = Role("write_gate", FailurePolicy.FAIL_OPEN)

RERANK_DECISION_KIND = "memory.rerank"
RERANK_QUESTION = "does this entry contain evidence that answers the query?"
WRITE_GATE_DECISION_KIND = "memory.write-gate"
WRITE_GATE_QUESTION = "is this worth remembering?"


def rerank_request(query: str, candidate_text: str) -> DecisionRequest:
    """The one place the rerank question is shaped (as the reference RFC: subject = candidate
    text, evidence = (query,))."""
    return DecisionRequest(RERANK_DECISION_KIND, RERANK_QUESTION, candidate_text, (query,))


def write_gate_request(text: str) -> DecisionRequest:
    """The write gate's question about a memory about to be stored."""
    return DecisionRequest(WRITE_GATE_DECISION_KIND, WRITE_GATE_QUESTION, text, ())


class FailOpenDecisionBackend:
    """The fail-open envelope (the only one): failures become a marked ``ABSTAIN``."""

    def __init__(self, delegate: DecisionBackend, *, role: str, timeout_s: float | None = None) -> None:
        self.delegate = delegate
        self.role = role
        self.timeout_s = timeout_s

    @property
    def policy_id(self) -> str:
        return self.delegate.policy_id

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        try:
            if self.timeout_s is None:
                return await self.delegate.evaluate(request)
            async with asyncio.timeout(self.timeout_s):
                return await self.delegate.evaluate(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning(
                "decision backend failed; failing open with abstain",
                extra={
                    "event": "decision.fallback",
                    "decision_kind": request.decision_kind,
                    "policy_id": self.delegate.policy_id,
                    "role": self.role,
                    "error_type": type(exc).__name__,
                },
            )
            return DecisionResult(
                DecisionOutcome.ABSTAIN, self.delegate.policy_id, Usage.zero(), used_fallback=True
            )

    def __repr__(self) -> str:
        return f"FailOpenDecisionBackend({self.delegate!r}, role={self.role!r})"


def wrap_for_role(backend: DecisionBackend, role: Role) -> DecisionBackend:
    """Resolve a role's failure policy: the unwrapped handle, or the fail-open envelope."""
    if role.failure_policy is FailurePolicy.FAIL_CLOSED:
        return backend
    return FailOpenDecisionBackend(backend, role=role.name, timeout_s=role.timeout_s)


@attrs.frozen
class GateVerdict:
    """The write gate's answer for one memory.

    ``store`` is False only for a healthy ``NO``. A degraded verdict (the backend failed and the
    fail-open envelope abstained) stores the memory anyway and says so with ``degraded=True``.
    """

    outcome: DecisionOutcome
    store: bool
    degraded: bool
    policy_id: str
    usage: Usage = attrs.field(factory=Usage.zero)
    rationale: str | None = None


async def ask_write_gate(backend: DecisionBackend, text: str) -> GateVerdict:
    """Ask "is this worth remembering?" through a (fail-open) write-gate handle."""
    result = await backend.evaluate(write_gate_request(text))
    return GateVerdict(
        outcome=result.outcome,
        store=result.used_fallback or result.outcome is not DecisionOutcome.NO,
        degraded=result.used_fallback,
        policy_id=result.policy_id,
        usage=result.usage,
        rationale=result.rationale,
    )
