"""The ``listwise`` reranker: structured generation over the bounded pool, ranks only.

One call per search when the pool fits one window (the reference policy); bottom-up sliding
windows otherwise (see :mod:`rankseam_listwise.windows`). Every model answer is checked against
:data:`~rankseam_listwise.instructions.OUTPUT_SCHEMA` here, whatever the backend already did, and
its ranks are normalised by the host's :func:`rankseam.seam.normalize_ranks` (walk in order;
discard and count ranks outside the window or repeated; stop at ``max_results``; never pad).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from rankseam.errors import ConfigurationError, InvalidOutputError, RerankError
from rankseam.plugin import OptionError, option, parse_options
from rankseam.plugin.decision import RERANK_ROLE
from rankseam.plugin.generation import GenerationBackend, GenerationResult, validate_output
from rankseam.plugin.rerankers import DEFAULT_MAX_CHARS, normalize_ranks
from rankseam.types import Candidate, RerankDecision, Usage
from rankseam_listwise.instructions import INSTRUCTIONS_VERSION, OUTPUT_SCHEMA, build_request
from rankseam_listwise.windows import call_count, plan_windows

__all__ = [
    "DEFAULT_MAX_CALLS",
    "DEFAULT_WINDOW",
    "POLICY_ID",
    "CallBudgetError",
    "ListwiseOptions",
    "ListwiseReranker",
]

log = logging.getLogger("rankseam.listwise")

POLICY_ID = INSTRUCTIONS_VERSION
#: Default window: the default coarse pool (30) fits one window, i.e. one call per search.
DEFAULT_WINDOW = 30
#: Default budget: enough for a 200-candidate pool with the default window and stride (13).
DEFAULT_MAX_CALLS = 20


class CallBudgetError(RerankError):
    """The sliding-window plan needs more generation calls than ``max_calls`` allows.

    Raised before the first call (no call is made, nothing is spent); ``reason="call_budget"``.
    """


def _below_window(inst: ListwiseOptions, _attr: object, stride: int) -> None:
    if stride >= inst.window:
        raise OptionError(
            "stride",
            f"({stride}) must be smaller than window ({inst.window}) so that consecutive "
            f"windows overlap and good candidates can climb; e.g. stride = {inst.window // 2}",
        )


@attrs.frozen
class ListwiseOptions:
    """The options of the listwise reranker (``[rerankers.listwise]``,
    ``--listwise-<option>``; the package doc explains them)."""

    backend: str = option(
        nonempty=True,
        help="the generation backend: 'local' (a deterministic non-model heuristic) or a model "
        "backend, e.g. 'openai'",
    )
    window: int = option(DEFAULT_WINDOW, ge=2, help="most candidates per generation call")
    stride: int = option(
        attrs.Factory(lambda self: self.window // 2, takes_self=True),
        ge=1,
        validator=_below_window,
        default_doc="window // 2",
        help="how far each window moves up",
    )
    max_calls: int = option(
        DEFAULT_MAX_CALLS, ge=1, help="generation calls per search, checked before any call"
    )
    max_chars: int = option(DEFAULT_MAX_CHARS, ge=1, help="characters of each candidate's text")

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> ListwiseOptions:
        """The options of the ``[rerankers.listwise]`` table ``options``, checked."""
        return parse_options(cls, options, "rerankers.listwise")

    def calls_for(self, n: int) -> int:
        """Generation calls needed for a pool of ``n`` candidates."""
        return call_count(n, self.window, self.stride)


def _attach_usage(exc: BaseException, usage: Usage) -> None:
    """Record the calls already spent on the exception (the seam reports ``exc.usage``)."""
    try:
        exc.usage = usage  # type: ignore[attr-defined]
    except AttributeError:  # pragma: no cover - exotic exception types
        pass


class ListwiseReranker:
    """Asks a generation backend for the best candidates; answers with coarse ranks only."""

    policy_id = POLICY_ID
    needs_embeddings = False

    def __init__(self, backend: GenerationBackend, options: ListwiseOptions) -> None:
        self._backend = backend
        self.options = options
        self.deterministic = bool(getattr(backend, "deterministic", False))

    @property
    def descriptor(self) -> Mapping[str, Any]:
        return {
            "name": "listwise",
            "instructions_version": INSTRUCTIONS_VERSION,
            "backend": self.options.backend,
            "backend_policy_id": str(getattr(self._backend, "policy_id", "")),
            "window": self.options.window,
            "stride": self.options.stride,
            "max_calls": self.options.max_calls,
            "max_chars": self.options.max_chars,
        }

    def _cut(self, text: str) -> str:
        limit = self.options.max_chars
        return text if len(text) <= limit else text[:limit]

    async def _call(self, query: str, max_results: int, window: Sequence[Candidate]) -> Any:
        """One generation call over ``window`` (local ranks 1..len); returns the raw rank list."""
        request = build_request(
            query, max_results, [(i + 1, self._cut(c.text)) for i, c in enumerate(window)]
        )
        result = await self._backend.generate(request)
        if not isinstance(result, GenerationResult):
            raise InvalidOutputError(
                f"generation backend {self.options.backend!r} returned "
                f"{type(result).__name__}, not a GenerationResult; fix the backend plugin"
            )
        return result

    async def rerank(
        self, query: str, candidates: Sequence[Candidate], limit: int, /
    ) -> RerankDecision:
        import asyncio  # on first use: loading the plugin does not import asyncio

        n = len(candidates)
        k = min(limit, n)
        if n == 0 or k < 1:
            return RerankDecision(())
        plan = plan_windows(n, self.options.window, self.options.stride)
        if len(plan) > self.options.max_calls:
            raise CallBudgetError(
                f"listwise needs {len(plan)} generation calls for {n} candidates (window "
                f"{self.options.window}, stride {self.options.stride}) but max_calls is "
                f"{self.options.max_calls}; no call was made. Raise max_calls, use a larger "
                "window or stride, or a smaller coarse pool",
                policy_id=POLICY_ID,
                reason="call_budget",
            )

        order = list(range(n))  # working order: positions into `candidates`
        usage = Usage.zero()
        calls = 0
        discarded = 0
        picks: list[int] = []
        for index, (start, end) in enumerate(plan):
            if calls >= self.options.max_calls:  # checked before every call, not after
                raise CallBudgetError(
                    f"listwise reached max_calls={self.options.max_calls} before window "
                    f"{index + 1} of {len(plan)}",
                    policy_id=POLICY_ID,
                    reason="call_budget",
                )
            positions = order[start:end]
            max_results = min(k, len(positions))
            calls += 1
            try:
                result = await self._call(query, max_results, [candidates[p] for p in positions])
            except asyncio.CancelledError as exc:
                # Cancelled (a deadline, the caller): the calls made so far, and what the one
                # in flight sent (when its backend attached it), are still spent.
                spent = getattr(exc, "usage", None)
                _attach_usage(
                    exc, usage + (spent if isinstance(spent, Usage) else Usage(1, None, None))
                )
                raise
            except Exception as exc:
                # The failed call was made: count what the backend says it spent.
                _attach_usage(exc, usage + Usage.of_failed_call(exc))
                raise
            usage = usage + result.usage
            try:
                output = validate_output(result.output, OUTPUT_SCHEMA)
            except InvalidOutputError as exc:
                _attach_usage(exc, usage)
                raise
            kept, dropped = normalize_ranks(output["selected_ranks"], len(positions), max_results)
            discarded += dropped
            picks = [positions[r - 1] for r in kept]
            chosen = set(picks)
            order[start:end] = picks + [p for p in positions if p not in chosen]
            log.debug(
                "listwise window done",
                extra={
                    "policy_id": POLICY_ID,
                    "window_index": index,
                    "windows": len(plan),
                    "kept": len(kept),
                    "discarded": dropped,
                },
            )

        # The top window is called last; its valid picks are the selection (never padded).
        fallback = not picks
        selected: tuple[Any, ...] = (
            tuple(range(1, k + 1)) if fallback else tuple(p + 1 for p in picks[:k])
        )
        return RerankDecision(
            selected, usage=usage, discarded_rank_count=discarded, used_fallback=fallback
        )


def make_reranker(options: ListwiseOptions | Mapping[str, Any], context: Any) -> ListwiseReranker:
    """Factory: fetch the generation backend for the rerank role (fail closed: the unwrapped
    handle), and check the call budget against the configured pool. ``options``: as the host
    checked them, or the ``[rerankers.listwise]`` table (checked here)."""
    opts = (
        options if isinstance(options, ListwiseOptions) else ListwiseOptions.from_mapping(options)
    )
    backend = context.generation_backend(opts.backend, RERANK_ROLE)
    pool = getattr(getattr(getattr(context, "config", None), "search", None), "pool", None)
    if isinstance(pool, int) and opts.calls_for(pool) > opts.max_calls:
        raise ConfigurationError(
            f"listwise would need {opts.calls_for(pool)} generation calls per search for the "
            f"configured pool of {pool} (window {opts.window}, stride {opts.stride}) but "
            f"max_calls is {opts.max_calls}; raise max_calls, widen window or stride, or lower "
            "[search] pool"
        )
    return ListwiseReranker(backend, opts)
