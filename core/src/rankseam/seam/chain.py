"""Reranker chains: several rerankers, one after another, each a governed call over the
previous one's selection (docs/seam.md, "Reranker chains").

- :class:`RerankerSpec` -- one stage as a user gives it: a registered name or a reranker
  object, its options, and (optionally) its own failure policy and deadline;
- :func:`reranker_specs` -- the one reading of a reranker choice: ``None`` (no reranker), or
  the stages, from a name, ``"a,b"``, a list of names / tables / objects / specs;
- :class:`ChainLink` -- a stage made ready for the seam (its :class:`SeamReranker`, policy and
  deadline), and :class:`RerankChain`, the links of one choice;
- :class:`ChainRun` -- the chain over one pool: stage ``k + 1``'s pool is stage ``k``'s
  selected hits, in order, at positions ``1..m``; each stage has its own trace entry
  (``RerankTrace.stages``), the usage is summed, and the chain's trace maps the final hits back
  to the coarse pool. A single stage runs as :class:`RerankStage` alone (its trace unchanged).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from rankseam.errors import RerankError, ValidationError
from rankseam.governed import DecisionFailurePolicy
from rankseam.loop import LoopRunner
from rankseam.seam.results import Outcome
from rankseam.seam.running import RerankStage, SeamReranker, prepare_reranker
from rankseam.seam.validation import (
    DEFAULT_MAX_CHARS,
    NO_RERANKER,
    reranker_choice,
    validate_deadline,
    validate_on_error,
)
from rankseam.seam.views import NeighbourTable, Vectors
from rankseam.types import Hit, RerankStatus, RerankTrace, Usage

__all__ = [
    "CHAIN_POLICY_PREFIX",
    "ChainLink",
    "ChainRun",
    "RerankChain",
    "RerankerSpec",
    "chain_of",
    "chain_trace",
    "reranker_specs",
]

#: The chain's policy id is this prefix and its stages' policy ids joined by ``>``.
CHAIN_POLICY_PREFIX = "rankseam.chain.v1:"

_SPEC_KEYS = ("deadline_s", "name", "on_error", "options")


def _options(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError(f"a chain stage's options must be a table, got {value!r}")
    return dict(value)


def _on_error(value: object) -> DecisionFailurePolicy | None:
    return None if value is None else validate_on_error(value)


def _deadline(value: object) -> float | None:
    return None if value is None else validate_deadline(value, "a chain stage's deadline_s")


@attrs.frozen
class RerankerSpec:
    """One stage of a reranker chain: ``reranker`` (a registered name or a reranker object),
    its ``options`` (over the configuration's ``[rerankers.NAME]``; a name only), and its own
    ``on_error`` and ``deadline_s`` (``None``: the search's)."""

    reranker: Any
    options: Mapping[str, Any] = attrs.field(factory=dict, converter=_options)
    on_error: DecisionFailurePolicy | None = attrs.field(default=None, converter=_on_error)
    deadline_s: float | None = attrs.field(default=None, converter=_deadline)

    def __attrs_post_init__(self) -> None:
        if self.options and not isinstance(self.reranker, str):
            raise ValidationError(
                "options apply only to a reranker given by name; configure the object itself"
            )
        if isinstance(self.reranker, str) and (
            not self.reranker.strip() or self.reranker.strip() == NO_RERANKER
        ):
            raise ValidationError(
                f"{self.reranker!r} cannot be a stage of a reranker chain; name an installed "
                "reranker (or choose 'none' alone for the coarse order)"
            )

    @property
    def label(self) -> str:
        """The stage as messages name it: its name, or its object's type."""
        return self.reranker if isinstance(self.reranker, str) else type(self.reranker).__name__


def _spec(item: object) -> RerankerSpec:
    if isinstance(item, RerankerSpec):
        return item
    if isinstance(item, str):
        return RerankerSpec(item.strip())
    if isinstance(item, Mapping):
        unknown = sorted(set(item) - set(_SPEC_KEYS))
        if unknown or "name" not in item:
            raise ValidationError(
                f"a chain stage given as a table needs 'name' and may set 'options', "
                f"'on_error' and 'deadline_s'; got the keys {sorted(item)}"
            )
        name = item["name"]
        if not isinstance(name, str):
            raise ValidationError(f"a chain stage's name must be a string, got {name!r}")
        return RerankerSpec(
            name.strip(),
            item.get("options", {}),
            item.get("on_error"),
            item.get("deadline_s"),
        )
    return RerankerSpec(item)  # a reranker object, checked when it is made ready


def reranker_specs(choice: Any) -> tuple[RerankerSpec, ...] | None:
    """The one reading of a reranker choice: ``None`` for no reranker (``None``, ``"none"``,
    an empty string or list), else the chain's stages, in order. A name with commas
    (``"decision,mmr"``) is a chain of names; a list may mix names, tables
    (``{name, options, on_error, deadline_s}``), :class:`RerankerSpec` s and reranker
    objects."""
    if isinstance(choice, str) and "," in choice:
        choice = [part for part in (p.strip() for p in choice.split(",")) if part]
    if isinstance(choice, list | tuple):
        if all(isinstance(c, str) and reranker_choice(c) is None for c in choice):
            return None  # [] or ["none"]: no reranker
        return tuple(_spec(item) for item in choice)
    choice = reranker_choice(choice)
    return None if choice is None else (_spec(choice),)


@attrs.frozen
class ChainLink:
    """One stage made ready: its reranker and its own policy and deadline (``None``: the
    search's)."""

    reranker: SeamReranker
    on_error: DecisionFailurePolicy | None = None
    deadline_s: float | None = None


@attrs.frozen
class RerankChain:
    """The stages of one reranker choice, made ready once (one link: a single reranker)."""

    links: tuple[ChainLink, ...]

    def stage(
        self,
        query: str,
        pool: tuple[Hit, ...],
        limit: int,
        *,
        on_error: Any,
        deadline_s: float,
        max_chars: int = DEFAULT_MAX_CHARS,
        vectors: Callable[[], Vectors] | None = None,
        embedding_space: str | None = None,
        neighbours: NeighbourTable | None = None,
    ) -> RerankStage | ChainRun:
        """The rerank stage of one search over ``pool`` (the coarse pool), with the search's
        policy and deadline for the stages that set none: a :class:`RerankStage` for one
        stage, a :class:`ChainRun` for more; either has ``run`` and ``run_sync``."""

        def make_stage(
            link: ChainLink,
            hits: tuple[Hit, ...],
            k: int,
            fetch: Callable[[], Vectors] | None,
        ) -> RerankStage:
            return RerankStage(
                query,
                hits,
                k,
                link.reranker,
                on_error=on_error if link.on_error is None else link.on_error,
                deadline_s=deadline_s if link.deadline_s is None else link.deadline_s,
                max_chars=max_chars,
                vectors=fetch,
                embedding_space=embedding_space,
                neighbours=neighbours,
            )

        if len(self.links) == 1:
            return make_stage(self.links[0], pool, limit, vectors)
        return ChainRun(pool, limit, self.links, make_stage, vectors)


#: Makes a link's :class:`RerankStage` over ``hits`` (asked for at most ``k``), with the stored
#: vectors ``fetch`` gives (``None``: none), under the search's settings.
StageMaker = Callable[[ChainLink, tuple[Hit, ...], int, Callable[[], Vectors] | None], RerankStage]


def chain_of(rerankers: Sequence[Any]) -> RerankChain:
    """A chain of reranker objects (or :class:`RerankerSpec` s holding objects), for callers
    without a configuration (tests, :func:`~rankseam.seam.rerank_pool`'s callers). A stage that
    is no reranker fails when it runs, under its policy, as in :func:`rerank_pool`."""
    links = []
    for item in rerankers:
        spec = item if isinstance(item, RerankerSpec) else RerankerSpec(item)
        if isinstance(spec.reranker, str):
            raise ValidationError(
                f"chain_of() takes reranker objects; {spec.reranker!r} is a name: open the "
                "chain through open_memory or open_reranker, which resolve names"
            )
        ready = prepare_reranker(spec.reranker, strict=False)
        links.append(ChainLink(ready, spec.on_error, spec.deadline_s))
    if not links:
        raise ValidationError("a reranker chain needs at least one stage")
    return RerankChain(tuple(links))


def _unscored(hit: Hit) -> Hit:
    return hit if hit.rerank_score is None else attrs.evolve(hit, rerank_score=None)


class ChainRun:
    """A chain of two or more stages over one pool. Stage ``k + 1``'s pool is stage ``k``'s
    selected hits, in order, at fresh positions ``1..m`` (their ``rerank_score`` cleared: a
    score belongs to the stage that gave it), asked for at most as many as that. Each stage is
    a :class:`RerankStage` with its own policy and deadline; a stage that fails open passes its
    pool on (status ``degraded``), one that fails closed raises :class:`RerankError` naming the
    stage, with the usage of every stage that ran."""

    def __init__(
        self,
        pool: tuple[Hit, ...],
        limit: int,
        links: tuple[ChainLink, ...],
        make_stage: StageMaker,
        vectors: Callable[[], Vectors] | None = None,
    ) -> None:
        self.pool = pool
        self.k = min(limit, len(pool))
        self.links = links
        #: a link's stage over a selection (the query, the search's policy, deadline, views'
        #: bound, embedding space and neighbours: every stage's pool is a part of the first's)
        self.make_stage = make_stage
        self.vectors = vectors
        self._fetched: list[Vectors] = []

    def _vectors_of(self, positions: Sequence[int]) -> Callable[[], Vectors] | None:
        """The stored vectors of the pool's hits at ``positions`` (0-based), fetched for the
        whole pool once, when a stage first asks."""
        fetch = self.vectors
        if fetch is None:
            return None

        def vectors() -> Vectors:
            if not self._fetched:
                self._fetched.append(fetch())
            every: Any = self._fetched[0]
            if hasattr(every, "shape"):  # one matrix: its rows
                return every[list(positions)]  # type: ignore[no-any-return]
            return [every[i] for i in positions]

        return vectors

    def stage_at(self, index: int, hits: tuple[Hit, ...], positions: Sequence[int]) -> RerankStage:
        return self.make_stage(self.links[index], hits, self.k, self._vectors_of(positions))

    async def run(self) -> Outcome:
        """Every stage in turn (async callers)."""
        state = _Walk(self)
        for index in range(len(self.links)):
            stage = state.next_stage(index)
            try:
                outcome = await stage.run()
            except RerankError as exc:
                raise state.failed(index, stage, exc) from exc
            state.passed(outcome)
        return state.result()

    def run_sync(self, runner: LoopRunner) -> Outcome:
        """Every stage in turn (synchronous callers, through ``runner``)."""
        state = _Walk(self)
        for index in range(len(self.links)):
            stage = state.next_stage(index)
            try:
                outcome = stage.run_sync(runner)
            except RerankError as exc:
                raise state.failed(index, stage, exc) from exc
            state.passed(outcome)
        return state.result()


class _Walk:
    """Where a chain run is: the current selection, its positions in the pool, the traces."""

    __slots__ = ("chain", "hits", "positions", "started", "traces")

    def __init__(self, chain: ChainRun) -> None:
        self.chain = chain
        self.hits = chain.pool
        self.positions: tuple[int, ...] = tuple(range(len(chain.pool)))
        self.traces: list[RerankTrace] = []
        self.started = time.perf_counter()

    def next_stage(self, index: int) -> RerankStage:
        return self.chain.stage_at(index, tuple(_unscored(h) for h in self.hits), self.positions)

    def passed(self, outcome: Outcome) -> None:
        hits, trace = outcome
        self.traces.append(trace)
        self.positions = tuple(self.positions[r - 1] for r in trace.selected_ranks)
        self.hits = hits

    def failed(self, index: int, stage: RerankStage, exc: RerankError) -> RerankError:
        spent = sum((t.usage for t in self.traces), Usage.zero())
        usage = exc.usage if isinstance(exc.usage, Usage) else Usage.zero()
        error = RerankError(
            f"stage {index + 1} of {len(self.chain.links)} of the reranker chain "
            f"({stage.policy_id!r}) failed: {exc}",
            policy_id=exc.policy_id,
            reason=exc.reason,
            usage=spent + usage,
            stage=index + 1,
        )
        return error

    def result(self) -> Outcome:
        latency_ms = (time.perf_counter() - self.started) * 1000.0
        trace = chain_trace(
            tuple(self.traces),
            tuple(p + 1 for p in self.positions),
            len(self.chain.pool),
            self.chain.k,
            latency_ms,
        )
        return self.hits, trace


_SEVERITY = (RerankStatus.OK, RerankStatus.REPAIRED, RerankStatus.FELL_BACK, RerankStatus.DEGRADED)


def chain_trace(
    stages: tuple[RerankTrace, ...],
    selected: tuple[int, ...],
    candidate_count: int,
    limit: int,
    latency_ms: float,
) -> RerankTrace:
    """The trace of a chain: its stages' entries (``stages``), the final hits' coarse ranks
    (``selected``), the worst status of a stage, counts and usage summed, the last stage's
    scores, and each stage's reason prefixed with the stage it comes from."""
    reasons = [
        f"stage {i} ({t.policy_id}): {t.reason}" for i, t in enumerate(stages, 1) if t.reason
    ]
    return RerankTrace(
        policy_id=CHAIN_POLICY_PREFIX + ">".join(t.policy_id for t in stages),
        status=max((t.status for t in stages), key=_SEVERITY.index),
        selected_ranks=selected,
        discarded_rank_count=sum(t.discarded_rank_count for t in stages),
        used_fallback=any(t.used_fallback for t in stages),
        reason="; ".join(reasons) or None,
        usage=sum((t.usage for t in stages), Usage.zero()),
        latency_ms=latency_ms,
        descriptor={"stages": [t.policy_id for t in stages]},
        candidate_count=candidate_count,
        limit=limit,
        scores=stages[-1].scores,
        over_limit_count=sum(t.over_limit_count for t in stages),
        stages=stages,
    )
