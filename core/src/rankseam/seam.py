"""The rerank seam: the only place where plugin output meets stored memories.

Rules (docs/seam.md), enforced here whatever the plugin does:

- The reranker is called only when one is assembled and the pool is non-empty, with
  ``limit = min(requested limit, pool size)`` and read-only :class:`~rankseam.types.Candidate`
  views whose text is cut to ``max_chars``.
- Its answer must be a :class:`~rankseam.types.RerankDecision`. Each selected element that is
  not an integer in ``1..n`` (bools and strings included), or repeats an earlier rank, is
  discarded and counted; at most ``limit`` valid ranks are kept, in the plugin's order. Elements
  after the ``limit``-th kept rank are ignored but counted (``over_limit_count``) and named in
  the trace's reason, so a reranker that over-answers can be spotted.
- Optional per-rank ``scores`` pair with ``selected_ranks`` position for position: a scores
  tuple of another length is invalid output (a failure, below); a score that is not a finite
  real number makes its rank invalid (discarded and counted). Kept scores go on the hits
  (``Hit.rerank_score``) and into the trace; they never change the order.
- If no valid rank remains, the coarse ranks ``1..min(limit, n)`` are used and
  ``used_fallback=True`` (status ``fell_back``). A reranker that says ``used_fallback=True``
  must answer the coarse ranks ``1..j`` (or nothing); other ranks with that flag are invalid
  output (a failure, below). Whenever coarse ranks are used (fallback or ``degraded``) no
  reranker score is shown.
- Ranks resolve to the original hits: a plugin can never invent or alter an identity.
- Every reranker has a deadline (``deadline_s``, default :data:`DEFAULT_RERANK_DEADLINE_S`).
  At the deadline the reranker is cancelled, given :data:`CANCEL_GRACE_S` to end, and then
  abandoned; the search goes on without it. A synchronous ``rerank`` runs in a thread of its
  own, so a blocking one is abandoned too (Python cannot stop a thread: it runs on until it
  returns, and its answer is discarded).
- A failing reranker (any exception -- ``SystemExit``, ``KeyboardInterrupt`` and a
  ``CancelledError`` it raises itself included --, the deadline, or an answer of the wrong
  type) raises :class:`~rankseam.errors.RerankError` by default (``on_error="raise"``). With
  ``on_error="coarse"`` the coarse order is returned with status ``degraded``, the reason and a
  warning log. A cancellation of the search itself always propagates.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import math
import numbers
import operator
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol, overload, runtime_checkable

import attrs
import numpy as np

from rankseam.checks import is_int
from rankseam.errors import BackendError, RerankError, ValidationError
from rankseam.types import (
    Candidate,
    Hit,
    MemoryRef,
    RerankDecision,
    RerankStatus,
    RerankTrace,
    TraceCandidate,
    Usage,
    readonly_float32,
    readonly_vector,
)

__all__ = [
    "CANCEL_GRACE_S",
    "DEADLINE_MARGIN_S",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_POOL",
    "DEFAULT_RERANK_DEADLINE_S",
    "MAX_POOL",
    "MIN_POOL",
    "NO_RERANKER",
    "CandidateViews",
    "OnError",
    "Reranker",
    "as_async_reranker",
    "expired_rerank",
    "make_candidates",
    "normalize_ranks",
    "normalize_scored_ranks",
    "rerank_pool",
    "reranker_choice",
    "runs_inline",
    "trace_candidates",
    "validate_deadline",
    "validate_limit",
    "validate_pool_size",
]

log = logging.getLogger("rankseam.seam")

MIN_POOL = 1
MAX_POOL = 200
DEFAULT_POOL = 30
DEFAULT_MAX_CHARS = 2000
#: Default per-search rerank deadline in seconds (``[search] rerank_deadline_s``). It is a
#: backstop above the first-party rerankers' own deadlines (decision: 30 s; the OpenAI-compatible
#: backend: 60 s per request, retries included), so theirs fire first with their cost counted.
DEFAULT_RERANK_DEADLINE_S = 90.0
#: How long a reranker cancelled at the deadline may take to end before it is abandoned.
CANCEL_GRACE_S = 0.5
#: The most a search returns after its rerank deadline: the grace above, plus the hop back to
#: the caller. A synchronous search whose event-loop thread is blocked by a plugin is released
#: at the deadline plus this margin (and that thread is replaced).
DEADLINE_MARGIN_S = 1.0

#: The name that means "no reranker: the coarse order" wherever a reranker is named
#: (configuration, ``RANKSEAM_RERANK``, ``search(reranker=...)``, ``open_reranker``, the CLI).
NO_RERANKER = "none"

OnError = Literal["raise", "coarse"]
_ON_ERROR_CHOICES = ("raise", "coarse")

#: What a vector fetcher answers: one vector per identity, in order, ``None`` where a memory
#: has no vector in the active embedding space; or, when every memory has one, the ``n × d``
#: matrix of them (row ``i`` for identity ``i``).
Vectors = Sequence["np.ndarray | None"] | np.ndarray
#: Fetches stored vectors for a batch of identities in one call.
VectorFetcher = Callable[[Sequence[MemoryRef]], Vectors]


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
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def rerank(self, query: str, candidates: Sequence[Candidate], limit: int, /) -> Any:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()
        inner = self._inner

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


def as_async_reranker(reranker: Any) -> Reranker:
    """Return ``reranker`` itself when its ``rerank`` is async, else the one sync adapter."""
    rerank = getattr(reranker, "rerank", None)
    if rerank is None or not callable(rerank):
        raise TypeError(f"{reranker!r} has no callable rerank(query, candidates, limit)")
    if not isinstance(getattr(reranker, "policy_id", None), str):
        raise TypeError(f"{reranker!r} has no policy_id string")
    if inspect.iscoroutinefunction(rerank):
        return reranker  # type: ignore[no-any-return]
    return _SyncRerankerAdapter(reranker)  # type: ignore[return-value]


def reranker_choice(choice: Any) -> Any:
    """The one translation of a reranker choice: ``None`` for no reranker (``None``,
    :data:`NO_RERANKER` or an empty or blank string), else ``choice`` unchanged (a registered
    name or a reranker object)."""
    if choice is None or (isinstance(choice, str) and choice.strip() in ("", NO_RERANKER)):
        return None
    return choice


def validate_limit(limit: object) -> int:
    if not is_int(limit) or limit < 1:
        raise ValidationError(f"limit must be an integer >= 1, got {limit!r}")
    return limit


def validate_pool_size(pool: object) -> int:
    if not is_int(pool) or not MIN_POOL <= pool <= MAX_POOL:
        raise ValidationError(
            f"pool size must be an integer in {MIN_POOL}..{MAX_POOL}, got {pool!r}; "
            f"the coarse pool is bounded so that reranking cost stays bounded"
        )
    return pool


def validate_deadline(deadline_s: object, where: str = "rerank_deadline_s") -> float:
    """``deadline_s`` as a float when it is a finite number of seconds > 0 (at most a day)."""
    if not isinstance(deadline_s, numbers.Real) or isinstance(deadline_s, bool):
        raise ValidationError(
            f"{where} must be a number of seconds > 0, got {deadline_s!r}; the default is "
            f"{DEFAULT_RERANK_DEADLINE_S}"
        )
    value = float(deadline_s)
    if not (math.isfinite(value) and 0 < value <= 86400):
        raise ValidationError(
            f"{where} must be a finite number of seconds in (0, 86400], got {deadline_s!r}; "
            f"the default is {DEFAULT_RERANK_DEADLINE_S}"
        )
    return value


def validate_on_error(on_error: object) -> OnError:
    if on_error not in _ON_ERROR_CHOICES:
        raise ValidationError(
            f"on_error must be 'raise' (fail closed, the default) or 'coarse' (return the coarse "
            f"order with status 'degraded'), got {on_error!r}"
        )
    return on_error  # type: ignore[return-value]


def _is_rank(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def _as_score(value: object) -> float | None:
    """``value`` as a finite float, or ``None`` when it is not a finite real number."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool | np.bool_):
        return None
    try:
        score = float(value)
    except (OverflowError, TypeError, ValueError):
        return None
    return score if math.isfinite(score) else None


def normalize_ranks(raw: Sequence[object], n: int, limit: int) -> tuple[tuple[int, ...], int]:
    """Walk ``raw`` in order; keep valid, unseen ranks in ``1..n`` up to ``limit``.

    Returns ``(kept, discarded)``. Elements after the ``limit``-th valid rank are ignored and
    not counted (they were never going to be used).
    """
    kept, _scores, discarded = normalize_scored_ranks(raw, None, n, limit)
    return kept, discarded


def normalize_scored_ranks(
    raw: Sequence[object], raw_scores: Sequence[object] | None, n: int, limit: int
) -> tuple[tuple[int, ...], tuple[float, ...] | None, int]:
    """:func:`normalize_ranks` with optional per-rank scores (``raw_scores[i]`` belongs to
    ``raw[i]``; the caller has checked the lengths match).

    Returns ``(kept, kept_scores, discarded)``: a rank whose score is not a finite real number
    is discarded and counted like an invalid rank, and a discarded rank's score goes with it.
    ``kept_scores`` is ``None`` when ``raw_scores`` is.
    """
    kept, kept_scores, discarded, _over = _normalize(raw, raw_scores, n, limit)
    return kept, kept_scores, discarded


def _normalize(
    raw: Sequence[object], raw_scores: Sequence[object] | None, n: int, limit: int
) -> tuple[tuple[int, ...], tuple[float, ...] | None, int, int]:
    """:func:`normalize_scored_ranks`, plus the number of elements after the ``limit``-th kept
    rank (ignored, not validated: the over-answer)."""
    kept: list[int] = []
    kept_scores: list[float] = []
    seen: set[int] = set()
    discarded = 0
    over = 0
    for i, value in enumerate(raw):
        if len(kept) >= limit:
            over = len(raw) - i
            break
        if not _is_rank(value):
            discarded += 1
            continue
        rank = int(value)  # type: ignore[call-overload]
        if rank < 1 or rank > n or rank in seen:
            discarded += 1
            continue
        if raw_scores is not None:
            score = _as_score(raw_scores[i])
            if score is None:
                discarded += 1
                continue
            kept_scores.append(score)
        seen.add(rank)
        kept.append(rank)
    return tuple(kept), (None if raw_scores is None else tuple(kept_scores)), discarded, over


def _cut(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars]


class CandidateViews(Sequence[Candidate]):
    """The coarse pool as the seam hands it to a reranker.

    A read-only sequence of :class:`~rankseam.types.Candidate` views in coarse order
    (``views[i].rank == i + 1``, text cut to ``max_chars``); each view is built on first
    access. Vectorised rerankers can read the whole pool as arrays instead, without building
    a view per candidate: :meth:`scores` and :meth:`embeddings`.

    Build one with :func:`make_candidates`. A reranker must still accept any
    ``Sequence[Candidate]`` (a caller may pass a plain tuple), so these methods are a fast
    path, never a requirement.
    """

    __slots__ = ("_embeddings", "_hits", "_max_chars", "_scores", "_space", "_vectors", "_views")

    def __init__(
        self,
        hits: tuple[Hit, ...],
        max_chars: int,
        vectors: tuple[np.ndarray | None, ...] | np.ndarray | None,
        embedding_space: str | None,
    ) -> None:
        self._hits = hits
        self._max_chars = max_chars
        self._vectors = vectors
        self._space = embedding_space
        self._views: list[Candidate | None] = [None] * len(hits)
        self._scores: np.ndarray | None = None
        self._embeddings: np.ndarray | bool | None = False  # False: not computed yet

    def __len__(self) -> int:
        return len(self._hits)

    @overload
    def __getitem__(self, index: int) -> Candidate: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Candidate, ...]: ...

    def __getitem__(self, index: int | slice) -> Candidate | tuple[Candidate, ...]:
        if isinstance(index, slice):
            return tuple(self._view(i) for i in range(len(self._hits))[index])
        n = len(self._hits)
        i = operator.index(index)
        if not -n <= i < n:
            raise IndexError(f"candidate index {index} out of range for a pool of {n}")
        return self._view(i % n)

    def __iter__(self) -> Iterator[Candidate]:
        return (self._view(i) for i in range(len(self._hits)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CandidateViews | tuple):  # equal views, like a tuple of them
            return tuple(self) == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CandidateViews({len(self._hits)} candidates, embedding_space={self._space!r})"

    def _view(self, i: int) -> Candidate:
        view = self._views[i]
        if view is None:
            hit = self._hits[i]
            vec = self._vectors[i] if self._vectors is not None else None
            view = Candidate(
                rank=i + 1,
                ref=hit.ref,
                text=_cut(hit.text, self._max_chars),
                score=hit.score,
                importance=hit.importance,
                matched_by=hit.matched_by,
                channel_scores=hit.channel_scores,
                embedding=vec,
                embedding_space=self._space if vec is not None else None,
            )
            self._views[i] = view
        return view

    def scores(self) -> np.ndarray:
        """The coarse (fused) scores, ``scores()[i] == self[i].score``: read-only float64."""
        if self._scores is None:
            scores = np.fromiter((h.score for h in self._hits), np.float64, len(self._hits))
            scores.setflags(write=False)
            self._scores = scores
        return self._scores

    def embeddings(self) -> np.ndarray | None:
        """The ``n × d`` float32 matrix of the candidates' vectors (read-only; row ``i`` equals
        ``self[i].embedding``) when every candidate has a vector and all have one dimension;
        ``None`` otherwise (no vectors attached, or some missing: read each view's
        ``embedding`` then). All vectors the seam attaches come from one embedding space.
        """
        if self._embeddings is False:
            self._embeddings = _stack(self._vectors)
        return self._embeddings  # type: ignore[return-value]


def _stack(vectors: tuple[np.ndarray | None, ...] | np.ndarray | None) -> np.ndarray | None:
    if isinstance(vectors, np.ndarray):  # already one read-only matrix (make_candidates)
        return vectors if vectors.shape[1] else None
    if not vectors:
        return None
    try:
        dims = set(map(len, vectors))  # type: ignore[arg-type]
    except TypeError:  # a missing vector (None)
        return None
    if len(dims) != 1 or 0 in dims:
        return None
    present: tuple[np.ndarray, ...] = vectors  # type: ignore[assignment]  # no None: len() worked
    matrix: np.ndarray = np.concatenate(present).reshape(len(present), dims.pop())
    matrix.setflags(write=False)
    return matrix


def make_candidates(
    pool: Sequence[Hit],
    *,
    max_chars: int = DEFAULT_MAX_CHARS,
    vectors: Vectors | None = None,
    embedding_space: str | None = None,
) -> CandidateViews:
    """Build the read-only candidate views for a pool (text cut to ``max_chars``).

    ``vectors``: one per hit (``None`` where a hit has none), or the ``n × d`` matrix of them.
    They become read-only float32; vectors that already are (the store's) are shared, not
    copied.
    """
    hits = tuple(pool)
    readonly: tuple[np.ndarray | None, ...] | np.ndarray | None = None
    if vectors is not None:
        if len(vectors) != len(hits):
            raise ValidationError(
                f"{len(vectors)} vectors for a pool of {len(hits)} hits; a vector fetcher must "
                "answer one vector (or None) per identity, in order"
            )
        if isinstance(vectors, np.ndarray) and vectors.ndim == 2:
            readonly = readonly_float32(vectors)
        else:
            readonly = tuple(map(readonly_vector, vectors))
    return CandidateViews(hits, max_chars, readonly, embedding_space)


def trace_candidates(pool: Sequence[Hit], *, text: bool = True) -> tuple[TraceCandidate, ...]:
    return tuple(
        TraceCandidate(i + 1, h.ref, h.score, h.matched_by, h.text if text else None)
        for i, h in enumerate(pool)
    )


def describe(reranker: Any) -> dict[str, Any]:
    descriptor = getattr(reranker, "descriptor", None)
    if isinstance(descriptor, Mapping):
        return dict(descriptor)
    return {}


def _failure_reason(exc: BaseException) -> str:
    if isinstance(exc, RerankError):
        return exc.reason
    if isinstance(exc, BackendError):
        return exc.kind
    if isinstance(exc, TimeoutError):
        return "timeout"
    return "exception"


def _attach_usage(exc: BaseException, usage: Usage | None) -> None:
    if usage is None:
        return
    try:
        exc.usage = usage  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type that refuses new attributes
        pass


def _foreign_base_exception(exc: BaseException, policy_id: str) -> RerankError:
    """A ``BaseException`` that is not an ``Exception`` (``SystemExit``, ``KeyboardInterrupt``,
    a ``CancelledError`` the plugin raised itself, ...) as the plugin failure it is."""
    error = RerankError(
        f"reranker {policy_id!r} raised {type(exc).__name__}({exc}); a plugin may not stop the "
        "process, interrupt or cancel the search. The search treats it as the reranker's "
        "failure; fix the reranker",
        policy_id=policy_id,
        reason="exception",
    )
    error.__cause__ = exc
    _attach_usage(error, getattr(exc, "usage", None))
    return error


def _is_foreign(exc: BaseException | None) -> bool:
    return exc is not None and not isinstance(exc, Exception)


def _deadline_error(policy_id: str, deadline_s: float, detail: str) -> RerankError:
    return RerankError(
        f"reranker {policy_id!r} did not answer within the rerank deadline of {deadline_s:g} s "
        f"({detail}). Raise [search] rerank_deadline_s (or search(..., rerank_deadline_s=...)), "
        "lower the pool size, or fix the reranker",
        policy_id=policy_id,
        reason="timeout",
    )


async def _guarded(call: Any) -> tuple[bool, Any]:
    """Await the plugin's coroutine; answer ``(True, value)`` or ``(False, exception)``.

    Nothing escapes as a ``BaseException``: a ``SystemExit`` leaving a task would stop the
    event loop that runs it (and every other search on it). A ``GeneratorExit`` is caught too:
    ending normally is what closing a coroutine asks for."""
    try:
        return True, await call
    except BaseException as exc:
        return False, exc


def _drive_inline(call: Any, policy_id: str) -> tuple[bool, Any]:
    """Run a coroutine that declares it never suspends (``needs_event_loop = False``) to the
    end, in this thread, without an event loop."""
    try:
        call.send(None)
    except StopIteration as done:
        return True, done.value
    except BaseException as exc:
        return False, exc
    try:
        call.close()
    except BaseException:  # a coroutine that refuses to close: nothing more to do with it
        pass
    return False, RerankError(
        f"reranker {policy_id!r} declares needs_event_loop = False, but its rerank suspended "
        "(it awaited something that needs an event loop); remove the declaration or the await",
        policy_id=policy_id,
        reason="exception",
    )


async def _call_reranker(
    reranker: Reranker,
    query: str,
    candidates: Sequence[Candidate],
    k: int,
    deadline_s: float,
    policy_id: str,
) -> Any:
    """The reranker's answer within the deadline, or an ``Exception`` saying why not.

    Only a cancellation of the search itself leaves as ``asyncio.CancelledError``."""
    if runs_inline(reranker):
        started = time.perf_counter()
        ok, value = _drive_inline(reranker.rerank(query, candidates, k), policy_id)
        took = time.perf_counter() - started
        if ok and took > deadline_s:
            raise _deadline_error(
                policy_id,
                deadline_s,
                f"it took {took:.3g} s; it declares needs_event_loop = False, so it ran in the "
                "caller's thread, which cannot be interrupted, and its late answer was discarded",
            )
    else:
        task = asyncio.ensure_future(
            _guarded(as_async_reranker(reranker).rerank(query, candidates, k))
        )
        try:
            done, _pending = await asyncio.wait({task}, timeout=deadline_s)
        except asyncio.CancelledError:  # the search itself was cancelled
            task.cancel()
            raise
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
            usage = None
            if task.done() and not task.cancelled():
                usage = getattr(task.result()[1], "usage", None)
            if not task.done():
                task.add_done_callback(_forget)
                log.warning(
                    "reranker ignored its cancellation at the deadline; abandoned",
                    extra={"policy_id": policy_id, "reason": "timeout"},
                )
            error = _deadline_error(policy_id, deadline_s, "it was cancelled")
            _attach_usage(error, usage if isinstance(usage, Usage) else None)
            raise error
        ok, value = task.result()
    if ok:
        return value
    if isinstance(value, Exception):
        raise value
    raise _foreign_base_exception(value, policy_id)


def _forget(task: asyncio.Future[Any]) -> None:
    """Collect an abandoned reranker's end so that nothing is logged as never retrieved."""
    if not task.cancelled():
        task.exception()


def _check_decision(decision: object, policy_id: str) -> RerankDecision:
    if not isinstance(decision, RerankDecision):
        raise RerankError(
            f"reranker {policy_id!r} returned {type(decision).__name__}, not a RerankDecision",
            policy_id=policy_id,
            reason="invalid_output",
        )
    if decision.scores is not None and len(decision.scores) != len(decision.selected_ranks):
        raise RerankError(
            f"reranker {policy_id!r} returned {len(decision.scores)} scores for "
            f"{len(decision.selected_ranks)} selected ranks; RerankDecision.scores must hold "
            "exactly one score per element of selected_ranks, in the same order (or be None)",
            policy_id=policy_id,
            reason="invalid_output",
        )
    ranks = decision.selected_ranks
    if decision.used_fallback and not (
        all(map(_is_rank, ranks)) and tuple(ranks) == tuple(range(1, len(ranks) + 1))
    ):
        shown = tuple(ranks[:8]) + (("...",) if len(ranks) > 8 else ())
        raise RerankError(
            f"reranker {policy_id!r} said used_fallback=True (it fell back to the coarse ranks) "
            f"but answered the ranks {shown}; with used_fallback=True answer the coarse ranks "
            "1..k (or none), otherwise answer your own ranks with used_fallback=False",
            policy_id=policy_id,
            reason="invalid_output",
        )
    return decision


def _failed(
    exc: Exception,
    pool: tuple[Hit, ...],
    k: int,
    policy_id: str,
    descriptor: Mapping[str, Any],
    on_error: OnError,
    latency_ms: float,
) -> tuple[tuple[Hit, ...], RerankTrace]:
    """The failure policy: raise :class:`RerankError` (``"raise"``), or the coarse order
    marked ``degraded`` (``"coarse"``)."""
    reason = _failure_reason(exc)
    usage = getattr(exc, "usage", None)
    usage = usage if isinstance(usage, Usage) else Usage.zero()
    cause = exc.__cause__
    # a SystemExit & co. was turned into a RerankError here: the trace names the original
    shown = cause if isinstance(exc, RerankError) and _is_foreign(cause) else exc
    if on_error == "raise":
        error = RerankError(
            f"reranker {policy_id!r} failed ({reason}): {type(exc).__name__}: {exc}. "
            "The search failed closed; retry, fix the reranker or its backend, or set "
            "on_error='coarse' to return the coarse order marked 'degraded' instead",
            policy_id=policy_id,
            reason=reason,
            usage=usage,
        )
        raise error from exc
    log.warning(
        "rerank failed; returning the coarse order marked degraded",
        extra={"policy_id": policy_id, "reason": reason, "status": "degraded"},
    )
    trace = RerankTrace(
        policy_id=policy_id,
        status=RerankStatus.DEGRADED,
        selected_ranks=tuple(range(1, k + 1)),
        reason=f"{reason}: {type(shown).__name__}",
        usage=usage,
        latency_ms=latency_ms,
        descriptor=descriptor,
        candidate_count=len(pool),
        limit=k,
    )
    return pool[:k], trace


def expired_rerank(
    pool: Sequence[Hit],
    limit: int,
    reranker: Reranker,
    *,
    on_error: OnError,
    deadline_s: float,
    waited_s: float,
) -> tuple[tuple[Hit, ...], RerankTrace]:
    """The failure policy for a rerank stage that did not come back at all: the event loop
    running it was blocked by a plugin past the deadline plus :data:`DEADLINE_MARGIN_S` (a
    synchronous search waited ``waited_s`` and gave up). Raises :class:`RerankError` with
    ``reason="timeout"``, or answers the coarse order marked ``degraded``. The cost of the
    abandoned work is unknown and not counted."""
    pool = tuple(pool)
    policy_id = str(getattr(reranker, "policy_id", type(reranker).__name__))
    error = _deadline_error(
        policy_id,
        deadline_s,
        f"the search waited {waited_s:.3g} s; the reranker blocked its event loop, which was "
        "abandoned and replaced",
    )
    return _failed(
        error,
        pool,
        min(limit, len(pool)),
        policy_id,
        describe(reranker),
        on_error,
        waited_s * 1000.0,
    )


async def rerank_pool(
    query: str,
    pool: Sequence[Hit],
    limit: int,
    reranker: Reranker | None,
    *,
    on_error: OnError = "raise",
    max_chars: int = DEFAULT_MAX_CHARS,
    fetch_vectors: VectorFetcher | None = None,
    embedding_space: str | None = None,
    deadline_s: float = DEFAULT_RERANK_DEADLINE_S,
) -> tuple[tuple[Hit, ...], RerankTrace | None]:
    """Run the rerank stage over a coarse pool; return the final hits and the stage's trace.

    With no reranker, or an empty pool, the result is ``pool[:limit]`` and the trace is
    ``None``: no reranking work is done and the reranker is never called. ``deadline_s``
    bounds the reranker's call (see the module doc).
    """
    validate_limit(limit)
    validate_on_error(on_error)
    deadline_s = validate_deadline(deadline_s)
    pool = tuple(pool)
    if len(pool) > MAX_POOL:
        raise ValidationError(f"the coarse pool holds {len(pool)} hits; at most {MAX_POOL} allowed")
    if reranker is None or not pool:
        return pool[:limit], None

    n = len(pool)
    k = min(limit, n)
    policy_id = str(getattr(reranker, "policy_id", type(reranker).__name__))
    descriptor = describe(reranker)
    vectors = None
    if getattr(reranker, "needs_embeddings", False) and fetch_vectors is not None:
        vectors = fetch_vectors([h.ref for h in pool])
    candidates = make_candidates(
        pool, max_chars=max_chars, vectors=vectors, embedding_space=embedding_space
    )

    started = time.perf_counter()
    try:
        decision = _check_decision(
            await _call_reranker(reranker, query, candidates, k, deadline_s, policy_id),
            policy_id,
        )
    except asyncio.CancelledError:  # the search was cancelled (a plugin's own is a failure)
        raise
    except Exception as exc:
        latency_ms = (time.perf_counter() - started) * 1000.0
        return _failed(exc, pool, k, policy_id, descriptor, on_error, latency_ms)

    latency_ms = (time.perf_counter() - started) * 1000.0
    raw = decision.selected_ranks
    selected, scores, seam_discarded, over = _normalize(raw, decision.scores, n, k)
    discarded = decision.discarded_rank_count + seam_discarded
    notes: list[str] = []
    if decision.used_fallback:
        selected = selected or tuple(range(1, k + 1))
        scores = None
        used_fallback = True
        status = RerankStatus.FELL_BACK
        notes.append("the reranker fell back to coarse ranks")
    elif not selected:
        selected = tuple(range(1, k + 1))
        scores = None
        used_fallback = True
        status = RerankStatus.FELL_BACK
        notes.append(
            "the reranker selected no rank; coarse ranks used"
            if not raw
            else "no valid rank in the reranker's selection; coarse ranks used"
        )
    else:
        used_fallback = False
        status = RerankStatus.REPAIRED if discarded else RerankStatus.OK
        if discarded:
            note = f"{discarded} invalid or repeated rank(s) discarded"
            if decision.discarded_rank_count:
                note += f", {decision.discarded_rank_count} of them counted by the reranker"
            if decision.scores is not None:
                note += " (a rank whose score is not a finite number is invalid)"
            notes.append(note)
    if over:
        notes.append(
            f"the reranker answered {len(raw)} ranks for a limit of {k}; {over} after the "
            f"first {k} kept were ignored (over-answered)"
        )
    log.debug(
        "rerank done",
        extra={
            "policy_id": policy_id,
            "status": status.value,
            "discarded": discarded,
            "over_limit": over,
        },
    )
    trace = RerankTrace(
        policy_id=policy_id,
        status=status,
        selected_ranks=selected,
        discarded_rank_count=discarded,
        over_limit_count=over,
        used_fallback=used_fallback,
        reason="; ".join(notes) or None,
        usage=decision.usage,
        latency_ms=latency_ms,
        descriptor=descriptor,
        records=decision.records,
        candidate_count=n,
        limit=k,
        scores=scores,
    )
    if scores is None:
        return tuple(pool[r - 1] for r in selected), trace
    return tuple(
        attrs.evolve(pool[r - 1], rerank_score=s) for r, s in zip(selected, scores, strict=True)
    ), trace
