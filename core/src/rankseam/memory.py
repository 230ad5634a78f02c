"""The public API: :func:`open_memory` and :class:`Memory`.

``open_memory()`` resolves the configuration and assembles a store, an embedder, candidate
sources and (optionally) a default reranker; every misconfiguration is a
:class:`~rankseam.errors.ConfigurationError` raised here, at open time. :class:`Memory` is a
thin facade: writes go through :mod:`rankseam.writing.ingest`, searches through
:mod:`rankseam.search.pipeline` (the coarse pool in one short read transaction, then the rerank
seam).
"""

from __future__ import annotations

import builtins
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from rankseam.assembly import (
    ComponentContext,
    assemble,
    check_embedder,
    open_store,
    store_channels,
)
from rankseam.config import Config, default_db_path
from rankseam.decision import DecisionBackend
from rankseam.embedding import Embedder, EmbedderDescriptor
from rankseam.errors import ConfigurationError
from rankseam.loop import LoopRunner
from rankseam.memory_async import AsyncMethods
from rankseam.memory_feedback import FeedbackMethods
from rankseam.memory_lifecycle import Forgotten, LifecycleMethods
from rankseam.resolve import in_config_file, resolve_config, warn_if_likely_typo
from rankseam.seam import RerankerSpec, check_reranker
from rankseam.search.channels.base import CandidateSource
from rankseam.search.pipeline import (
    CONFIG_DEFAULT,
    MAX_QUERY_BYTES,
    RerankerChooser,
    SearchPipeline,
    SearchPlan,
)
from rankseam.store.contract import Store
from rankseam.store.filters import Filter, check_live_filter, parse_where, scoped
from rankseam.store.records import (
    MemoryNotFoundError,
    StoredMemory,
    check_memory_id,
    check_namespace,
)
from rankseam.types import MemoryRef, SearchResult
from rankseam.writing.gate import WriteGate
from rankseam.writing.ingest import (
    AddResult,
    IngestError,
    IngestReport,
    ReembedProgress,
    ReembedReport,
    Writer,
)

if TYPE_CHECKING:
    from datetime import datetime

    from rankseam.snapshot import ExportReport, ImportReport, VerifyReport

__all__ = [
    "MAX_QUERY_BYTES",
    "AddResult",
    "Forgotten",
    "IngestError",
    "IngestReport",
    "Memory",
    "MemoryNotFoundError",
    "ReembedProgress",
    "ReembedReport",
    "StoredMemory",
    "default_db_path",
    "open_memory",
]

log = logging.getLogger("rankseam.memory")


def open_memory(
    target: str | os.PathLike[str] | None = None,
    *,
    config: Config | Mapping[str, Any] | None = None,
    config_file: str | os.PathLike[str] | None = None,
    create: bool | None = None,
    **overrides: Any,
) -> Memory:
    """Open a memory store (created when missing: see ``create`` below) and assemble its search.

    The store is ``target``, else the configuration's ``db``, else ``RANKSEAM_DB``, else the
    platform default (:func:`default_db_path`). A target is a plain path (the embedded SQLite
    store) or a URL whose scheme picks an installed store plugin (``sqlite:///ABSOLUTE/PATH``,
    ``postgresql://user@host/db`` with rankseam-postgres); the password of a URL never
    appears in messages, logs or ``repr``. ``config`` is a
    :class:`~rankseam.config.Config` or a mapping of the ``rankseam.toml`` layout;
    ``config_file`` is a ``rankseam.toml``. Keyword ``overrides`` (``namespace``,
    ``embedder``, ``pool``, ``reranker``, ``fusion``, ``sources``, ``on_error``, ...) win over
    everything; then what ``config`` sets, in code; then the environment (``RANKSEAM_*``, see
    :meth:`Config.with_env`); then ``config_file``; then the defaults (docs/configuration.md,
    "Which switch wins").

    A missing store is created (as :func:`sqlite3.connect` creates a missing file), and
    ``create`` says how: left out, a plain path with no file yet whose name is close to a file
    beside it (``memoreis.sqlite3`` next to ``memories.sqlite3``) is created with a
    ``UserWarning`` naming both, since a typo would otherwise open an empty store whose
    searches find nothing; ``create=True`` creates without that check; ``create=False``
    refuses a missing store (a :class:`ConfigurationError` naming the path; read-only
    commands use it) — docs/store.md, "Opening a store".
    """
    default_reranker = None
    chosen = overrides.get("reranker")
    if isinstance(chosen, list | tuple) and all(isinstance(c, str) for c in chosen):
        overrides = {**overrides, "reranker": list(chosen)}  # a chain of names: configuration
    elif chosen is not None and not isinstance(chosen, str):
        default_reranker = chosen  # an object, or a chain holding objects or specs
        for stage in chosen if isinstance(chosen, list | tuple) else (chosen,):
            if isinstance(stage, str | Mapping | RerankerSpec):
                continue
            try:
                check_reranker(stage)
            except TypeError as exc:
                raise ConfigurationError(
                    "open_memory(reranker=...) takes a registered reranker name (e.g. 'mmr'), "
                    "None or 'none' for the coarse order, a reranker object (a policy_id string "
                    "and a rerank(query, candidates, limit) method), or a list of them (a "
                    f"chain); {exc}"
                ) from None
        overrides = {**overrides, "reranker": None}  # the objects, not a configured name
    cfg = resolve_config(target, config, config_file, overrides)
    if create is None and cfg.db is not None:
        warn_if_likely_typo(cfg.db)
    try:
        parts = assemble(cfg, create=create is not False)
    except ConfigurationError as exc:
        raise in_config_file(exc, config_file) from None
    store = open_store(parts)
    try:
        sources = store_channels(store, parts)
        store.register_space(parts.embedder.descriptor)
    except BaseException:
        store.close()
        raise
    return Memory(
        store,
        cfg,
        parts.context,
        parts.embedder,
        list(sources),
        parts.gate,
        default_reranker=default_reranker,
    )


def _where(scope: Mapping[str, Any]) -> Filter | None:
    """A search's or a listing's filter: ``where`` checked, with its thread and time scope."""
    return scoped(
        parse_where(scope.get("where")),
        thread=scope.get("thread"),
        since=scope.get("since"),
        until=scope.get("until"),
    )


class Memory(LifecycleMethods, FeedbackMethods, AsyncMethods):
    """A memory store with search. Thread-safe. Create it with :func:`open_memory`.

    A memory's ``history``, ``forget`` (a hard delete) and ``reset`` (of a whole namespace)
    are in :mod:`rankseam.memory_lifecycle`; feedback on search results (``feedback``,
    ``feedback_records``, ``export_feedback``, ``delete_feedback``) in
    :mod:`rankseam.memory_feedback`. Every operation has an async twin for
    event-loop code: ``asearch``, ``aadd``, ``aupdate``, ``aget``, ``adelete``, ``aingest``,
    ``ahistory``, ``aforget``, ``areset``, ``afeedback``, ``afeedback_records``,
    ``adelete_feedback`` (:mod:`rankseam.memory_async`, docs/async.md)."""

    def __init__(
        self,
        store: Store,
        config: Config,
        context: ComponentContext,
        embedder: Embedder,
        sources: list[tuple[str, CandidateSource]],
        gate: DecisionBackend | None = None,
        *,
        default_reranker: Any = None,
    ) -> None:
        self._store = store
        self._rerankers = RerankerChooser(context, default_reranker)
        self._config = config
        self._context = context
        self._embedder = embedder
        self._runner = LoopRunner()
        self._gate = WriteGate(
            config.write_gate_role,
            lambda: context.decision_backend(config.write_gate_backend, config.write_gate_role),
            self._runner,
            gate,
        )
        self._writer = Writer(store, embedder, config.namespace)
        self._search = SearchPipeline(store, embedder, sources, config.search)

    # -- properties ------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    @property
    def context(self) -> ComponentContext:
        return self._context

    @property
    def path(self) -> str:
        """Where the store is: its file, or its URL without the password."""
        return self._store.location

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def store(self) -> Store:
        return self._store

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._runner.close()
        self._writer.close()
        self._store.close()

    def __repr__(self) -> str:
        return f"Memory({self.path!r}, namespace={self._config.namespace!r})"

    # -- helpers ---------------------------------------------------------------------------

    def _ns(self, namespace: str | None) -> str:
        return check_namespace(self._config.namespace if namespace is None else namespace)

    @property
    def _space(self) -> EmbedderDescriptor:
        return self._embedder.descriptor

    # -- writes (rankseam.writing.ingest) ---------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        namespace: str | None = None,
        memory_id: str | None = None,
        importance: float = 0.5,
        metadata: Mapping[str, Any] | None = None,
        gate: bool | None = None,
        thread: str | None = None,
        position: float | datetime | None = None,
        derived_from: str | None = None,
    ) -> AddResult:
        """Store a new memory (revision 1). ``gate=True`` (or ``write_gate`` in the config)
        first asks the write gate; a healthy NO stores nothing. The gate waits at most its
        ``timeout_s`` (default 10 s). When it gets no verdict, a fail-open gate (the default)
        stores the memory with ``AddResult.gate.degraded=True``, and a fail-closed gate
        (``[write_gate] failure_policy = "fail_closed"``) raises
        :class:`~rankseam.errors.WriteGateError` and stores nothing.

        Without ``memory_id`` every call stores a new memory under a new random id (running a
        script twice stores everything twice). With ``memory_id`` it is idempotent: an id that
        already holds the same text, importance and metadata is left alone (the result says
        ``unchanged``); an id holding something else is refused — use :meth:`update`.

        ``thread`` names the conversation, session or run the memory belongs to, ``position``
        its place there (a sequence number or a timestamp; a ``datetime`` is stored as its
        POSIX timestamp; in a thread, left out, it is the memory's ``created_at``), and
        ``derived_from`` the id of the memory of the same namespace it was derived from
        (e.g. the message a fact was extracted from). See docs/store.md, "Threads, positions
        and sources"."""
        rec = self._writer.record(
            text,
            namespace,
            memory_id,
            importance,
            metadata or {},
            thread=thread,
            position=position,
            derived_from=derived_from,
        )
        verdict = None
        if gate or (gate is None and self._config.write_gate):
            verdict = self._gate.verdict(rec.text)  # rankseam.writing.gate
            if not verdict.store:
                return AddResult(None, False, verdict)
        ref, written = self._writer.add(rec, same_is_ok=memory_id is not None)
        return AddResult(ref, written, verdict, unchanged=not written)

    def update(
        self,
        memory_id: str,
        text: str,
        *,
        namespace: str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
        thread: str | None = None,
        position: float | datetime | None = None,
        derived_from: str | None = None,
    ) -> MemoryRef:
        """Write a new revision; the previous one stays readable by its ref. ``importance``,
        ``metadata``, ``thread``, ``position`` and ``derived_from`` left out (None) keep the
        previous revision's; given, they replace it (a thread, position or source cannot be
        removed by an update: delete the memory and add it again)."""
        return self._writer.update(
            self._writer.record(
                text,
                namespace,
                memory_id,
                importance,
                metadata,
                thread=thread,
                position=position,
                derived_from=derived_from,
            )
        )

    def delete(self, memory_id: str, *, namespace: str | None = None) -> MemoryRef:
        """Tombstone a memory: search no longer finds it; its revisions stay readable (to
        remove them for good, :meth:`forget` it)."""
        return self._writer.delete(self._ns(namespace), check_memory_id(memory_id))

    def ingest(
        self,
        records: Iterable[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        batch_size: int = 500,
        progress: bool | Callable[[int], None] = False,
    ) -> IngestReport:
        """Bulk-write records (keys: ``text`` (required), ``id``, ``importance``, ``metadata``,
        ``namespace``, ``created_at``, ``thread``, ``position``, ``derived_from``). Each batch
        is one transaction: all or nothing. A known id gets a new revision when its content
        changed, and is left alone otherwise; keys it leaves out keep its previous values.
        ``progress``: True for a tqdm bar (when tqdm is installed), or a callable receiving the
        number of records written per batch."""
        return self._writer.ingest(
            records, namespace=namespace, batch_size=batch_size, progress=progress
        )

    def maintain_index(self, namespace: str | None = None, *, force: bool = False) -> Any:
        """Bring the namespace's ANN index (docs/store.md) up to date now: merge what was
        written since it was built, or build it. Searches do this in the background when it
        is due; call it after a large ingest so that the next search finds it ready. Returns
        the index's manifest, or None when the namespace is below the size where an index is
        used (``force=True`` builds one anyway)."""
        return self._store.maintain_index(
            self._ns(namespace), self._embedder.descriptor, force=force
        )

    def reembed(
        self,
        embedder: str | Embedder | None = None,
        *,
        batch_size: int = 500,
        progress: bool | Callable[[ReembedProgress], None] = False,
        max_memories: int | None = None,
        switch: bool = False,
    ) -> ReembedReport:
        """Give every live memory a vector in ``embedder``'s space (default: the active
        embedder's), in batches of ``batch_size`` (one transaction each; only one batch's
        texts and vectors are in memory). Resumable: what is stored stays, and a later call
        (after a crash, a kill or ``max_memories``) embeds only what is still missing.
        ``max_memories``: stop after that many (``complete`` is then False).

        Safe beside writes and searches, from other threads or processes. While it runs, the
        active space answers searches; this Memory's writes store a vector in both spaces;
        writes of other processes are picked up before it completes. ``switch=True``: once
        the new space covers every live memory, this Memory switches to ``embedder`` at once
        for searches and writes (no write of it falls between the last pass and the switch;
        a search already running finishes in the old space). Other processes, and this store
        when opened again, use the configured embedder: set ``embedder = "NAME"`` in the
        configuration (or ``RANKSEAM_EMBEDDER``) for them (docs/store.md, "Re-embedding").

        ``progress``: True for a tqdm bar on stderr (when tqdm is installed), or a callable
        receiving a :class:`ReembedProgress` at the start and after every batch."""
        if embedder is None:
            emb = self._writer.embedder
        elif isinstance(embedder, str):
            emb = self._context.embedder(embedder)
        else:
            check_embedder(embedder, repr(embedder))
            emb = embedder
        return self._writer.reembed(
            emb,
            batch_size=batch_size,
            progress=progress,
            max_memories=max_memories,
            switch=self._switch_embedder if switch else None,
        )

    def _switch_embedder(self, embedder: Embedder) -> None:
        """Search with ``embedder`` from now on (a switching :meth:`reembed` calls it once its
        space is complete, before the writes switch too)."""
        self._search.use_embedder(embedder)
        self._embedder = embedder

    # -- reads -----------------------------------------------------------------------------

    def get(
        self, memory_id_or_ref: str | MemoryRef, *, namespace: str | None = None
    ) -> StoredMemory:
        """The current revision of a memory id, or exactly the revision a ref cites."""
        if isinstance(memory_id_or_ref, MemoryRef):
            return self._store.get_ref(memory_id_or_ref)
        return self._store.get(self._ns(namespace), check_memory_id(memory_id_or_ref))

    def list(
        self,
        namespace: str | None = None,
        *,
        include_deleted: bool = False,
        where: Mapping[str, Any] | None = None,
        thread: str | None = None,
        since: Any = None,
        until: Any = None,
    ) -> Iterator[StoredMemory]:
        """Current revisions of a namespace, streamed in write order (never the whole store in
        memory); with ``where`` / ``thread`` / ``since`` / ``until`` (as :meth:`search` takes
        them; docs/filters.md), the live ones that pass the filter."""
        ns = self._ns(namespace)
        scope = _where({"where": where, "thread": thread, "since": since, "until": until})
        if scope is None:
            return self._store.iter_memories(ns, include_deleted=include_deleted)
        check_live_filter(include_deleted)
        return self._store.iter_memories(ns, include_deleted=include_deleted, where=scope)

    def namespaces(self) -> builtins.list[str]:
        return self._store.namespaces()

    def stats(self) -> dict[str, Any]:
        out = self._store.stats()
        out["path"] = self.path  # the store's own location, never a password
        out["embedder"] = self._space.to_dict()
        live = out["memories"]
        have = out["vectors_by_space"].get(self._space.key, 0)
        out["vector_coverage"] = round(have / live, 6) if live else 1.0
        return out

    # -- snapshots (docs/snapshots.md) -----------------------------------------------------

    def export_snapshot(
        self, out: str | os.PathLike[str], *, gzip: bool = False, include_feedback: bool = False
    ) -> ExportReport:
        """Write a portable snapshot of the whole store into the new folder ``out``; with
        ``include_feedback=True``, its feedback records too (left out otherwise)."""
        from rankseam.snapshot import export_snapshot

        return export_snapshot(self._store, out, gzip=gzip, include_feedback=include_feedback)

    @staticmethod
    def verify_snapshot(path: str | os.PathLike[str]) -> VerifyReport:
        """Check a snapshot's manifest, checksums and records without importing it."""
        from rankseam.snapshot import verify_snapshot

        return verify_snapshot(path)

    def import_snapshot(self, path: str | os.PathLike[str], *, merge: bool = False) -> ImportReport:
        """Hydrate this store from a snapshot in one transaction. The store must be empty
        unless ``merge=True``; a merge never overwrites a revision the store holds. Feedback
        records the snapshot holds are imported too (after the memories)."""
        from rankseam.snapshot import import_snapshot

        return import_snapshot(
            self._store,
            path,
            merge=merge,
            active_space=self._space,
            feedback_cap=self._config.feedback_max_records,
        )

    # -- search ----------------------------------------------------------------------------

    def _plan(
        self,
        query: object,
        limit: object,
        namespace: str | None,
        reranker: Any,
        reranker_options: Mapping[str, Any] | None,
        pool: int | None,
        on_error: str | None,
        rerank_deadline_s: float | None,
        distinct_sources: bool | None = None,
        scope: Mapping[str, Any] | None = None,
    ) -> SearchPlan:
        ns = self._ns(namespace)
        chosen, notes = self._rerankers.choose(reranker, reranker_options)
        scope = scope or {}
        return self._search.plan(
            query,
            limit,
            ns,
            chosen,
            pool,
            on_error,
            rerank_deadline_s,
            notes,
            distinct_sources,
            where=_where(scope),
            min_score=scope.get("min_score"),
        )

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: str | None = None,
        reranker: Any = CONFIG_DEFAULT,
        reranker_options: Mapping[str, Any] | None = None,
        pool: int | None = None,
        on_error: str | None = None,
        rerank_deadline_s: float | None = None,
        distinct_sources: bool | None = None,
        where: Mapping[str, Any] | None = None,
        thread: str | None = None,
        since: Any = None,
        until: Any = None,
        min_score: float | None = None,
    ) -> SearchResult:
        """Search a namespace. ``reranker``: the configured default when omitted, ``None`` or
        ``"none"`` for the coarse order, a registered name, a reranker object, or a chain: a
        list of them (names, objects, :class:`~rankseam.seam.RerankerSpec` s or tables of
        ``name``, ``options``, ``on_error``, ``deadline_s``), each stage reranking the previous
        one's selection (docs/seam.md, "Reranker chains"). ``pool``: coarse pool size
        (1..200). ``on_error``: ``"fail_closed"`` (raise; also spelt ``"raise"``) or
        ``"fail_open"`` (a visible ``degraded`` status; also spelt ``"coarse"``).
        ``rerank_deadline_s``: the reranker's deadline for this search (default ``[search]
        rerank_deadline_s``, 90 s; docs/seam.md). ``distinct_sources``: a memory goes below the
        others when a memory derived from the same source sits higher (default ``[search]
        distinct_sources``, on; docs/store.md, "Source-aware selection").

        ``where``: a filter over metadata keys and the memory's fields (``{"topic": "food"}``,
        ``{"year": {"$gte": 2020}}``, ``{"$or": [...]}``; docs/filters.md), applied inside
        each channel's query before the pool is cut; ``thread``: only this thread's memories;
        ``since`` / ``until``: created at or after / before (a datetime, an ISO 8601 string
        or POSIX seconds); ``min_score``: no hit whose fused score is below it."""
        plan = self._plan(
            query,
            limit,
            namespace,
            reranker,
            reranker_options,
            pool,
            on_error,
            rerank_deadline_s,
            distinct_sources,
            {
                "where": where,
                "thread": thread,
                "since": since,
                "until": until,
                "min_score": min_score,
            },
        )
        return self._search.finish(plan, self._search.coarse(plan), self._runner)

    async def asearch(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: str | None = None,
        reranker: Any = CONFIG_DEFAULT,
        reranker_options: Mapping[str, Any] | None = None,
        pool: int | None = None,
        on_error: str | None = None,
        rerank_deadline_s: float | None = None,
        distinct_sources: bool | None = None,
        where: Mapping[str, Any] | None = None,
        thread: str | None = None,
        since: Any = None,
        until: Any = None,
        min_score: float | None = None,
    ) -> SearchResult:
        """:meth:`search` for async code (the store is read in a worker thread). The reranker
        runs on the caller's event loop: the deadline holds for every reranker that awaits
        or is synchronous, but one that blocks the loop with synchronous code in an
        ``async def`` blocks the caller's loop with it (docs/seam.md)."""
        plan = self._plan(
            query,
            limit,
            namespace,
            reranker,
            reranker_options,
            pool,
            on_error,
            rerank_deadline_s,
            distinct_sources,
            {
                "where": where,
                "thread": thread,
                "since": since,
                "until": until,
                "min_score": min_score,
            },
        )
        import asyncio  # on first use: a synchronous caller never imports asyncio

        coarse = await asyncio.to_thread(self._search.coarse, plan)
        return await self._search.afinish(plan, coarse)
