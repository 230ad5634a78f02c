"""The decision port: one narrow yes/no/abstain question, and role-level failure policy.

A *decision backend* answers a :class:`DecisionRequest` with a :class:`DecisionResult` and
raises on failure. A *role* (a consumer such as the decision reranker or the write gate)
declares a :class:`DecisionFailurePolicy` (fail-open unless it opts into fail-closed); the host
resolves it when it hands the role a backend. Role resolution exists once, in
:func:`wrap_for_role`: ``ComponentContext.decision_backend`` and
``ComponentContext.generation_backend`` go through it, and so does the write gate:

- ``FAIL_CLOSED`` roles get the backend itself (the *unwrapped* handle): failures raise.
- ``FAIL_OPEN`` roles get it inside :class:`FailOpenDecisionBackend`, the decision face of the
  one fail-open envelope (:class:`rankseam.governed.FailOpenEnvelope`, a governed call per
  request): any ``Exception`` (and the role's timeout) becomes ``ABSTAIN`` with
  ``used_fallback=True`` and the usage the failed call spent; ``asyncio.CancelledError`` always
  propagates.

One backend instance may serve a fail-open and a fail-closed role at the same time: the policy
belongs to the role, never to the backend. ``docs/decision-port.md`` is the user-facing guide.
"""

from __future__ import annotations

import enum
import logging
import warnings
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import attrs

from rankseam.checks import is_real, non_empty_str
from rankseam.errors import InvalidOutputError
from rankseam.governed import (
    DEFAULT_ROLE_TIMEOUT_S,
    DecisionFailurePolicy,
    FailOpenEnvelope,
    failure_policy,
)
from rankseam.types import Usage

__all__ = [
    "DEFAULT_ROLE_TIMEOUT_S",
    "DEFAULT_WRITE_GATE_TIMEOUT_S",
    "RERANK_DECISION_KIND",
    "RERANK_QUESTION",
    "RERANK_ROLE",
    "WRITE_GATE_DECISION_KIND",
    "WRITE_GATE_QUESTION",
    "WRITE_GATE_ROLE",
    "DecisionBackend",
    "DecisionFailurePolicy",
    "DecisionOutcome",
    "DecisionRequest",
    "DecisionResult",
    "FailOpenDecisionBackend",
    "Role",
    "checked_result",
    "rerank_request",
    "unwrap",
    "wrap_for_role",
    "write_gate_request",
]

log = logging.getLogger("rankseam.decision")


class DecisionOutcome(enum.StrEnum):
    """A verdict. ``ABSTAIN`` is a deliberate "cannot tell" from a healthy backend *or* a
    degradation by the fail-open envelope; ``DecisionResult.used_fallback`` tells them apart,
    and consumers must look at it: the decision reranker keeps a healthy abstain but fails on a
    degraded one."""

    YES = "yes"
    NO = "no"
    ABSTAIN = "abstain"

    @classmethod
    def of_score(
        cls, score: float, *, yes_threshold: float, no_threshold: float
    ) -> DecisionOutcome:
        """The verdict of a backend that scores a candidate against two thresholds
        (``no_threshold <= yes_threshold``): ``YES`` at or above ``yes_threshold``, ``NO``
        below ``no_threshold``, ``ABSTAIN`` in between (and for a NaN score)."""
        if score >= yes_threshold:
            return cls.YES
        if score < no_threshold:
            return cls.NO
        return cls.ABSTAIN


def _evidence(value: object) -> tuple[str, ...]:
    if isinstance(value, str | bytes):
        raise TypeError(
            "DecisionRequest.evidence is a sequence of strings, not one string; "
            "write evidence=(text,)"
        )
    if not isinstance(value, Iterable):
        raise TypeError(f"DecisionRequest.evidence must be a sequence of strings, got {value!r}")
    out = tuple(value)
    for item in out:
        if not isinstance(item, str):
            raise TypeError(
                f"DecisionRequest.evidence items must be strings, got {type(item).__name__}"
            )
    return out


@attrs.frozen
class DecisionRequest:
    """One question. ``decision_kind`` is a low-cardinality label (safe for logs), never content.

    ``subject`` is what the question is about (may be empty: a memory can be empty text);
    ``evidence`` is a tuple of supporting strings (for reranking: the query).
    """

    decision_kind: str = attrs.field(validator=non_empty_str)
    question: str = attrs.field(validator=non_empty_str)
    subject: str = attrs.field(validator=attrs.validators.instance_of(str))
    evidence: tuple[str, ...] = attrs.field(default=(), converter=_evidence)


def _confidence(_inst: object, _attribute: object, value: Any) -> None:
    if value is None:
        return
    if not is_real(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"DecisionResult.confidence must be None or in [0, 1], got {value!r}")


@attrs.frozen
class DecisionResult:
    """A verdict with its cost.

    ``used_fallback`` is set only by the fail-open envelope: the backend failed and the verdict
    is a stand-in ``ABSTAIN``, not an answer. ``confidence`` is reserved (recorded, never used to
    decide). ``usage`` is the cost of this one evaluation.
    """

    outcome: DecisionOutcome = attrs.field(converter=DecisionOutcome)
    policy_id: str = attrs.field(validator=non_empty_str)
    usage: Usage = attrs.field(factory=Usage.zero, validator=attrs.validators.instance_of(Usage))
    rationale: str | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(str))
    )
    confidence: float | None = attrs.field(default=None, validator=_confidence)
    used_fallback: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))


@runtime_checkable
class DecisionBackend(Protocol):
    """What a decision backend implements.

    ``evaluate`` raises on failure (prefer the typed backend errors of :mod:`rankseam.errors`:
    ``BackendTimeoutError``, ``BackendUnavailableError``, ``InvalidOutputError``); it never
    degrades quietly on its own and never sets ``used_fallback``. It must be safe to call
    concurrently (the decision reranker may run several calls at once).

    Optional attribute the host reads when present: ``deterministic`` (same request, same
    verdict; rerankers built on the backend then declare themselves deterministic too).
    """

    policy_id: str

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult: ...


def _timeout(_inst: object, _attribute: object, value: Any) -> None:
    if not is_real(value) or value <= 0:
        raise ValueError(
            f"Role.timeout_s must be a finite number of seconds > 0 (default "
            f"{DEFAULT_ROLE_TIMEOUT_S:g}), got {value!r}; every role has a deadline"
        )


@attrs.frozen
class Role:
    """A consumer of a backend and the failure policy it declares.

    The policy defaults to ``FAIL_OPEN``, as in the reference RFC: a consumer is advisory
    unless it opts into ``FAIL_CLOSED`` (the rerank role does). ``timeout_s`` (finite, default
    :data:`DEFAULT_ROLE_TIMEOUT_S`) is enforced by the fail-open envelope, and by the write gate
    in both its forms; a fail-closed reranker role gets the bare backend and keeps the seam's
    per-search rerank deadline instead.
    """

    name: str = attrs.field(validator=non_empty_str)
    failure_policy: DecisionFailurePolicy = attrs.field(
        default=DecisionFailurePolicy.FAIL_OPEN, converter=failure_policy
    )
    timeout_s: float = attrs.field(default=DEFAULT_ROLE_TIMEOUT_S, validator=_timeout)


#: The reranking role: fails closed (an error is raised, never a quiet coarse result).
RERANK_ROLE = Role("rerank", DecisionFailurePolicy.FAIL_CLOSED)
#: How long the write gate waits for a verdict by default (``[write_gate] timeout_s``): a
#: hanging backend can never block ``Memory.add`` for longer.
DEFAULT_WRITE_GATE_TIMEOUT_S = 10.0
#: The advisory write gate: fails open (a degraded verdict never blocks a write), and gives up
#: after ``DEFAULT_WRITE_GATE_TIMEOUT_S``. ``[write_gate]`` may make it fail closed.
WRITE_GATE_ROLE = Role("write_gate", DecisionFailurePolicy.FAIL_OPEN, DEFAULT_WRITE_GATE_TIMEOUT_S)

RERANK_DECISION_KIND = "memory.rerank"
RERANK_QUESTION = "does this entry contain evidence that answers the query?"
WRITE_GATE_DECISION_KIND = "memory.write-gate"
WRITE_GATE_QUESTION = "is this worth remembering?"


def rerank_request(query: str, candidate_text: str) -> DecisionRequest:
    """The one place the rerank question is shaped (as the reference RFC: subject = candidate
    text, evidence = (query,))."""
    return DecisionRequest(RERANK_DECISION_KIND, RERANK_QUESTION, candidate_text, (query,))


def write_gate_request(text: str) -> DecisionRequest:
    """The write gate's question about a memory about to be stored (subject = its text)."""
    return DecisionRequest(WRITE_GATE_DECISION_KIND, WRITE_GATE_QUESTION, text, ())


def checked_result(value: object, backend: object) -> DecisionResult:
    """``value`` if it is a :class:`DecisionResult`, else :class:`InvalidOutputError`.

    Consumers of an unwrapped (fail-closed) handle call this on what ``evaluate`` returned, so
    that a backend answering with the wrong type fails loudly instead of being misread.
    """
    if isinstance(value, DecisionResult):
        return value
    name = getattr(backend, "policy_id", type(backend).__name__)
    raise InvalidOutputError(
        f"decision backend {name!r} returned {type(value).__name__}, not a DecisionResult; "
        "fix the backend's evaluate() to return rankseam.decision.DecisionResult"
    )


class FailOpenDecisionBackend(FailOpenEnvelope):
    """The decision port's face of the fail-open envelope (:class:`~rankseam.governed.
    FailOpenEnvelope`, one governed call per request): failures become a marked ``ABSTAIN``.

    Any ``Exception`` from the delegate -- including the role's deadline and an answer that is
    not a :class:`DecisionResult` -- becomes ``DecisionResult(ABSTAIN, policy_id, usage,
    used_fallback=True)`` and a warning log record with the fields ``event``
    (``decision.fallback``), ``decision_kind``, ``policy_id``, ``role`` and ``error_type`` (never
    the subject or evidence). ``usage`` is what the failed call spent
    (:meth:`Usage.of_failed_call`: the usage the backend attached to its error, or to the
    cancellation the deadline ended it with, else one call with unknown tokens), so a degraded
    verdict counts every request its backend made. ``asyncio.CancelledError`` always
    propagates.
    """

    method = "evaluate"
    logger = log
    fallback_message = "decision backend failed; failing open with abstain"
    fallback_event = "decision.fallback"
    delegate: DecisionBackend

    async def evaluate(self, request: DecisionRequest, /) -> DecisionResult:
        return await self.call(request)  # type: ignore[no-any-return]

    def check(self, value: Any) -> DecisionResult:
        return checked_result(value, self.delegate)

    def stand_in(self, usage: Usage) -> DecisionResult:
        return DecisionResult(DecisionOutcome.ABSTAIN, self.policy_id, usage, used_fallback=True)

    def labels(self, request: DecisionRequest) -> dict[str, Any]:
        return {"decision_kind": request.decision_kind}


def unwrap(backend: DecisionBackend) -> DecisionBackend:
    """The backend itself, without the fail-open envelope if it wears one."""
    if isinstance(backend, FailOpenDecisionBackend):
        return backend.delegate
    return backend


def wrap_for_role(backend: Any, role: Role, envelope: type[Any] = FailOpenDecisionBackend) -> Any:
    """The one role resolution: ``backend`` as ``role`` receives it, the unwrapped handle or
    the port's fail-open ``envelope`` (:class:`FailOpenDecisionBackend`, or
    :class:`~rankseam.generation.FailOpenGenerationBackend` for a generation backend).

    Every role goes through here: ``ComponentContext.decision_backend`` and
    ``generation_backend``, and the write gate (:mod:`rankseam.writing.gate`). Idempotent and
    safe: a fail-closed role always receives the bare backend (even when handed an enveloped
    one), and a fail-open role gets exactly one envelope carrying its own name and timeout.
    """
    bare = backend.delegate if isinstance(backend, FailOpenEnvelope) else backend
    if role.failure_policy is DecisionFailurePolicy.FAIL_CLOSED:
        return bare
    return envelope(bare, role=role.name, timeout_s=role.timeout_s)


def __getattr__(name: str) -> Any:
    if name == "FailurePolicy":
        warnings.warn(
            "rankseam.decision.FailurePolicy is deprecated; its name is DecisionFailurePolicy "
            "(same values). The alias will be removed in a future release",
            DeprecationWarning,
            stacklevel=2,
        )
        return DecisionFailurePolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
