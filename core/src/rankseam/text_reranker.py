"""Rerank texts the caller already has: :func:`open_reranker` and :class:`DocumentReranker`.

A LangChain or LlamaIndex pipeline (or any caller) that already holds its documents can run an
installed rankseam reranker over them through the same seam as :meth:`Memory.search`: the
reranker sees read-only candidate views and answers with positions; the host validates them,
resolves them back to the caller's documents and returns a trace. Nothing is stored.

The input order is the coarse order. The result (:class:`DocumentResult`) gives the selected
documents' ``positions`` (0-based indices into the caller's input, best first, one per hit);
each hit's ref is ``(namespace, id, 1)``, ``id`` being the caller's id, or the document's 1-based
position when none is given. ``open_reranker("none")`` keeps the input order (no reranker runs).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from rankseam.assembly import ComponentContext
from rankseam.config import Config
from rankseam.embedding import Embedder
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.loop import LoopRunner
from rankseam.resolve import load_config
from rankseam.seam import (
    DEFAULT_MAX_CHARS,
    MAX_POOL,
    NO_RERANKER,
    ChainLink,
    ChainRun,
    RerankChain,
    Reranker,
    RerankStage,
    Vectors,
    check_reranker,
    prepare_reranker,
    reranker_specs,
    trace_candidates,
    validate_limit,
    validate_on_error,
)
from rankseam.seam.chain import CHAIN_POLICY_PREFIX
from rankseam.types import Hit, MemoryRef, RerankTrace, SearchResult, SearchTrace

__all__ = ["DocumentReranker", "DocumentResult", "open_reranker"]


@attrs.frozen
class DocumentResult(SearchResult):
    """A :class:`~rankseam.types.SearchResult` over caller-supplied documents, plus
    ``positions``: the 0-based index into the caller's input of each hit, best first
    (``texts[result.positions[i]]`` is ``result.hits[i].text``)."""

    positions: tuple[int, ...]


#: Namespace of the refs given to documents that come from outside a store.
DOCUMENTS_NAMESPACE = "documents"


def open_reranker(
    reranker: str | Reranker | Sequence[Any] | None,
    *,
    options: Mapping[str, Any] | None = None,
    config: Config | Mapping[str, Any] | None = None,
    config_file: str | os.PathLike[str] | None = None,
    on_error: str | None = None,
) -> DocumentReranker:
    """Build the installed reranker ``reranker`` (e.g. ``"mmr"``) for texts you already have;
    a reranker object (anything with ``policy_id`` and ``rerank``) is accepted too, and
    ``"none"`` (or ``None``) runs no reranker: the input order, cut to the limit, with no rerank
    trace, as :meth:`Memory.search` with no reranker. A list (or ``"a,b"``) is a chain, as in
    :meth:`Memory.search`: each stage reranks the previous one's selection.

    ``options`` override the configuration's ``[rerankers.NAME]`` table (a single reranker;
    a chain's stages carry their own). ``on_error``: ``"fail_closed"`` (raise, the default; also
    spelt ``"raise"``) or ``"fail_open"`` (return the input order marked ``degraded``; also
    spelt ``"coarse"``). A reranker that is not installed or cannot be built is a
    :class:`~rankseam.errors.ConfigurationError` here, not at the first call.
    """
    cfg = load_config(config, config_file)
    context = ComponentContext(cfg)
    chosen = validate_on_error(cfg.search.on_error if on_error is None else on_error)
    try:
        specs = reranker_specs(reranker)
    except ValidationError as exc:
        raise ConfigurationError(str(exc)) from None
    if specs is None:
        if options:
            raise ConfigurationError(
                "options were given but no reranker is chosen ('none'); name an installed "
                "reranker, e.g. 'mmr', or drop the options"
            )
        return DocumentReranker(NO_RERANKER, None, context, chosen, cfg.search.max_chars)
    if options and (len(specs) > 1 or not isinstance(specs[0].reranker, str)):
        raise ConfigurationError(
            "reranker must be the name of an installed reranker, e.g. 'mmr' "
            "(`rankseam plugins --options` lists them); options apply only to a name (give "
            "each stage of a chain its own: {'name': ..., 'options': {...}})"
        )
    links = []
    for spec in specs:
        if isinstance(spec.reranker, str):
            merged = {**cfg.options("reranker", spec.reranker), **spec.options, **(options or {})}
            built = context.reranker(spec.reranker, merged)
        else:
            try:
                check_reranker(spec.reranker)
            except TypeError as exc:
                raise ConfigurationError(
                    f"reranker does not implement the Reranker protocol: {exc}"
                ) from None
            built = spec.reranker
        links.append(ChainLink(prepare_reranker(built), spec.on_error, spec.deadline_s))
    name = ",".join(spec.label for spec in specs)
    return DocumentReranker(name, RerankChain(tuple(links)), context, chosen, cfg.search.max_chars)


class DocumentReranker:
    """One installed reranker, run over caller-supplied texts through the rerank seam.

    Create it with :func:`open_reranker`. Thread-safe; holds no store.
    """

    def __init__(
        self,
        name: str,
        reranker: Reranker | RerankChain | None,
        context: ComponentContext,
        on_error: str,
        max_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        self._name = name
        if reranker is not None and not isinstance(reranker, RerankChain):
            reranker = RerankChain((ChainLink(prepare_reranker(reranker)),))
        self._reranker = reranker
        self._context = context
        self._on_error = on_error
        self._max_chars = max_chars

    @property
    def name(self) -> str:
        """The reranker's registered name (a chain's names joined by commas)."""
        return self._name

    @property
    def policy_id(self) -> str:
        """The reranker's policy id (``"none"`` when no reranker runs; a chain's stages'
        joined by ``>`` after :data:`~rankseam.seam.chain.CHAIN_POLICY_PREFIX`)."""
        if self._reranker is None:
            return NO_RERANKER
        ids = [
            str(getattr(link.reranker.component, "policy_id", self._name))
            for link in self._reranker.links
        ]
        return ids[0] if len(ids) == 1 else CHAIN_POLICY_PREFIX + ">".join(ids)

    def __repr__(self) -> str:
        return f"DocumentReranker({self._name!r}, policy_id={self.policy_id!r})"

    def _embedder(self) -> Embedder:
        return self._context.build("embedder", self._context.config.embedder)  # type: ignore[no-any-return]

    def _pool(
        self,
        texts: Sequence[str],
        ids: Sequence[str] | None,
        scores: Sequence[float] | None,
        namespace: str,
    ) -> tuple[Hit, ...]:
        if isinstance(texts, str) or not isinstance(texts, Sequence):
            raise ValidationError("texts must be a sequence of strings (one per document)")
        n = len(texts)
        if n > MAX_POOL:
            raise ValidationError(
                f"{n} documents given; a reranker sees at most {MAX_POOL}; pass the best "
                f"{MAX_POOL} (e.g. the retriever's top {MAX_POOL})"
            )
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise ValidationError(
                    f"document {i + 1}: text must be a string, got {type(text).__name__}"
                )
        if ids is None:
            ids = [str(i + 1) for i in range(n)]
        elif len(ids) != n or len(set(ids)) != n:
            raise ValidationError(
                f"ids must be {n} distinct strings, one per document (got {len(ids)}, "
                f"{len(set(ids))} distinct)"
            )
        if scores is None:
            # The input order is the coarse order: 1.0 for the first, falling evenly.
            scores = [1.0 - i / n for i in range(n)]
        elif len(scores) != n:
            raise ValidationError(
                f"scores must hold one number per document ({n}), got {len(scores)}"
            )
        pool = []
        for i in range(n):
            try:
                ref = MemoryRef(namespace, str(ids[i]), 1)
                pool.append(Hit(ref=ref, text=texts[i], score=scores[i]))
            except (TypeError, ValueError) as exc:
                raise ValidationError(f"document {i + 1}: {exc}") from None
        return tuple(pool)

    def _fetcher(
        self, pool: tuple[Hit, ...], vectors: Sequence[Sequence[float]] | np.ndarray | None
    ) -> Callable[[], Vectors]:
        def fetch() -> Vectors:
            if vectors is not None:
                matrix = np.asarray(vectors, dtype=np.float32)
                if matrix.ndim != 2 or matrix.shape[0] != len(pool):
                    raise ValidationError(
                        f"vectors must be one row per document ({len(pool)} rows), got shape "
                        f"{matrix.shape}"
                    )
                return matrix
            embedder = self._embedder()
            out = np.asarray(embedder.embed([h.text for h in pool]), dtype=np.float32)
            return out

        return fetch

    def _stage(
        self,
        query: str,
        texts: Sequence[str],
        limit: int | None,
        ids: Sequence[str] | None,
        scores: Sequence[float] | None,
        vectors: Sequence[Sequence[float]] | np.ndarray | None,
        namespace: str,
    ) -> _Call:
        """One call's checked arguments and, when a reranker runs, its rerank stage (the
        seam, entered once)."""
        started = time.perf_counter()
        if not isinstance(query, str) or not query.strip():
            raise ValidationError("query must be a non-empty string")
        pool = self._pool(texts, ids, scores, namespace)
        k = max(len(pool) if limit is None else validate_limit(limit), 1)
        stage = None
        if self._reranker is not None and pool:
            config = self._context.config
            stage = self._reranker.stage(
                query,
                pool,
                k,
                on_error=self._on_error,
                deadline_s=config.search.rerank_deadline_s,
                max_chars=self._max_chars,
                vectors=self._fetcher(pool, vectors),
                embedding_space=config.embedder if vectors is None else "caller",
            )
        return _Call(query, namespace, pool, k, stage, started)

    async def arerank(
        self,
        query: str,
        texts: Sequence[str],
        limit: int | None = None,
        *,
        ids: Sequence[str] | None = None,
        scores: Sequence[float] | None = None,
        vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
        namespace: str = DOCUMENTS_NAMESPACE,
    ) -> DocumentResult:
        """Rerank ``texts`` for ``query``; the result's hits are the selected documents, best
        first (at most ``limit``, default all), ``positions`` their 0-based indices into
        ``texts``, and its trace says what the reranker did.

        ``scores``: the caller's relevance per document (default: falling with position).
        ``vectors``: one embedding per document for rerankers that use vectors (default: the
        configured embedder embeds the texts when the reranker asks for vectors).
        """
        call = self._stage(query, texts, limit, ids, scores, vectors, namespace)
        if call.stage is None:
            return call.result(call.pool[: call.k], None)
        return call.result(*await call.stage.run())

    def rerank(
        self,
        query: str,
        texts: Sequence[str],
        limit: int | None = None,
        *,
        ids: Sequence[str] | None = None,
        scores: Sequence[float] | None = None,
        vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
        namespace: str = DOCUMENTS_NAMESPACE,
    ) -> DocumentResult:
        """:meth:`arerank` for synchronous callers, inside a running event loop too: the
        reranker runs where a synchronous search runs it (the host's one runner,
        :mod:`rankseam.loop`), with the same deadline and failure policy."""
        call = self._stage(query, texts, limit, ids, scores, vectors, namespace)
        if call.stage is None:
            return call.result(call.pool[: call.k], None)
        return call.result(*call.stage.run_sync(_runner()))


@attrs.frozen
class _Call:
    """One call of a :class:`DocumentReranker`: its checked arguments and its stage."""

    query: str
    namespace: str
    pool: tuple[Hit, ...]
    k: int
    stage: RerankStage | ChainRun | None
    started: float

    def result(self, hits: tuple[Hit, ...], rerank_trace: RerankTrace | None) -> DocumentResult:
        trace = SearchTrace(
            query=self.query,
            namespace=self.namespace,
            limit=self.k,
            pool_size=len(self.pool),
            coarse=trace_candidates(self.pool),
            rerank=rerank_trace,
            latency_ms=(time.perf_counter() - self.started) * 1000.0,
            channels=("caller",),
        )
        return DocumentResult(hits, trace, _positions(hits, rerank_trace))


_RUNNER: LoopRunner | None = None
_RUNNER_LOCK = threading.Lock()


def _runner() -> LoopRunner:
    """The one runner of every DocumentReranker in the process (its loop thread starts on
    the first call that needs it)."""
    global _RUNNER
    with _RUNNER_LOCK:
        if _RUNNER is None:
            _RUNNER = LoopRunner()
        return _RUNNER


def _positions(hits: tuple[Hit, ...], trace: RerankTrace | None) -> tuple[int, ...]:
    """The 0-based input positions of ``hits``: the ranks the seam resolved them from (every
    rerank trace names exactly the ranks of its hits, in order), or the input order when no
    reranker ran."""
    if trace is None:
        return tuple(range(len(hits)))
    return tuple(rank - 1 for rank in trace.selected_ranks)
