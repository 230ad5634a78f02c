"""Running a reranker inside the seam: the reranker made ready once per resolution
(:class:`SeamReranker`), the rerank stage of one search (:class:`RerankStage`) with its
deadline and failure policy, and :func:`rerank_pool`, the stage for callers that hold a pool.

Where the stage runs: an ``async def rerank`` on the caller's event loop (``asearch``,
``arerank``) or on the host's private loop thread (synchronous callers, through
:class:`rankseam.loop.LoopRunner`); a synchronous ``rerank`` in a thread of its own; one that
declares ``needs_event_loop = False`` inline in the caller's thread
(:func:`rankseam.loop.run_inline`). docs/seam.md, "Deadline".
"""

from __future__ import annotations

import contextvars
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rankseam.errors import RerankError, ValidationError
from rankseam.governed import (
    CANCEL_GRACE_S,
    DecisionFailurePolicy,
    Governed,
    foreign,
    is_deadline,
)
from rankseam.loop import LoopRunner, LoopStopped, LoopTimeout, Suspended, run_inline
from rankseam.seam.results import (
    Outcome,
    attach_usage,
    deadline_error,
    degradation,
    degraded,
    describe,
    foreign_base_exception,
    refusal,
    resolve,
)
from rankseam.seam.validation import (
    DEFAULT_MAX_CHARS,
    DEFAULT_RERANK_DEADLINE_S,
    MAX_POOL,
    OnError,
    check_decision,
    declared_deadline,
    validate_deadline,
    validate_limit,
    validate_on_error,
)
from rankseam.seam.views import NeighbourTable, VectorFetcher, Vectors, make_candidates
from rankseam.types import Candidate, Hit, RerankDecision, RerankTrace

if TYPE_CHECKING:
    import asyncio


__all__ = [
    "CANCEL_GRACE_S",
    "DEADLINE_MARGIN_S",
    "RerankStage",
    "Reranker",
    "SeamReranker",
    "as_async_reranker",
    "check_reranker",
    "expired_rerank",
    "prepare_reranker",
    "rerank_pool",
    "runs_inline",
]

log = logging.getLogger("rankseam.seam")

#: The most a search returns after its rerank deadline: the grace above, plus the hop back to
#: the caller. A synchronous search whose event-loop thread is blocked by a plugin is released
#: at the deadline plus this margin (and that thread is replaced).
DEADLINE_MARGIN_S = 1.0


@runtime_checkable
class Reranker(Protocol):
    """What a reranker implements.

    ``rerank`` receives the query, the coarse pool as read-only candidate views (``rank`` is the
    1-based coarse position) and ``limit`` (already ``<= len(candidates)`` when called by the
    seam). It answers with 1-based ranks. A synchronous ``rerank`` is supported too (run in a
    worker thread by :func:`as_async_reranker`).

    Optional attributes the host reads when present: ``descriptor`` (a JSON-able mapping for the
    trace, no secrets), ``needs_embeddings`` (ask the host to attach stored vectors),
    ``deterministic`` (the conformance kit then checks repeatability), ``needs_event_loop``
    (``False`` declares that an async ``rerank`` never suspends: a synchronous search then runs
    it inline instead of on the host's event-loop thread; see :func:`runs_inline`).
    """

    policy_id: str

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision: ...


class _SyncRerankerAdapter:
    """Runs a synchronous ``rerank`` in a daemon thread of its own (not a shared pool, so a
    reranker abandoned at its deadline can never starve later searches); every other attribute
    passes through. Whatever the call raises, ``BaseException`` included, is handed to the
    awaiting search, never raised in the thread."""

    def __init__(self, inner: Any) -> None:
        self.wrapped_reranker = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped_reranker, name)

    async def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        import asyncio  # on first use: a search that runs inline never imports asyncio

        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()
        inner = self.wrapped_reranker

        def work() -> None:
            try:
                outcome: tuple[bool, Any] = (
                    True,
                    context.run(inner.rerank, query, candidates, limit),
                )
            except BaseException as exc:  # handed to the search, which applies its policy
                outcome = (False, exc)
            try:
                loop.call_soon_threadsafe(_settle, answer, outcome)
            except RuntimeError:  # the loop is closed: nobody waits for this answer any more
                pass

        threading.Thread(target=work, name="rankseam-sync-rerank", daemon=True).start()
        return await answer


def _settle(answer: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if answer.done():  # cancelled at the deadline: the late answer is discarded
        return
    ok, value = outcome
    if ok:
        answer.set_result(value)
    else:
        answer.set_exception(value)


def runs_inline(reranker: Any) -> bool:
    """True when ``reranker`` declares ``needs_event_loop = False`` and its ``rerank`` is a
    coroutine function: it never awaits anything that suspends (no I/O, no thread, no sleep),
    so a synchronous search can run it to completion without an event loop."""
    rerank = getattr(reranker, "rerank", None)
    return getattr(reranker, "needs_event_loop", True) is False and inspect.iscoroutinefunction(
        rerank
    )


def check_reranker(reranker: Any) -> None:
    """``TypeError`` unless ``reranker`` has a ``policy_id`` string and a callable
    ``rerank``."""
    rerank = getattr(reranker, "rerank", None)
    if rerank is None or not callable(rerank):
        raise TypeError(f"{reranker!r} has no callable rerank(query, candidates, limit)")
    if not isinstance(getattr(reranker, "policy_id", None), str):
        raise TypeError(f"{reranker!r} has no policy_id string")


def as_async_reranker(reranker: Any) -> Reranker:
    """Return ``reranker`` itself when its ``rerank`` is async, else the one sync adapter
    (``TypeError`` when it is no reranker: :func:`check_reranker`)."""
    check_reranker(reranker)
    if inspect.iscoroutinefunction(reranker.rerank):
        return reranker  # type: ignore[no-any-return]
    return _SyncRerankerAdapter(reranker)  # type: ignore[return-value]


class SeamReranker:
    """A reranker made ready for the seam once, where a search resolves it: its async
    ``rerank`` (a synchronous one wrapped by :func:`as_async_reranker`) and whether a
    synchronous caller runs it inline (:func:`runs_inline`). ``component`` is the reranker
    itself (its ``policy_id``, ``descriptor`` and ``needs_embeddings`` are read per stage)."""

    __slots__ = ("component", "inline", "rerank")

    def __init__(
        self,
        component: Any,
        rerank: Callable[[str, Sequence[Candidate], int], Awaitable[Any]],
        inline: bool,
    ) -> None:
        self.component = component
        self.rerank = rerank
        self.inline = inline

    def __repr__(self) -> str:
        return f"SeamReranker({self.component!r}, inline={self.inline})"


def prepare_reranker(reranker: Any, *, strict: bool = True) -> SeamReranker:
    """``reranker`` made ready for the seam (a :class:`SeamReranker` is returned as it is).

    ``strict``: a reranker that does not implement the protocol raises ``TypeError`` here;
    otherwise (:func:`rerank_pool`) calling it fails its stage under the search's policy."""
    if isinstance(reranker, SeamReranker):
        return reranker
    if isinstance(reranker, _SyncRerankerAdapter):  # already wrapped: wrap the reranker once
        reranker = reranker.wrapped_reranker
    try:
        check_reranker(reranker)
    except TypeError as exc:
        if strict:
            raise
        error = exc

        async def refuse(query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
            raise error

        return SeamReranker(reranker, refuse, False)
    rerank = reranker.rerank
    if inspect.iscoroutinefunction(rerank):  # as runs_inline() decides, without asking twice
        return SeamReranker(reranker, rerank, getattr(reranker, "needs_event_loop", True) is False)
    return SeamReranker(reranker, _SyncRerankerAdapter(reranker).rerank, False)


class RerankStage:
    """The rerank stage of one search: its arguments are checked by the caller (the search
    plan, or :func:`rerank_pool`), the pool is non-empty and a reranker is chosen.

    Run it once: :meth:`run` (async), or :meth:`run_sync` (a synchronous caller, through the
    host's :class:`~rankseam.loop.LoopRunner`). Either answers the final hits and the stage's
    trace, or raises :class:`~rankseam.errors.RerankError` when the reranker failed and the
    policy is ``"raise"``; only a cancellation of the search itself leaves as
    ``asyncio.CancelledError``.
    """

    __slots__ = (
        "candidates",
        "deadline_s",
        "descriptor",
        "k",
        "on_error",
        "own_deadline",
        "policy_id",
        "pool",
        "query",
        "reranker",
    )

    def __init__(
        self,
        query: str,
        pool: tuple[Hit, ...],
        limit: int,
        reranker: SeamReranker,
        *,
        on_error: OnError,
        deadline_s: float,
        max_chars: int = DEFAULT_MAX_CHARS,
        vectors: Callable[[], Vectors] | None = None,
        embedding_space: str | None = None,
        neighbours: NeighbourTable | None = None,
    ) -> None:
        component = reranker.component
        self.query = query
        self.pool = pool
        self.k = min(limit, len(pool))
        self.reranker = reranker
        self.on_error = on_error
        self.policy_id = str(getattr(component, "policy_id", type(component).__name__))
        own = declared_deadline(component, self.policy_id)
        #: the reranker's own bound, when it declares one below the search's: the host enforces
        #: it (no plugin wraps its work in a deadline of its own)
        self.own_deadline = own is not None and own < deadline_s
        self.deadline_s = own if own is not None and own < deadline_s else deadline_s
        self.descriptor = describe(component)
        fetched = None
        if vectors is not None and getattr(component, "needs_embeddings", False):
            fetched = vectors()
        self.candidates = make_candidates(
            pool,
            max_chars=max_chars,
            vectors=fetched,
            embedding_space=embedding_space,
            metadata=bool(getattr(component, "needs_metadata", False)),
            neighbours=neighbours if getattr(component, "needs_neighbours", None) else None,
        )

    def deadline_error(self, detail: str) -> RerankError:
        """The error of this stage past its deadline (the search's, or the reranker's own)."""
        return deadline_error(self.policy_id, self.deadline_s, detail, own=self.own_deadline)

    def governed(self) -> Governed[Outcome]:
        """How this stage's call is governed: the search's policy and deadline, and every
        failure of the plugin (``SystemExit`` & co. included) contained as its failure."""
        return Governed(
            "rerank",
            self.policy_id,
            self.on_error,
            self.deadline_s,
            logger=log,
            contain=True,
            abandoned_message="reranker ignored its cancellation at the deadline; abandoned",
        )

    async def run(self) -> Outcome:
        """Call the reranker within the deadline and resolve its answer."""
        if self.reranker.inline:
            return self.run_inline()
        outcomes = _StageOutcomes(self, time.perf_counter())
        call = self.reranker.rerank(self.query, self.candidates, self.k)
        return await self.governed().run(call, outcomes)

    def run_sync(self, runner: LoopRunner) -> Outcome:
        """:meth:`run` for a synchronous caller: inline when the reranker declares it never
        suspends, else on ``runner``'s loop thread, waiting at most the deadline plus
        :data:`DEADLINE_MARGIN_S`. A loop that a plugin blocked past that, or stopped, fails
        this stage under its policy (the runner replaces the loop)."""
        if self.reranker.inline:
            return self.run_inline()
        outcomes = _StageOutcomes(self, time.perf_counter())
        return self.governed().run_sync(runner, self.run, DEADLINE_MARGIN_S, outcomes)

    def run_inline(self) -> Outcome:
        """Run a reranker that declares ``needs_event_loop = False`` to its end in this thread.
        It cannot be interrupted: an answer that comes back past the deadline is discarded."""
        outcomes = _StageOutcomes(self, time.perf_counter())
        call: Any = self.reranker.rerank(self.query, self.candidates, self.k)
        ok, value = False, None
        try:
            value, ok = run_inline(call), True
        except Suspended:
            value = RerankError(
                f"reranker {self.policy_id!r} declares needs_event_loop = False, but its "
                "rerank suspended (it awaited something that needs an event loop); remove the "
                "declaration or the await",
                policy_id=self.policy_id,
                reason="exception",
            )
        except BaseException as exc:  # the plugin's failure, SystemExit & co. included
            value = exc
        took = time.perf_counter() - outcomes.started
        if ok and took > self.deadline_s:
            ok, value = False, self.deadline_error(_late(took))
        return self.governed().settle(ok, value, outcomes)

    def expired(self, waited_s: float) -> Outcome:
        """The policy for a stage that never came back: its event loop was blocked by a plugin
        past the deadline plus :data:`DEADLINE_MARGIN_S` (a synchronous caller waited
        ``waited_s`` and gave up). The cost of the abandoned work is unknown, not counted."""
        outcomes = _StageOutcomes(self, time.perf_counter(), waited_s * 1000.0)
        blocked = LoopTimeout(f"no result within {waited_s:g} s; the loop is replaced")
        return self.governed().settle(False, blocked, outcomes)


class _StageOutcomes:
    """What a rerank stage makes of its governed call: the resolved answer, the degraded
    pool (fail-open) or the :class:`RerankError` (fail-closed), timed from ``started``."""

    __slots__ = ("stage", "started", "took_ms")

    def __init__(self, stage: RerankStage, started: float, took_ms: float | None = None) -> None:
        self.stage = stage
        self.started = started
        self.took_ms = took_ms  # how long it took, when the caller knows it (a blocked loop)

    def _ms(self) -> float:
        if self.took_ms is not None:
            return self.took_ms
        return (time.perf_counter() - self.started) * 1000.0

    def accept(self, value: Any) -> Outcome:
        stage = self.stage
        decision = check_decision(value, stage.policy_id)
        return resolve(decision, stage, self._ms())

    def why(self, error: Exception) -> Exception:
        """The stage's failure as the seam names it (a deadline, a lost loop and a
        ``SystemExit`` & co. become :class:`RerankError` s saying so)."""
        policy_id = self.stage.policy_id
        original = foreign(error)
        if original is not None:
            return foreign_base_exception(original, policy_id)
        if is_deadline(error):
            named = self.stage.deadline_error("it was cancelled")
            attach_usage(named, getattr(error, "usage", None))
            return named
        if isinstance(error, LoopTimeout):
            return self.stage.deadline_error(
                f"the search waited {self._ms() / 1000.0:.3g} s; the reranker blocked its event "
                "loop, which was abandoned and replaced",
            )
        if isinstance(error, LoopStopped):
            return RerankError(
                f"the event loop running reranker {policy_id!r} was stopped (a plugin "
                "called loop.stop()); a plugin may not stop the host's event loop. The search "
                "treats it as the reranker's failure (the next search runs on a fresh loop); "
                "fix the reranker",
                policy_id=policy_id,
                reason="exception",
            )
        return error

    def fallback(self, error: Exception) -> Outcome:
        return degraded(self.why(error), self.stage, self._ms())

    def refuse(self, error: Exception) -> Exception:
        why = self.why(error)
        refused = refusal(why, self.stage.policy_id)
        refused.__cause__ = why
        return refused

    def note(
        self, error: Exception, policy: DecisionFailurePolicy
    ) -> tuple[str, str, dict[str, Any]] | None:
        if policy is DecisionFailurePolicy.FAIL_CLOSED:
            return None  # the error says it all; nothing is logged
        message, fields = degradation(self.why(error))
        return message, "rerank.degraded", fields


def _late(took: float) -> str:
    return (
        f"it took {took:.3g} s; it declares needs_event_loop = False, so it ran in the "
        "caller's thread, which cannot be interrupted, and its late answer was discarded"
    )


def expired_rerank(
    pool: Sequence[Hit],
    limit: int,
    reranker: Any,
    *,
    on_error: OnError,
    deadline_s: float,
    waited_s: float,
) -> tuple[tuple[Hit, ...], RerankTrace]:
    """The failure policy for a rerank stage that did not come back at all (see
    :meth:`RerankStage.expired`): raises :class:`RerankError` with ``reason="timeout"``, or
    answers the coarse order marked ``degraded``."""
    stage = RerankStage(
        "",
        tuple(pool),
        limit,
        prepare_reranker(reranker, strict=False),
        on_error=on_error,
        deadline_s=deadline_s,
    )
    return stage.expired(waited_s)


async def rerank_pool(
    query: str,
    pool: Sequence[Hit],
    limit: int,
    reranker: Reranker | None,
    *,
    on_error: OnError = DecisionFailurePolicy.FAIL_CLOSED,
    max_chars: int = DEFAULT_MAX_CHARS,
    fetch_vectors: VectorFetcher | None = None,
    embedding_space: str | None = None,
    deadline_s: float = DEFAULT_RERANK_DEADLINE_S,
) -> tuple[tuple[Hit, ...], RerankTrace | None]:
    """Run the rerank stage over a coarse pool; return the final hits and the stage's trace.

    With no reranker, or an empty pool, the result is ``pool[:limit]`` and the trace is
    ``None``: no reranking work is done and the reranker is never called. ``deadline_s``
    bounds the reranker's call (docs/seam.md). The arguments are checked here, once.
    """
    validate_limit(limit)
    validate_on_error(on_error)
    deadline_s = validate_deadline(deadline_s)
    hits = tuple(pool)
    if len(hits) > MAX_POOL:
        raise ValidationError(f"the coarse pool holds {len(hits)} hits; at most {MAX_POOL} allowed")
    if reranker is None or not hits:
        return hits[:limit], None
    vectors = None
    if fetch_vectors is not None:

        def vectors() -> Vectors:
            return fetch_vectors([h.ref for h in hits])

    stage = RerankStage(
        query,
        hits,
        limit,
        prepare_reranker(reranker, strict=False),
        on_error=on_error,
        deadline_s=deadline_s,
        max_chars=max_chars,
        vectors=vectors,
        embedding_space=embedding_space,
    )
    return await stage.run()
