"""The search pipeline, one pass: the reranker chosen (:class:`RerankerChooser`) and the
arguments checked once (:meth:`SearchPipeline.plan`), the coarse pool (every source's ranked
list, fused, read in ONE short read transaction: :meth:`SearchPipeline.coarse`), then the seam
entered once for the rerank stage (:meth:`SearchPipeline.finish` / :meth:`~SearchPipeline.afinish`).
See docs/architecture.md for the path, docs/store.md for the coarse pool and docs/seam.md for
the rerank stage.
"""

from __future__ import annotations

import contextvars
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, cast

import attrs

from rankseam.assembly import ComponentContext
from rankseam.checks import is_real
from rankseam.config import SearchConfig
from rankseam.embedding import Embedder, EmbedderDescriptor, embed_checked
from rankseam.errors import ValidationError
from rankseam.loop import LoopRunner
from rankseam.seam import (
    MAX_POOL,
    ChainLink,
    ChainRun,
    RerankChain,
    RerankerSpec,
    RerankStage,
    SeamReranker,
    Vectors,
    prepare_reranker,
    reranker_specs,
    trace_candidates,
    validate_deadline,
    validate_limit,
    validate_on_error,
    validate_pool_size,
)
from rankseam.search.channels.base import (
    CONTEXT,
    CandidateSource,
    SourceRequest,
    channel_stage,
    over_fetch,
)
from rankseam.search.fusion import ChannelList, Fused, ScoreSpec, fuse, score_spec_of, widen
from rankseam.search.neighbours import neighbour_window, read_neighbours
from rankseam.search.selection import spread_sources
from rankseam.store.contract import Store
from rankseam.store.filters import Filter
from rankseam.store.readers import (
    ConcurrentReader,
    ScoredKey,
    ScoredKeys,
    StoreReader,
)
from rankseam.store.records import StoredMemory
from rankseam.types import (
    Hit,
    MemoryRef,
    Neighbour,
    RerankTrace,
    SearchResult,
    SearchTrace,
    prechecked,
)

__all__ = [
    "CONFIG_DEFAULT",
    "MAX_QUERY_BYTES",
    "Pooled",
    "RerankerChooser",
    "SearchPipeline",
    "SearchPlan",
    "check_query",
    "check_reranker_options",
]

#: Longest query accepted, in UTF-8 bytes.
MAX_QUERY_BYTES = 64 * 1024


class _ConfigDefault:
    def __repr__(self) -> str:
        return "<config default>"


#: The reranker a search gets when it names none: the configured default.
CONFIG_DEFAULT: Any = _ConfigDefault()


def check_query(query: object) -> str:
    """``query`` if it is searchable text; a :class:`ValidationError` saying why not."""
    if not isinstance(query, str):
        raise ValidationError(f"query must be a string, got {type(query).__name__}")
    if "\x00" in query:
        raise ValidationError("query contains a NUL character; remove it")
    try:
        size = len(query.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValidationError(
            "query is not valid Unicode (it contains a lone surrogate); pass proper text"
        ) from None
    if size > MAX_QUERY_BYTES:
        raise ValidationError(
            f"query is {size} bytes long; at most {MAX_QUERY_BYTES} bytes (64 kB) are accepted; "
            "shorten it"
        )
    if not query.strip():
        raise ValidationError("query is empty; pass some text to search for")
    return query


def check_reranker_options(options: object) -> Mapping[str, Any] | None:
    """``reranker_options`` if they are a mapping of option names to values (or None); a
    :class:`ValidationError` naming the argument otherwise."""
    if options is None or (
        isinstance(options, Mapping) and all(isinstance(k, str) for k in options)
    ):
        return options
    # the type only: a value given by mistake here may be a key or other secret
    got = (
        "a mapping with a key of type "
        + type(next(k for k in options if not isinstance(k, str))).__name__
        if isinstance(options, Mapping)
        else f"a {type(options).__name__}"
    )
    raise ValidationError(
        "reranker_options must be a mapping of option names (strings) to values, e.g. "
        f"{{'lambda': 0.3}}, or None; got {got}"
    )


class RerankerChooser:
    """Where the reranker of one search is chosen: the configured default, ``None`` /
    ``"none"`` (no reranker), a registered name (with per-search options over the configured
    ones), a reranker object, or a chain of them (a list, or names joined by commas:
    :func:`~rankseam.seam.reranker_specs`). Each stage is resolved, checked and made ready for
    the seam (:func:`~rankseam.seam.prepare_reranker`) here, once: a name without options once
    per Memory, a default once at open."""

    def __init__(self, context: ComponentContext, default: Any = None) -> None:
        self._context = context
        self._config = context.config
        self._named: dict[str, SeamReranker] = {}
        self._default = None if default is None else self._chain(default, None)

    def choose(
        self, choice: Any, options: Mapping[str, Any] | None
    ) -> tuple[RerankChain | None, tuple[str, ...]]:
        """The reranker (chain) of a search that asked for ``choice`` with ``options``, and the
        notes its trace carries (what the environment changed, for the configured default)."""
        options = check_reranker_options(options)
        notes: tuple[str, ...] = ()
        if choice is CONFIG_DEFAULT:
            if self._default is not None and not options:
                return self._default, notes
            choice, notes = self._config.search.reranker, self._config.notes
        return self._chain(choice, options), notes

    def _chain(self, choice: Any, options: Mapping[str, Any] | None) -> RerankChain | None:
        specs = reranker_specs(choice)
        if specs is None:
            if options:
                raise ValidationError("reranker_options were given but no reranker is chosen")
            return None
        if options and len(specs) > 1:
            raise ValidationError(
                "reranker_options apply to a single reranker; give each stage of a chain its "
                "own options ({'name': ..., 'options': {...}} or RerankerSpec(name, options))"
            )
        if options and not isinstance(specs[0].reranker, str):
            raise ValidationError("reranker_options apply only to a reranker given by name")
        return RerankChain(
            tuple(
                ChainLink(self._ready(spec, options), spec.on_error, spec.deadline_s)
                for spec in specs
            )
        )

    def _ready(self, spec: RerankerSpec, options: Mapping[str, Any] | None) -> SeamReranker:
        name = spec.reranker
        if not isinstance(name, str):
            try:
                return prepare_reranker(name)
            except TypeError as exc:
                raise ValidationError(
                    f"reranker does not implement the Reranker protocol: {exc}"
                ) from None
        extra = {**spec.options, **(options or {})}
        if extra:
            merged = {**self._config.options("reranker", name), **extra}
            return prepare_reranker(self._context.reranker(name, merged))
        ready = self._named.get(name)
        if ready is None:
            ready = self._named[name] = prepare_reranker(self._context.reranker(name))
        return ready


@attrs.frozen
class SearchPlan:
    """One search's checked arguments."""

    query: str
    namespace: str
    limit: int
    pool: int
    on_error: str
    reranker: RerankChain | None
    started: float
    rerank_deadline_s: float
    notes: tuple[str, ...] = ()
    #: memories of one source do not crowd the top (docs/store.md, "Source-aware selection")
    distinct_sources: bool = True
    #: The filter (``where`` with the thread and time scope), checked; None: every memory.
    where: Filter | None = None
    #: Coarse hits whose fused score is below it never enter the pool; None: no cut-off.
    min_score: float | None = None


def check_min_score(value: object) -> float:
    """A search's ``min_score``: a finite number, compared with each coarse hit's fused score
    (``Hit.score``; the default ``convex`` fusion scores on [0, 1])."""
    if not is_real(value) or value != value or value in (float("inf"), float("-inf")):
        raise ValidationError(
            f"min_score must be a finite number (a hit's fused score, 0..1 with the default "
            f"fusion), got {value!r}"
        )
    return float(value)  # type: ignore[arg-type]


class Pooled:
    """One coarse-pool entry: the hit, and the store's key of its revision row (how the
    rerank stage fetches the stored vector of the hit); ``neighbours``, the hit's neighbours
    in its thread when the search's reranker asked for them (else None)."""

    __slots__ = ("hit", "key", "neighbours")

    def __init__(self, hit: Hit, key: int, neighbours: tuple[Neighbour, ...] | None = None) -> None:
        self.hit = hit
        self.key = key
        self.neighbours = neighbours


#: Whether a reader class offers ``ConcurrentReader`` (a runtime Protocol check costs about
#: 80 µs on Python 3.11, a tenth of a small store's search: it is made once per class).
_LENDS_SNAPSHOT: dict[type, bool] = {}


def _lends_snapshot(reader: StoreReader) -> bool:
    kind = type(reader)
    known = _LENDS_SNAPSHOT.get(kind)
    if known is None:
        known = _LENDS_SNAPSHOT[kind] = isinstance(reader, ConcurrentReader)
    return known


def _admitting_answers(
    reader: StoreReader,
    sources: Sequence[CandidateSource],
    request: Callable[[StoreReader], SourceRequest],
) -> list[Sequence[ScoredKey]]:
    """Each admitting source's answer, in order. On a reader that lends its snapshot
    (:class:`~rankseam.store.readers.ConcurrentReader`) every source after the first runs at
    the same time, in a thread of its own, on a sibling reader; otherwise one after another.
    Every call has returned before this does; the first source's error (in order) is raised."""
    if len(sources) < 2 or not _lends_snapshot(reader):
        return [src.candidates(request(reader)) for src in sources]
    answers: list[Sequence[ScoredKey]] = [()] * len(sources)
    errors: list[BaseException | None] = [None] * len(sources)

    def run(i: int, on: StoreReader) -> None:
        try:
            answers[i] = sources[i].candidates(request(on))
        except BaseException as exc:  # raised in the caller's thread below
            errors[i] = exc

    with cast(ConcurrentReader, reader).siblings(len(sources) - 1) as others:
        threads = [
            threading.Thread(
                target=contextvars.copy_context().run,
                args=(run, i, other),
                name="rankseam-channel",
                daemon=True,
            )
            for i, other in enumerate(others, start=1)
        ]
        for thread in threads:
            thread.start()
        try:
            run(0, reader)
        finally:
            for thread in threads:
                thread.join()
    for error in errors:
        if error is not None:
            raise error
    return answers


def _hit(row: StoredMemory, fused: Fused) -> Hit:
    """The hit of a fused key: the store's checked row and fusion's finite score, so built
    without re-checking (a score that is not finite gets :class:`Hit`'s own error)."""
    if not math.isfinite(fused.score):
        return Hit(ref=row.ref, text=row.text, score=fused.score)  # raises
    return prechecked(
        Hit,
        row.ref,
        row.text,
        float(fused.score),
        float(row.importance),
        fused.matched_by,
        MappingProxyType(fused.channel_scores),
        row.metadata,
        float(row.created_at),
        row.content_hash,
        None,
        row.thread,
        row.position,
        row.derived_from,
    )


class SearchPipeline:
    """The search of one assembly: its store, embedder, candidate sources and settings."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        sources: Sequence[tuple[str, CandidateSource]],
        settings: SearchConfig,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._channels = tuple(name for name, _s in sources)
        # the channels that answer for the query (fused), and those that answer over the
        # fused pool (the context stage: docs/store.md, "The context stage")
        self._sources = tuple(s for s in sources if channel_stage(s[1]) != CONTEXT)
        self._context = tuple(s for s in sources if channel_stage(s[1]) == CONTEXT)
        self._admitting = tuple((name, src) for name, src in self._sources if src.admits)
        self._needs_query_vector = any(src.needs_query_vector for _n, src in self._sources)
        self._settings = settings
        # each source's ScoreSpec, declared for the embedder's space (asked once per space)
        self._specs: tuple[Any, tuple[ScoreSpec, ...]] = (None, ())

    def plan(
        self,
        query: object,
        limit: object,
        namespace: str,
        reranker: RerankChain | None,
        pool: int | None,
        on_error: str | None,
        rerank_deadline_s: float | None = None,
        notes: tuple[str, ...] = (),
        distinct_sources: bool | None = None,
        where: Filter | None = None,
        min_score: object = None,
    ) -> SearchPlan:
        """Check a search's arguments, once (``namespace``, ``reranker`` and ``where``
        resolved)."""
        if distinct_sources is not None and not isinstance(distinct_sources, bool):
            raise ValidationError(
                f"distinct_sources must be True, False or None (the configured default), got "
                f"{distinct_sources!r}"
            )
        started = time.perf_counter()
        settings = self._settings
        deadline = settings.rerank_deadline_s
        if rerank_deadline_s is not None:
            deadline = validate_deadline(rerank_deadline_s)
        limit = validate_limit(limit)
        pool = settings.pool if pool is None else validate_pool_size(pool)
        return SearchPlan(
            query=check_query(query),
            namespace=namespace,
            limit=limit,
            # The pool holds at least `limit` hits (up to the 200 bound), so a search for 50
            # hits is never cut to a pool of 30.
            pool=max(pool, min(limit, MAX_POOL)),
            on_error=settings.on_error if on_error is None else validate_on_error(on_error),
            reranker=reranker,
            started=started,
            rerank_deadline_s=deadline,
            notes=notes,
            distinct_sources=settings.distinct_sources
            if distinct_sources is None
            else distinct_sources,
            where=where,
            min_score=None if min_score is None else check_min_score(min_score),
        )

    def use_embedder(self, embedder: Embedder) -> None:
        """Search ``embedder``'s space from now on (a search already running finishes in the
        space it started in)."""
        self._embedder = embedder

    def coarse(self, plan: SearchPlan) -> list[Pooled]:
        """The coarse pool, read in ONE short read transaction (released before reranking)."""
        embedder = self._embedder  # one space for the whole search, even across a switch
        space = embedder.descriptor
        qvec = None
        if self._needs_query_vector:
            qvec = embed_checked(embedder, [plan.query])[0]
        k = over_fetch(plan.pool)
        results: dict[str, Sequence[tuple[int, float]]] = {}
        first_seen: dict[int, None] = {}  # the admitted keys, in the order first listed
        admitting = self._admitting
        with self._store.read() as reader:
            answers = _admitting_answers(
                reader,
                [src for _name, src in admitting],
                lambda r: SourceRequest(
                    r, plan.namespace, plan.query, k, qvec, space, where=plan.where
                ),
            )
            for (name, _src), found in zip(admitting, answers, strict=True):
                # the host's sources answer ScoredKeys: fusion reads their arrays
                if isinstance(found, ScoredKeys):
                    kept = found if len(found) <= k else found[:k]
                    first_seen.update(dict.fromkeys(kept.row_keys.tolist()))
                    results[name] = kept
                else:
                    pairs = list(found)[:k]
                    first_seen.update(dict.fromkeys(key for key, _s in pairs))
                    results[name] = pairs
            admitted = tuple(first_seen)
            for name, src in self._sources:
                if not src.admits:
                    request = SourceRequest(
                        reader, plan.namespace, plan.query, k, qvec, space, admitted, plan.where
                    )
                    found = src.candidates(request)  # a reader's arrays are kept as they are
                    results[name] = found if isinstance(found, ScoredKeys) else list(found)
            refs = reader.identities(admitted)
            # Every admitted key has an identity (the usual case): no list needs filtering
            # (fusion ranks only the keys the admitting channels list). Otherwise the
            # admitting channels' lists keep only the keys that have one.
            complete = len(refs) == len(admitted)
            channels = [
                ChannelList(
                    name,
                    src.admits,
                    results[name]
                    if complete or not src.admits
                    else [(key, s) for key, s in results[name] if key in refs],
                    spec,
                )
                for (name, src), spec in zip(self._sources, self._score_specs(space), strict=True)
            ]
            fused = fuse(
                channels,
                refs.__getitem__,
                method=self._settings.fusion,
                weights=self._settings.weights,
                scales=self._settings.scales,
                limit=plan.pool if plan.min_score is None else None,
            )
            if plan.min_score is not None:
                fused = [f for f in fused if f.score >= plan.min_score][: plan.pool]
            for name, src in self._context:  # over the fused pool, in this snapshot
                fused = self._widen(plan, reader, refs, fused, name, src)
            rows = reader.memories([f.key for f in fused])
            around: Mapping[int, tuple[Neighbour, ...]] = {}
            window = None
            if plan.reranker is not None and fused:
                window, metadata = neighbour_window(plan.reranker)
                if window is not None:  # read in this snapshot; the reranker runs after it
                    around = read_neighbours(
                        reader,
                        self._store,
                        [f.key for f in fused],
                        window,
                        max_chars=self._settings.max_chars,
                        metadata=metadata,
                        where=plan.where,
                    )
        if window is None:
            pooled = [Pooled(_hit(rows[f.key], f), f.key) for f in fused]
        else:
            pooled = [Pooled(_hit(rows[f.key], f), f.key, around.get(f.key, ())) for f in fused]
        if plan.distinct_sources:
            pooled = spread_sources(pooled, [p.hit for p in pooled])
        return pooled

    def _widen(
        self,
        plan: SearchPlan,
        reader: StoreReader,
        refs: Mapping[int, MemoryRef],
        fused: list[Fused],
        name: str,
        source: CandidateSource,
    ) -> list[Fused]:
        """``fused`` with the answer of the context-stage channel ``name`` over it
        (:func:`~rankseam.search.fusion.widen`)."""
        if not fused:
            return fused
        pool = ScoredKeys([f.key for f in fused], [f.score for f in fused])
        answered = source.candidates(
            SourceRequest(
                reader, plan.namespace, plan.query, plan.pool, where=plan.where, pool=pool
            )
        )
        if isinstance(answered, ScoredKeys) and not len(answered):
            return fused  # the built-in channel's usual answer on a store without threads
        answered = list(answered)[: plan.pool]
        if not answered:
            return fused
        outside = [k for k, _s in answered if k not in refs]
        more = reader.identities(outside) if outside else {}
        # the stage drops nothing the channels found and adds at most the pool size: the pool
        # at most doubles (docs/store.md, "The context stage")
        return widen(
            fused,
            name,
            answered,
            lambda k: refs[k] if k in refs else more.get(k),
            len(fused) + plan.pool,
        )

    def _score_specs(self, space: EmbedderDescriptor) -> tuple[ScoreSpec, ...]:
        declared_for, specs = self._specs
        if declared_for is not space:
            specs = tuple(score_spec_of(src, space) for _name, src in self._sources)
            self._specs = (space, specs)
        return specs

    def finish(self, plan: SearchPlan, pool: Sequence[Pooled], runner: LoopRunner) -> SearchResult:
        """The rerank stage (the seam, entered once) and the result, for a synchronous
        caller: no event loop unless a reranker that needs one runs (then ``runner``'s)."""
        hits = tuple(p.hit for p in pool)
        if plan.reranker is None or not hits:
            return self.result(plan, hits, hits[: plan.limit], None)
        return self.result(plan, hits, *self._stage(plan, pool, hits).run_sync(runner))

    async def afinish(self, plan: SearchPlan, pool: Sequence[Pooled]) -> SearchResult:
        """:meth:`finish` for async callers: the reranker runs on the caller's loop."""
        hits = tuple(p.hit for p in pool)
        if plan.reranker is None or not hits:
            return self.result(plan, hits, hits[: plan.limit], None)
        return self.result(plan, hits, *await self._stage(plan, pool, hits).run())

    def _stage(
        self, plan: SearchPlan, pool: Sequence[Pooled], hits: tuple[Hit, ...]
    ) -> RerankStage | ChainRun:
        assert plan.reranker is not None
        space = self._embedder.descriptor

        def vectors() -> Vectors:
            return self._store.vectors_of([p.key for p in pool], space)

        neighbours = None
        if pool and pool[0].neighbours is not None:  # the reranker asked for them
            neighbours = {p.hit.ref: p.neighbours or () for p in pool}

        return plan.reranker.stage(  # one stage, or a chain (docs/seam.md)
            plan.query,
            hits,
            plan.limit,
            on_error=plan.on_error,
            deadline_s=plan.rerank_deadline_s,
            max_chars=self._settings.max_chars,
            vectors=vectors,
            embedding_space=space.key,
            neighbours=neighbours,
        )

    def result(
        self,
        plan: SearchPlan,
        pool: tuple[Hit, ...],
        hits: tuple[Hit, ...],
        rerank_trace: RerankTrace | None,
    ) -> SearchResult:
        trace = SearchTrace(
            query=plan.query,
            namespace=plan.namespace,
            limit=plan.limit,
            pool_size=plan.pool,
            coarse=trace_candidates(pool, text=self._settings.trace_text),
            rerank=rerank_trace,
            latency_ms=(time.perf_counter() - plan.started) * 1000.0,
            channels=self._channels,
            notes=plan.notes,
            where=None if plan.where is None else plan.where.to_dict(),
            min_score=plan.min_score,
        )
        return SearchResult(hits, trace)
