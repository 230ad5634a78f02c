"""The ``decision`` reranker: one yes/no/abstain question per coarse candidate.

For each coarse candidate, in coarse order, the reranker asks its decision backend the
question of :func:`rankseam.decision.rerank_request` (kind ``memory.rerank``, subject = the
candidate text, evidence = ``(query,)``) and keeps the candidate when the verdict is in the
keep set (``{YES, ABSTAIN}`` by default). Kept ranks stay in coarse order; the scan stops once
``limit`` candidates are kept. When nothing is kept, the answer is the coarse ranks
``1..min(limit, n)`` with ``RerankDecision.used_fallback=True`` (after a full scan).

Failure is closed (the rerank role gets the *unwrapped* backend):

- a backend exception propagates unchanged (the seam turns it into a ``RerankError`` or, under
  ``on_error="coarse"``, a visible ``degraded`` status);
- a verdict with ``DecisionResult.used_fallback=True`` (a degraded backend) raises
  ``RerankError(reason="degraded_decision")`` -- it is not an abstain;
- an answer that is not a ``DecisionResult`` raises ``InvalidOutputError``;
- the deadline (``deadline_s``, the reranker's declared bound on one rerank): the host's
  governed call enforces it (the lower of it and the search's ``rerank_deadline_s``), cancels
  the rerank and raises ``RerankError(reason="timeout")``, naming this option; the reranker
  wraps nothing in a deadline of its own.

Every failure first cancels and awaits the calls still running, and carries the cost so far as
its ``usage`` attribute (the seam reports it in a degraded trace); so does the
``asyncio.CancelledError`` of a rerank cancelled from outside.

Concurrency: at most ``window`` calls are issued ahead of the first candidate whose verdict is
not yet used (``window=1`` is the reference RFC's sequential scan). Verdicts are *used* in
coarse order whatever order they complete in, so the selection does not depend on timing. Once
``limit`` candidates are kept, unfinished calls are cancelled and awaited; a call in the window
that failed or degraded still fails the search even when enough candidates were kept. A larger
window can spend up to ``window - 1`` calls beyond the sequential scan.

Cost: one :class:`~rankseam.types.CandidateRecord` per call issued (rank, outcome, latency,
usage, detail). ``usage.calls`` counts every call issued -- a call counts once, or as many
model calls as the backend reports for it -- including calls cancelled after the limit was
reached or by the deadline: such a call counts what the backend attached to the cancellation
(``exc.usage``: every request it sent, retries included), else one call with unknown tokens,
and zero when it was cancelled before it started. Tokens are summed; one unknown makes the
total unknown.

``discarded_rank_count`` is always 0: the policy only ever emits valid, unique coarse ranks, so
there is nothing to discard. Candidates that were asked and not kept are visible in ``records``
(counting them as "discarded" would give the field a second meaning and make traces of
different policies incomparable).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from rankseam.errors import RerankError
from rankseam.plugin import OptionError, is_int, option, parse_options
from rankseam.plugin.decision import (
    RERANK_DECISION_KIND,
    RERANK_ROLE,
    DecisionBackend,
    DecisionOutcome,
    DecisionResult,
    checked_result,
    rerank_request,
    unwrap,
)
from rankseam.plugin.rerankers import MAX_POOL
from rankseam.types import Candidate, CandidateRecord, RerankDecision, Usage

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "DEFAULT_DEADLINE_S",
    "DEFAULT_KEEP",
    "POLICY_ID",
    "DecisionOptions",
    "DecisionReranker",
    "from_options",
]

log = logging.getLogger("rankseam_decision")

POLICY_ID = "rankseam.rerank.decision.v1"
DEFAULT_KEEP = frozenset({DecisionOutcome.YES, DecisionOutcome.ABSTAIN})
DEFAULT_DEADLINE_S = 30.0

_Answer = tuple[DecisionResult, float]  # the verdict and the call's latency in ms


def _call_usage(result: DecisionResult) -> Usage:
    """A call's cost: at least one call, tokens as the backend reported them."""
    u = result.usage
    return Usage(max(1, u.calls), u.input_tokens, u.output_tokens)


_UNKNOWN_CALL = Usage(1, None, None)


class _Scan:
    """The state of one rerank: issued calls, verdicts used, records."""

    def __init__(self, n: int) -> None:
        self.tasks: list[asyncio.Task[_Answer]] = []
        self.kept: list[int] = []
        self.used = 0  # verdicts used, in coarse order
        self.records: dict[int, CandidateRecord] = {}
        #: What a cancelled call had spent when it was cancelled (absent: it never started).
        self.cancelled_usage: dict[int, Usage] = {}
        self.n = n

    def usage(self, cancel_detail: str) -> Usage:
        """The cost of every call issued (call once all calls have ended)."""
        return Usage.total(r.usage for r in self.final_records(cancel_detail))

    def final_records(self, cancel_detail: str) -> tuple[CandidateRecord, ...]:
        out = []
        for i, task in enumerate(self.tasks):
            record = self.records.get(i)
            if record is None:
                if task.cancelled():
                    spent = self.cancelled_usage.get(i, Usage.zero())  # zero: never started
                    record = CandidateRecord(i + 1, "cancelled", 0.0, spent, cancel_detail)
                elif task.exception() is not None:
                    exc = task.exception()
                    assert exc is not None
                    record = CandidateRecord(
                        i + 1, "error", 0.0, Usage.of_failed_call(exc), type(exc).__name__
                    )
                else:
                    result, latency_ms = task.result()
                    record = CandidateRecord(
                        i + 1,
                        result.outcome.value,
                        latency_ms,
                        _call_usage(result),
                        "not used: limit reached",
                        result.confidence,
                    )
                # Settle each record once: a failed call's exception later carries the
                # whole rerank's cost (``_attach_usage``), which must not be read back here.
                self.records[i] = record
            out.append(record)
        return tuple(out)


async def _cancel_and_wait(tasks: Sequence[asyncio.Task[Any]]) -> None:
    """Cancel every unfinished task and wait until all have ended, even if we are cancelled
    meanwhile (then re-raise the cancellation): no call outlives the rerank."""
    import asyncio  # on first use: loading the plugin does not import asyncio

    for task in tasks:
        if not task.done():
            task.cancel()
    interrupted = False
    while True:
        pending = [t for t in tasks if not t.done()]
        if not pending:
            break
        try:
            await asyncio.wait(pending)
        except asyncio.CancelledError:
            interrupted = True
    for task in tasks:  # mark every exception as retrieved; they are reported by the caller
        if not task.cancelled():
            task.exception()
    if interrupted:
        raise asyncio.CancelledError


class DecisionReranker:
    """Rerank by per-candidate decisions. Build it with :func:`from_options` (configuration)
    or directly with a decision backend handle for the rerank role (unwrapped)."""

    policy_id = POLICY_ID
    needs_embeddings = False

    def __init__(
        self,
        backend: DecisionBackend,
        *,
        keep: frozenset[DecisionOutcome] = DEFAULT_KEEP,
        window: int = 1,
        deadline_s: float | None = DEFAULT_DEADLINE_S,
        backend_name: str | None = None,
    ) -> None:
        if not keep:
            raise ValueError("keep must name at least one outcome")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window!r}")
        if deadline_s is not None and not (math.isfinite(deadline_s) and deadline_s > 0):
            raise ValueError(f"deadline_s must be a finite number > 0 or None, got {deadline_s!r}")
        self.backend = backend
        self.keep = frozenset(keep)
        self.window = window
        self.deadline_s = deadline_s
        self.backend_name = backend_name
        self.deterministic = bool(getattr(unwrap(backend), "deterministic", False))

    @property
    def descriptor(self) -> Mapping[str, Any]:
        return {
            "name": "decision",
            "backend": self.backend_name,
            "backend_policy_id": self.backend.policy_id,
            "decision_kind": RERANK_DECISION_KIND,
            "keep": sorted(o.value for o in self.keep),
            "window": self.window,
            "deadline_s": self.deadline_s,
        }

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        import asyncio  # on first use: loading the plugin does not import asyncio

        candidates = tuple(candidates)
        if not is_int(limit) or limit < 1:
            raise ValueError(f"limit must be an integer >= 1, got {limit!r}")
        n = len(candidates)
        if n == 0:
            return RerankDecision((), used_fallback=True)
        k = min(limit, n)
        scan = _Scan(n)
        started = time.perf_counter()
        try:
            await self._run(scan, query, candidates, k)
        except asyncio.CancelledError as exc:
            # Cancelled from outside (the host at this reranker's deadline or the search's, the
            # caller): what the calls sent is still spent; it travels on the cancellation for
            # whoever reports it.
            if all(task.done() for task in scan.tasks):
                _attach_usage(exc, scan.usage("cancelled: the rerank was cancelled"))
            raise
        except Exception as exc:
            _attach_usage(exc, scan.usage("cancelled: a call failed"))
            raise
        records = scan.final_records("cancelled: limit reached")
        usage = Usage.total(r.usage for r in records)
        used_fallback = not scan.kept
        selected = tuple(scan.kept) if scan.kept else tuple(range(1, k + 1))
        log.debug(
            "decision rerank done",
            extra={
                "policy_id": self.policy_id,
                "decision_kind": RERANK_DECISION_KIND,
                "role": RERANK_ROLE.name,
                "calls": usage.calls,
                "kept": len(scan.kept),
                "used_fallback": used_fallback,
                "elapsed_ms": round((time.perf_counter() - started) * 1000.0, 3),
            },
        )
        return RerankDecision(
            selected_ranks=selected,
            usage=usage,
            discarded_rank_count=0,
            used_fallback=used_fallback,
            records=records,
        )

    async def _ask(self, scan: _Scan, index: int, query: str, candidate: Candidate) -> _Answer:
        import asyncio  # on first use: loading the plugin does not import asyncio

        started = time.perf_counter()
        try:
            raw = await self.backend.evaluate(rerank_request(query, candidate.text))
        except asyncio.CancelledError as exc:
            # A call cancelled (limit reached, deadline passed) still cost what it sent: the
            # backend attaches that to the cancellation (``exc.usage``, retries and the request
            # in flight included); a backend that does not counts one call, tokens unknown.
            spent = getattr(exc, "usage", None)
            scan.cancelled_usage[index] = spent if isinstance(spent, Usage) else _UNKNOWN_CALL
            raise
        result = checked_result(raw, self.backend)
        return result, (time.perf_counter() - started) * 1000.0

    async def _run(
        self, scan: _Scan, query: str, candidates: tuple[Candidate, ...], k: int
    ) -> None:
        import asyncio  # on first use: loading the plugin does not import asyncio

        n = len(candidates)
        try:
            while scan.used < n and len(scan.kept) < k:
                while len(scan.tasks) < n and len(scan.tasks) - scan.used < self.window:
                    index = len(scan.tasks)
                    scan.tasks.append(
                        asyncio.create_task(self._ask(scan, index, query, candidates[index]))
                    )
                head = scan.tasks[scan.used]
                if not head.done():
                    waiting = [t for t in scan.tasks[scan.used :] if not t.done()]
                    await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                self._raise_first_failure(scan)
                while scan.used < len(scan.tasks) and len(scan.kept) < k:
                    task = scan.tasks[scan.used]
                    if not task.done():
                        break
                    result, latency_ms = task.result()
                    rank = scan.used + 1
                    kept = result.outcome in self.keep
                    if kept:
                        scan.kept.append(rank)
                    scan.records[scan.used] = CandidateRecord(
                        rank,
                        result.outcome.value,
                        latency_ms,
                        _call_usage(result),
                        "kept" if kept else "dropped",
                        result.confidence,
                    )
                    scan.used += 1
        finally:
            await _cancel_and_wait(scan.tasks)
        self._raise_first_failure(scan)  # a sibling that failed before it was cancelled

    def _raise_first_failure(self, scan: _Scan) -> None:
        """Raise for the first finished call (in coarse order) that failed or degraded."""
        for i, task in enumerate(scan.tasks):
            if not task.done() or task.cancelled():
                continue
            exc = task.exception()
            if exc is not None:
                raise exc
            result = task.result()[0]
            if result.used_fallback:
                raise RerankError(
                    f"decision backend {self.backend.policy_id!r} returned a degraded verdict "
                    f"(used_fallback=True) for coarse rank {i + 1}; a degraded verdict is not "
                    "an answer, so the rerank failed closed. Check the backend's health; give "
                    "the rerank role the unwrapped backend (context.decision_backend(name, "
                    "RERANK_ROLE)), never a fail-open handle",
                    policy_id=self.policy_id,
                    reason="degraded_decision",
                )

    def __repr__(self) -> str:
        return (
            f"DecisionReranker(backend={self.backend.policy_id!r}, "
            f"keep={sorted(o.value for o in self.keep)}, window={self.window}, "
            f"deadline_s={self.deadline_s})"
        )


def _attach_usage(exc: BaseException, usage: Usage) -> None:
    """Let the seam report what the failed rerank cost (it reads ``exc.usage``)."""
    try:
        exc.usage = usage  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type that refuses new attributes
        pass


# configuration -------------------------------------------------------------------------------


def _outcomes(keep: str | tuple[str, ...]) -> list[str]:
    parts = keep.split(",") if isinstance(keep, str) else keep
    return [part.strip().lower() for part in parts if part.strip()]


def _known_outcomes(_inst: object, _attr: object, keep: str | tuple[str, ...]) -> None:
    choices = ", ".join(o.value for o in DecisionOutcome)
    items = _outcomes(keep)
    for item in items:
        if item not in {o.value for o in DecisionOutcome}:
            raise OptionError(
                "keep",
                f"has unknown outcome {item!r}; choose from {choices}, e.g. keep = 'yes,abstain' "
                "(the default) or keep = 'yes'",
            )
    if not items:
        raise OptionError(
            "keep", f"must name at least one outcome ({choices}), e.g. keep = 'yes,abstain'"
        )


@attrs.frozen
class DecisionOptions:
    """The options of the ``decision`` reranker (``[rerankers.decision]``,
    ``--decision-<option>``)."""

    backend: str | None = option(
        None, nonempty=True, help="the decision backend to ask, e.g. 'heuristic' (required)"
    )
    keep: str | tuple[str, ...] = option(
        "yes,abstain",
        validator=_known_outcomes,
        help="outcomes kept, e.g. 'yes,abstain' or ['yes']",
    )
    window: int = option(1, ge=1, le=MAX_POOL, help="calls in flight at once (1 = sequential)")
    deadline_s: float = option(
        DEFAULT_DEADLINE_S, gt=0, help="seconds for the whole rerank (it fails closed)"
    )

    @property
    def outcomes(self) -> frozenset[DecisionOutcome]:
        """The outcomes ``keep`` names."""
        return frozenset(DecisionOutcome(item) for item in _outcomes(self.keep))


def from_options(options: DecisionOptions | Mapping[str, Any], context: Any) -> DecisionReranker:
    """The factory: take the rerank role's (unwrapped) backend. ``options``: as the host
    checked them, or the ``[rerankers.decision]`` table (checked here).

    Options: ``backend`` (required: a decision backend name), ``keep`` (default
    ``"yes,abstain"``), ``window`` (default 1), ``deadline_s`` (default 30).
    """
    if not isinstance(options, DecisionOptions):
        options = parse_options(DecisionOptions, options, "rerankers.decision")
    # ConfigurationError when unusable (also when no backend is named)
    backend = context.decision_backend(options.backend, RERANK_ROLE)
    return DecisionReranker(
        backend,
        keep=options.outcomes,
        window=options.window,
        deadline_s=options.deadline_s,
        backend_name=options.backend,
    )
