"""The search pipeline: a plan from the caller's arguments, the coarse pool (every source's
ranked list, fused, read in ONE short read transaction), then the rerank stage through the seam.
See docs/store.md for the coarse pool and docs/seam.md for the rerank stage.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import attrs

from rankseam.compose import SearchConfig
from rankseam.embedding import Embedder, embed_checked
from rankseam.errors import ValidationError
from rankseam.retrieval.base import CandidateSource, SourceRequest, over_fetch
from rankseam.retrieval.fusion import ChannelList, fuse, score_spec_of
from rankseam.seam import (
    DEADLINE_MARGIN_S,
    MAX_POOL,
    Reranker,
    Vectors,
    expired_rerank,
    rerank_pool,
    trace_candidates,
    validate_deadline,
    validate_limit,
    validate_on_error,
    validate_pool_size,
)
from rankseam.store.contract import Store
from rankseam.types import Hit, MemoryRef, RerankTrace, SearchResult, SearchTrace

__all__ = ["MAX_QUERY_BYTES", "SearchPipeline", "SearchPlan", "check_query"]

#: Longest query accepted, in UTF-8 bytes.
MAX_QUERY_BYTES = 64 * 1024


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


@attrs.frozen
class SearchPlan:
    """One search's checked arguments."""

    query: str
    namespace: str
    limit: int
    pool: int
    on_error: str
    reranker: Reranker | None
    started: float
    rerank_deadline_s: float
    notes: tuple[str, ...] = ()

    @property
    def wait_s(self) -> float:
        """How long a synchronous caller waits for the rerank stage before giving up on an
        event loop that a plugin blocked: the deadline plus the documented margin."""
        return self.rerank_deadline_s + DEADLINE_MARGIN_S


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
        self._sources = tuple(sources)
        self._settings = settings

    def plan(
        self,
        query: object,
        limit: object,
        namespace: str,
        reranker: Reranker | None,
        pool: int | None,
        on_error: str | None,
        rerank_deadline_s: float | None = None,
        notes: tuple[str, ...] = (),
    ) -> SearchPlan:
        """Check a search's arguments (``namespace`` and ``reranker`` already resolved)."""
        started = time.perf_counter()
        deadline = self._settings.rerank_deadline_s
        if rerank_deadline_s is not None:
            deadline = validate_deadline(rerank_deadline_s)
        limit = validate_limit(limit)
        pool = validate_pool_size(self._settings.pool if pool is None else pool)
        return SearchPlan(
            query=check_query(query),
            namespace=namespace,
            limit=limit,
            # The pool holds at least `limit` hits (up to the 200 bound), so a search for 50
            # hits is never cut to a pool of 30.
            pool=max(pool, min(limit, MAX_POOL)),
            on_error=validate_on_error(self._settings.on_error if on_error is None else on_error),
            reranker=reranker,
            started=started,
            rerank_deadline_s=deadline,
            notes=notes,
        )

    def coarse(self, plan: SearchPlan) -> tuple[list[Hit], list[int]]:
        """The coarse pool, read in ONE short read transaction (released before reranking),
        and the revision row of each hit (how the rerank stage fetches their vectors)."""
        space = self._embedder.descriptor
        qvec = None
        if any(src.needs_query_vector for _n, src in self._sources):
            qvec = embed_checked(self._embedder, [plan.query])[0]
        k = over_fetch(plan.pool)
        results: dict[str, list[tuple[int, float]]] = {}
        with self._store.read() as reader:
            for name, src in self._sources:
                if src.admits:
                    request = SourceRequest(reader, plan.namespace, plan.query, k, qvec, space)
                    results[name] = list(src.candidates(request))[:k]
            admitted = tuple(dict.fromkeys(key for items in results.values() for key, _s in items))
            for name, src in self._sources:
                if not src.admits:
                    request = SourceRequest(
                        reader, plan.namespace, plan.query, k, qvec, space, admitted
                    )
                    results[name] = list(src.candidates(request))
            refs = reader.identities(admitted)
            channels = [
                ChannelList(
                    name,
                    src.admits,
                    [(key, s) for key, s in results[name] if key in refs],
                    score_spec_of(src, space),
                )
                for name, src in self._sources
            ]
            fused = fuse(
                channels,
                refs.__getitem__,
                method=self._settings.fusion,
                weights=self._settings.weights,
                scales=self._settings.scales,
                limit=plan.pool,
            )
            rows = reader.memories([f.key for f in fused])
        pool = []
        for f in fused:
            row = rows[f.key]
            pool.append(
                Hit(
                    ref=row.ref,
                    text=row.text,
                    score=f.score,
                    importance=row.importance,
                    matched_by=f.matched_by,
                    channel_scores=f.channel_scores,
                    metadata=row.metadata,
                    created_at=row.created_at,
                    content_hash=row.content_hash,
                )
            )
        return pool, [f.key for f in fused]

    async def finish(self, plan: SearchPlan, pool: list[Hit], rids: list[int]) -> SearchResult:
        """The rerank stage (through the seam) and the result with its trace."""
        space = self._embedder.descriptor

        def fetch_vectors(refs: Sequence[MemoryRef]) -> Vectors:
            rid_of = dict(zip((h.ref for h in pool), rids, strict=True))
            return self._store.vectors_of([rid_of[r] for r in refs], space)

        hits, rerank_trace = await rerank_pool(
            plan.query,
            pool,
            plan.limit,
            plan.reranker,
            on_error=plan.on_error,  # type: ignore[arg-type]
            max_chars=self._settings.max_chars,
            fetch_vectors=fetch_vectors,
            embedding_space=space.key,
            deadline_s=plan.rerank_deadline_s,
        )
        return self.result(plan, pool, hits, rerank_trace)

    def expired(self, plan: SearchPlan, pool: list[Hit], waited_s: float) -> SearchResult:
        """The result (or the ``RerankError``) of a search whose rerank stage never came back:
        its event loop was blocked past the deadline (see ``rankseam.loop``)."""
        assert plan.reranker is not None
        hits, rerank_trace = expired_rerank(
            pool,
            plan.limit,
            plan.reranker,
            on_error=plan.on_error,  # type: ignore[arg-type]
            deadline_s=plan.rerank_deadline_s,
            waited_s=waited_s,
        )
        return self.result(plan, pool, hits, rerank_trace)

    def result(
        self,
        plan: SearchPlan,
        pool: list[Hit],
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
            channels=tuple(name for name, _s in self._sources),
            notes=plan.notes,
        )
        return SearchResult(hits, trace)
