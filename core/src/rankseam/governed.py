"""The governed call: how the host calls a plugin under a deadline, a failure policy and a
fallback (docs/seam.md, "The governed call"; docs/decision-port.md).

Every host call into a plugin that may fail or hang goes through :class:`Governed`:

- the rerank seam's stage (:class:`rankseam.seam.running.RerankStage`, one per stage of a
  reranker chain);
- the fail-open envelope of the decision and generation ports (:class:`FailOpenEnvelope`,
  whose faces are :class:`~rankseam.decision.FailOpenDecisionBackend` and
  :class:`~rankseam.generation.FailOpenGenerationBackend`);
- the write gate (:mod:`rankseam.writing.gate`).

What the runner owns, for all of them:

- **The deadline.** The call runs as a task of its own; at ``deadline_s`` it is cancelled, given
  :data:`CANCEL_GRACE_S` to end (what it spent is read from the cancellation it ends with), and
  then abandoned (it runs on; its answer is discarded). The failure is a
  the deadline's ``TimeoutError`` (:func:`deadline_exceeded`) carrying that usage.
- **Cancellation.** A cancellation of the caller always propagates; it cancels the call, and
  the ``CancelledError`` carries what the call spent when the call ended within the grace.
- **The failure policy** (:class:`DecisionFailurePolicy`, one vocabulary on every surface):
  ``FAIL_CLOSED`` raises the role's error (:meth:`Outcomes.refuse`) from the failure;
  ``FAIL_OPEN`` returns the role's fallback (:meth:`Outcomes.fallback`) and logs a warning.
- **The log record** of a failure: the role's message, with the structured fields ``event``,
  ``policy_id``, ``role``, ``error_type`` and the call's labels (``decision_kind``,
  ``request_name``): low-cardinality values, never memory text or secrets.
- **Synchronous callers** (:meth:`Governed.run_sync`): the call runs on the host's
  :class:`~rankseam.loop.LoopRunner`; a loop that a plugin blocked past the deadline plus a
  margin (:class:`~rankseam.loop.LoopTimeout`), or stopped (:class:`~rankseam.loop.LoopStopped`),
  fails the call under the same policy.

What the role owns (:class:`Outcomes`): what a healthy answer is, its fallback, its error, and
its trace entry (a rerank stage's :class:`~rankseam.types.RerankTrace`, a marked
``DecisionResult``/``GenerationResult``, a :class:`~rankseam.writing.gate.GateVerdict`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

import attrs

from rankseam.loop import LoopRunner, LoopStopped, LoopTimeout
from rankseam.types import Usage

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "CANCEL_GRACE_S",
    "DEFAULT_ROLE_TIMEOUT_S",
    "LEGACY_POLICY_SPELLINGS",
    "DecisionFailurePolicy",
    "FailOpenEnvelope",
    "Governed",
    "Outcomes",
    "attempt",
    "deadline_exceeded",
    "failure_policy",
    "foreign",
    "is_deadline",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

log = logging.getLogger("rankseam.governed")


class DecisionFailurePolicy(enum.StrEnum):
    """What a governed call does when its plugin fails: ``FAIL_CLOSED`` raises an error,
    ``FAIL_OPEN`` degrades visibly to the role's fallback (a marked abstain for a decision, a
    marked empty result for a generation, the previous selection marked ``degraded`` for a
    rerank stage, a degraded verdict that stores for the write gate)."""

    FAIL_OPEN = "fail_open"
    FAIL_CLOSED = "fail_closed"


#: Earlier spellings of the two policies, still accepted wherever a policy is given (they were
#: the values of the seam's ``on_error``): ``"raise"`` is ``fail_closed``, ``"coarse"`` is
#: ``fail_open``.
LEGACY_POLICY_SPELLINGS: Mapping[str, DecisionFailurePolicy] = {
    "raise": DecisionFailurePolicy.FAIL_CLOSED,
    "coarse": DecisionFailurePolicy.FAIL_OPEN,
}


def failure_policy(value: object) -> DecisionFailurePolicy:
    """``value`` as a :class:`DecisionFailurePolicy`: a member, ``"fail_closed"`` /
    ``"fail_open"``, or the earlier ``"raise"`` / ``"coarse"``; ``ValueError`` otherwise."""
    if isinstance(value, str):
        if value in LEGACY_POLICY_SPELLINGS:
            return LEGACY_POLICY_SPELLINGS[value]
        try:
            return DecisionFailurePolicy(value)
        except ValueError:
            pass
    raise ValueError(
        "a failure policy is 'fail_closed' (raise an error) or 'fail_open' (degrade visibly to "
        f"the fallback); 'raise' and 'coarse' are accepted for them too; got {value!r}"
    )


#: Every role's deadline unless it declares its own: a fail-open envelope never waits longer
#: for a backend than this.
DEFAULT_ROLE_TIMEOUT_S = 30.0
#: How long a call cancelled at its deadline may take to end before it is abandoned.
CANCEL_GRACE_S = 0.5


def deadline_exceeded(deadline_s: float, *, abandoned: bool, usage: Usage | None) -> TimeoutError:
    """The failure of a governed call that passed its deadline: a ``TimeoutError`` (as
    ``asyncio.timeout`` raises) with ``deadline_s``, ``abandoned`` (it did not end within
    :data:`CANCEL_GRACE_S` of its cancellation) and ``usage`` (what it said it spent on the way
    out; ``None``: unknown)."""
    detail = "it ignored its cancellation and was abandoned" if abandoned else "it was cancelled"
    error = TimeoutError(f"no answer within the deadline of {deadline_s:g} s ({detail})")
    error.deadline_s = deadline_s  # type: ignore[attr-defined]
    error.abandoned = abandoned  # type: ignore[attr-defined]
    error.usage = usage  # type: ignore[attr-defined]
    return error


def is_deadline(error: BaseException) -> bool:
    """Whether ``error`` is a governed call's deadline (:func:`deadline_exceeded`)."""
    return isinstance(error, TimeoutError) and hasattr(error, "abandoned")


async def _guarded(call: Awaitable[Any]) -> tuple[bool, Any]:
    """Await the plugin's coroutine; answer ``(True, value)`` or ``(False, exception)``.

    Nothing escapes as a ``BaseException``: a ``SystemExit`` leaving a task would stop the
    event loop that runs it (and every other call on it). A ``GeneratorExit`` is caught too:
    ending normally is what closing a coroutine asks for."""
    try:
        return True, await call
    except BaseException as exc:
        return False, exc


def _usage_of(task: asyncio.Future[Any]) -> Usage | None:
    """What a call that ended after its cancellation said it spent (on its error or its late
    answer), or ``None``."""
    if not task.done() or task.cancelled():
        return None
    usage = getattr(task.result()[1], "usage", None)
    return usage if isinstance(usage, Usage) else None


async def attempt(
    call: Awaitable[Any],
    deadline_s: float,
    *,
    abandoned: tuple[logging.Logger, str, Mapping[str, Any]] | None = None,
) -> tuple[bool, Any]:
    """Await ``call`` within ``deadline_s``: ``(True, answer)``, or ``(False, exception)`` saying
    why not (whatever the call raised, ``BaseException`` included, or the deadline's
    ``TimeoutError``: :func:`deadline_exceeded`). Only a cancellation of the caller propagates
    (it cancels the call, waits up to :data:`CANCEL_GRACE_S` for it and carries what it
    spent).

    ``abandoned``: the logger, message and fields of the warning logged when a call ignores
    its cancellation at the deadline and is abandoned."""
    import asyncio  # on first use: a search that runs inline never imports asyncio

    task = asyncio.ensure_future(_guarded(call))
    try:
        done, _pending = await asyncio.wait({task}, timeout=deadline_s)
    except asyncio.CancelledError as cancelled:  # the caller itself was cancelled
        task.cancel()
        try:
            await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
        finally:  # an abandoned call ends inside _guarded: nothing is left unretrieved
            usage = _usage_of(task)
            if usage is not None:
                cancelled.usage = usage  # type: ignore[attr-defined]
        raise
    if done:
        return task.result()  # type: ignore[no-any-return]
    task.cancel()
    await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
    usage = _usage_of(task)
    gone = not task.done()
    if gone:  # it runs on; it ends inside _guarded, so nothing is left unretrieved
        logger, message, fields = abandoned or (log, "a plugin call ignored its cancellation", {})
        logger.warning(message, extra={**fields, "reason": "timeout"})
    return False, deadline_exceeded(deadline_s, abandoned=gone, usage=usage)


class Outcomes(Protocol[T_co]):
    """What a role makes of a governed call: each method answers the role's trace entry (or
    its error) for one way the call can end."""

    def accept(self, value: Any, /) -> T_co:
        """The result for the plugin's answer ``value``; raises an ``Exception`` when it is
        not a valid answer (the call then failed)."""
        ...

    def fallback(self, error: Exception, /) -> T_co:
        """The fail-open stand-in for a failed call (``error`` says why)."""
        ...

    def refuse(self, error: Exception, /) -> Exception:
        """The fail-closed error raised (from ``error``) for a failed call."""
        ...

    def note(
        self, error: Exception, policy: DecisionFailurePolicy, /
    ) -> tuple[str, str, dict[str, Any]] | None:
        """The failure's log record: message, ``event`` and extra fields (``None``: no record)."""
        ...


@attrs.frozen
class Governed(Generic[T]):
    """How one plugin call is governed: the ``role`` that makes it, the plugin's
    ``policy_id`` (``None`` when it has none), the role's ``failure_policy`` and
    ``deadline_s``, the call's ``labels`` (low-cardinality log fields such as
    ``decision_kind``), the ``logger`` of its records, and whether a ``BaseException`` that is
    not an ``Exception`` (``SystemExit``, a ``CancelledError`` the plugin raised itself) is the
    plugin's failure (``contain=True``, the rerank seam) or propagates (a role's backend)."""

    role: str
    policy_id: str | None
    failure_policy: DecisionFailurePolicy = attrs.field(converter=failure_policy)
    deadline_s: float
    logger: logging.Logger = attrs.field(default=log, eq=False)
    labels: Mapping[str, Any] = attrs.field(factory=dict)
    contain: bool = False
    #: The message of the warning logged when the call ignores its cancellation and is
    #: abandoned.
    abandoned_message: str = "a plugin call ignored its cancellation at the deadline; abandoned"

    def fields(self) -> dict[str, Any]:
        return {"policy_id": self.policy_id, "role": self.role, **self.labels}

    async def run(self, call: Awaitable[Any], outcomes: Outcomes[T]) -> T:
        """Await ``call`` under the deadline and settle it through ``outcomes``."""
        ok, value = await attempt(
            call, self.deadline_s, abandoned=(self.logger, self.abandoned_message, self.fields())
        )
        return self.settle(ok, value, outcomes)

    def run_sync(
        self,
        runner: LoopRunner,
        call: Callable[[], Awaitable[T]],
        margin_s: float,
        outcomes: Outcomes[T],
    ) -> T:
        """``call()`` (a coroutine that settles itself, e.g. :meth:`run`) for a synchronous
        caller, on ``runner``'s loop thread, waited for at most ``deadline_s + margin_s``. A
        loop that a plugin blocked past that (:class:`~rankseam.loop.LoopTimeout`; the runner
        replaces it) or stopped (:class:`~rankseam.loop.LoopStopped`) fails the call."""
        try:
            return runner.run(call(), self.deadline_s + margin_s)  # type: ignore[arg-type]
        except (LoopTimeout, LoopStopped) as exc:
            return self.settle(False, exc, outcomes)

    def settle(self, ok: bool, value: Any, outcomes: Outcomes[T]) -> T:
        """The policy: ``outcomes.accept(value)`` for an answer that it accepts; for a
        failure, ``outcomes.fallback`` (fail-open) or ``outcomes.refuse`` raised (fail-closed),
        with the failure's log record."""
        if ok:
            try:
                return outcomes.accept(value)
            except Exception as exc:
                value = exc
        elif not isinstance(value, Exception) and not self.contain:
            raise value  # a CancelledError (or SystemExit) of the plugin's own propagates
        error: Exception = value if isinstance(value, Exception) else _Foreign(value)
        note = outcomes.note(error, self.failure_policy)
        if note is not None:
            message, event, extra = note
            self.logger.warning(
                message,
                extra={
                    "event": event,
                    **self.fields(),
                    "error_type": type(value).__name__,
                    **extra,
                },
            )
        if self.failure_policy is DecisionFailurePolicy.FAIL_CLOSED:
            refused = outcomes.refuse(error)
            raise refused from (error if refused.__cause__ is None else refused.__cause__)
        return outcomes.fallback(error)


class _Foreign(Exception):
    """A ``BaseException`` that is not an ``Exception``, held as the plugin's failure (the
    original is :attr:`original`, and the ``__cause__``)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(f"{type(original).__name__}({original})")
        self.original = original
        self.__cause__ = original
        usage = getattr(original, "usage", None)
        self.usage = usage if isinstance(usage, Usage) else None


def foreign(error: Exception) -> BaseException | None:
    """The ``BaseException`` a contained failure stands for, else ``None``."""
    return error.original if isinstance(error, _Foreign) else None


class FailOpenEnvelope:
    """The fail-open envelope of a backend port (the only one): a governed call per request,
    whose fallback is the port's marked stand-in. Its faces are
    :class:`~rankseam.decision.FailOpenDecisionBackend` (``evaluate``) and
    :class:`~rankseam.generation.FailOpenGenerationBackend` (``generate``); a face says how
    its port checks an answer, builds the stand-in and labels a request.

    Built by the host's role resolution (``rankseam.decision.wrap_for_role``), never nested:
    wrapping an envelope wraps its delegate."""

    #: the delegate's method the face calls
    method: str = ""
    #: the logger of the face's records
    logger: logging.Logger = log
    #: the fallback's log message and event
    fallback_message: str = ""
    fallback_event: str = ""

    def __init__(
        self, delegate: Any, *, role: str, timeout_s: float = DEFAULT_ROLE_TIMEOUT_S
    ) -> None:
        if isinstance(delegate, FailOpenEnvelope):
            delegate = delegate.delegate  # the envelope is applied once, never nested
        self.delegate: Any = delegate
        self.role = role
        self.timeout_s = timeout_s
        self.policy_id: str = delegate.policy_id
        self.deterministic = bool(getattr(delegate, "deterministic", False))

    # what a face defines -------------------------------------------------------------------

    def check(self, value: Any) -> Any:  # pragma: no cover - every face overrides it
        raise NotImplementedError

    def stand_in(self, usage: Usage) -> Any:  # pragma: no cover - every face overrides it
        raise NotImplementedError

    def labels(self, request: Any) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    # the governed call ----------------------------------------------------------------------

    async def call(self, request: Any) -> Any:
        governed: Governed[Any] = Governed(
            self.role,
            self.policy_id,
            DecisionFailurePolicy.FAIL_OPEN,
            self.timeout_s,
            logger=self.logger,
            labels=self.labels(request),
        )
        return await governed.run(getattr(self.delegate, self.method)(request), _Envelope(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.delegate!r}, role={self.role!r})"


class _Envelope:
    """The outcomes of a fail-open envelope's call."""

    __slots__ = ("face",)

    def __init__(self, face: FailOpenEnvelope) -> None:
        self.face = face

    def accept(self, value: Any) -> Any:
        return self.face.check(value)

    def fallback(self, error: Exception) -> Any:
        return self.face.stand_in(Usage.of_failed_call(error))

    def refuse(self, error: Exception) -> Exception:  # pragma: no cover - always fail-open
        return error

    def note(
        self, error: Exception, policy: DecisionFailurePolicy
    ) -> tuple[str, str, dict[str, Any]]:
        return self.face.fallback_message, self.face.fallback_event, {}
