"""The public API: :func:`open_memory` and :class:`Memory`.

``open_memory()`` assembles a store, an embedder, candidate sources and (optionally) a default
reranker from a configuration; every misconfiguration is a
:class:`~rankseam.errors.ConfigurationError` raised here, at open time. ``Memory.search`` builds
the coarse pool in one short read transaction, releases it, and only then hands the pool to
the rerank seam (:func:`rankseam.seam.rerank_pool`).
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import attrs
import numpy as np

from rankseam.compose import ComponentContext, Config, SearchConfig
from rankseam.decision import WRITE_GATE_ROLE, DecisionBackend, GateVerdict, ask_write_gate
from rankseam.embedding import Embedder, EmbedderDescriptor
from rankseam.errors import ConfigurationError, ValidationError
from rankseam.retrieval.base import CandidateSource, SourceRequest, over_fetch
from rankseam.retrieval.fusion import ChannelList, fuse, score_spec_of
from rankseam.seam import (
    MAX_POOL,
    Reranker,
    Vectors,
    as_async_reranker,
    rerank_pool,
    trace_candidates,
    validate_limit,
    validate_on_error,
    validate_pool_size,
)
from rankseam.store.records import (
    MemoryNotFoundError,
    StoredMemory,
    check_created_at,
    check_importance,
    check_memory_id,
    check_namespace,
    check_text,
    content_hash,
    encode_metadata,
)
from rankseam.store.sqlite import PreparedRecord, SQLiteStore, new_memory_id, prepare
from rankseam.types import Hit, MemoryRef, SearchResult, SearchTrace

if TYPE_CHECKING:
    from rankseam.store.snapshot import ExportReport, ImportReport, VerifyReport

__all__ = [
    "MAX_QUERY_BYTES",
    "AddResult",
    "IngestError",
    "IngestReport",
    "Memory",
    "MemoryNotFoundError",
    "ReembedReport",
    "StoredMemory",
    "default_db_path",
    "open_memory",
]

log = logging.getLogger("rankseam.memory")

#: Longest query accepted, in UTF-8 bytes.
MAX_QUERY_BYTES = 64 * 1024
_RECORD_KEYS = frozenset({"text", "id", "importance", "metadata", "namespace", "created_at"})
_TOP_OVERRIDES = {"db", "namespace", "embedder", "write_gate", "write_gate_backend"}
_SEARCH_OVERRIDES = {f.name for f in attrs.fields(SearchConfig)}

T = TypeVar("T")


class _ConfigDefault:
    def __repr__(self) -> str:
        return "<config default>"


_CONFIG_DEFAULT: Any = _ConfigDefault()


@attrs.frozen
class AddResult:
    """What :meth:`Memory.add` did. ``ref`` is None when the write gate said no."""

    ref: MemoryRef | None
    stored: bool
    gate: GateVerdict | None = None


@attrs.frozen
class IngestReport:
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    batches: int = 0
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return self.added + self.updated + self.unchanged

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "added": self.added,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "batches": self.batches,
            "seconds": round(self.seconds, 3),
            "records_per_second": round(self.records / self.seconds, 1) if self.seconds else None,
        }


class IngestError(ValidationError):
    """A record of an ingest is invalid. ``index`` is its 1-based position in the input;
    ``committed`` counts the records of the batches committed before it (nothing of the
    failing batch was written)."""

    def __init__(self, message: str, *, index: int, committed: int) -> None:
        super().__init__(message)
        self.index = index
        self.committed = committed


@attrs.frozen
class ReembedReport:
    space: str
    embedded: int
    seconds: float


def default_db_path() -> Path:
    """The platform's per-user data location for the default store."""
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "rankseam" / "memory.sqlite3"


class _LoopRunner:
    """One private event loop in a daemon thread: runs coroutines for synchronous callers
    (cheaper than a new loop per call, and usable from inside a running loop)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="rankseam-memory-loop", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            loop = self._loop
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError(
                "a synchronous Memory call was made from inside one of its own coroutines; "
                "use the async API (asearch) there"
            )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()


def _complete_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (the seam with no reranker) without a loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("coroutine suspended; it needs an event loop")


def check_query(query: object) -> str:
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


def _check_unicode(text: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValidationError(
            f"{what} is not valid Unicode (it contains a lone surrogate)"
        ) from None


def _apply_overrides(config: Config, overrides: Mapping[str, Any]) -> Config:
    unknown = sorted(set(overrides) - _TOP_OVERRIDES - _SEARCH_OVERRIDES)
    if unknown:
        raise ConfigurationError(
            f"open_memory() got unknown option(s) {unknown}; known options are "
            f"{sorted(_TOP_OVERRIDES | _SEARCH_OVERRIDES)}"
        )
    top = {k: v for k, v in overrides.items() if k in _TOP_OVERRIDES}
    search = {k: v for k, v in overrides.items() if k in _SEARCH_OVERRIDES}
    if search.get("reranker") in ("", "none"):
        search["reranker"] = None
    try:
        return attrs.evolve(config, search=attrs.evolve(config.search, **search), **top)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"open_memory(): {exc}") from None


def _resolve_config(
    path: str | os.PathLike[str] | None,
    config: Config | Mapping[str, Any] | None,
    config_file: str | os.PathLike[str] | None,
    overrides: Mapping[str, Any],
) -> tuple[Config, str]:
    if config is not None and config_file is not None:
        raise ConfigurationError("pass either config= or config_file=, not both")
    if config_file is not None:
        base = Config.from_toml(config_file)
    elif isinstance(config, Config):
        base = config
    elif isinstance(config, Mapping):
        base = Config.from_mapping(config)
    elif config is None:
        base = Config()
    else:
        raise ConfigurationError(
            f"config must be a rankseam.compose.Config or a mapping, got {type(config).__name__}"
        )
    given_db = overrides.get("db") or base.db
    cfg = _apply_overrides(base.with_env(), {k: v for k, v in overrides.items() if k != "db"})
    if path is not None:
        db = os.fspath(path)
    elif given_db:
        db = str(given_db)
    elif os.environ.get("RANKSEAM_DB"):
        db = os.environ["RANKSEAM_DB"]
    else:
        db = str(default_db_path())
    if db != ":memory:":
        db = str(Path(db).expanduser())
    return attrs.evolve(cfg, db=db), db


def open_memory(
    path: str | os.PathLike[str] | None = None,
    *,
    config: Config | Mapping[str, Any] | None = None,
    config_file: str | os.PathLike[str] | None = None,
    create: bool = True,
    **overrides: Any,
) -> Memory:
    """Open (or, with ``create=True``, create) a memory store and assemble its search.

    The database is ``path``, else the configuration's ``db``, else ``RANKSEAM_DB``, else the
    platform default (:func:`default_db_path`). ``config`` is a
    :class:`~rankseam.compose.Config` or a mapping of the ``rankseam.toml`` layout;
    ``config_file`` is a ``rankseam.toml``. Environment overrides (``RANKSEAM_*``, see
    :meth:`Config.with_env`) apply, then keyword ``overrides`` (``namespace``, ``embedder``,
    ``pool``, ``reranker``, ``fusion``, ``sources``, ``on_error``, ...). ``create=False``
    refuses to create a missing database (read-only commands use it).
    """
    cfg, db = _resolve_config(path, config, config_file, overrides)
    if not create and db != ":memory:" and not Path(db).exists():
        raise ConfigurationError(
            f"no rankseam store at {db}; check --db / RANKSEAM_DB, or create one first "
            "(`rankseam add`, `rankseam ingest`, or open_memory(..., create=True))"
        )
    context = ComponentContext(cfg)
    embedder = context.build("embedder", cfg.embedder)
    _check_embedder(embedder, cfg.embedder)
    sources = _build_sources(context, cfg.search.sources)
    if cfg.search.reranker is not None:
        context.reranker(cfg.search.reranker)  # fail at open, not at the first search
    gate = None
    if cfg.write_gate:
        gate = context.decision_backend(cfg.write_gate_backend, WRITE_GATE_ROLE)
    store = SQLiteStore(db)
    try:
        store.register_space(embedder.descriptor)
    except BaseException:
        store.close()
        raise
    return Memory(store, cfg, context, embedder, sources, gate)


def _check_embedder(embedder: Any, name: str) -> None:
    if not isinstance(embedder, Embedder) or not isinstance(
        getattr(embedder, "descriptor", None), EmbedderDescriptor
    ):
        raise ConfigurationError(
            f"embedder {name!r} does not implement the Embedder protocol (a descriptor of type "
            "rankseam.embedding.EmbedderDescriptor and embed(texts) -> float32 array)"
        )


def _build_sources(context: ComponentContext, names: Iterable[str]) -> list[tuple[str, Any]]:
    names = list(names)
    if len(set(names)) != len(names):
        raise ConfigurationError(f"search.sources lists a source twice: {names}")
    out = []
    for name in names:
        source = context.build("candidate_source", name)
        if not isinstance(source, CandidateSource):
            raise ConfigurationError(
                f"candidate source {name!r} does not implement the CandidateSource protocol "
                "(admits, needs_query_vector, candidates(request))"
            )
        out.append((name, source))
    if not any(src.admits for _n, src in out):
        raise ConfigurationError(
            f"search.sources {names} has no source that admits candidates; include 'lexical' "
            "or 'vector'"
        )
    return out


@attrs.frozen
class _SearchPlan:
    query: str
    namespace: str
    limit: int
    pool: int
    on_error: str
    reranker: Reranker | None
    started: float


class Memory:
    """A memory store with search. Thread-safe. Create it with :func:`open_memory`."""

    def __init__(
        self,
        store: SQLiteStore,
        config: Config,
        context: ComponentContext,
        embedder: Embedder,
        sources: list[tuple[str, Any]],
        gate: DecisionBackend | None = None,
    ) -> None:
        self._store = store
        self._config = config
        self._context = context
        self._embedder = embedder
        self._sources = sources
        self._gate = gate
        self._gate_lock = threading.Lock()
        self._runner = _LoopRunner()

    # -- properties ------------------------------------------------------------------------

    @property
    def config(self) -> Config:
        return self._config

    @property
    def context(self) -> ComponentContext:
        return self._context

    @property
    def path(self) -> str:
        return self._store.path

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    @property
    def store(self) -> SQLiteStore:
        return self._store

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._runner.close()
        self._store.close()

    def __repr__(self) -> str:
        return f"Memory({self.path!r}, namespace={self._config.namespace!r})"

    # -- helpers ---------------------------------------------------------------------------

    def _ns(self, namespace: str | None) -> str:
        return check_namespace(self._config.namespace if namespace is None else namespace)

    @property
    def _space(self) -> EmbedderDescriptor:
        return self._embedder.descriptor

    def _embed(self, texts: list[str], embedder: Embedder | None = None) -> np.ndarray:
        emb = embedder or self._embedder
        vectors = np.asarray(emb.embed(texts), dtype=np.float32)
        dims = emb.descriptor.dimensions
        if vectors.shape != (len(texts), dims):
            raise ConfigurationError(
                f"embedder {emb.descriptor.name!r} returned shape {vectors.shape}, expected "
                f"({len(texts)}, {dims}); fix the embedder"
            )
        return vectors

    def _gate_backend(self) -> DecisionBackend:
        with self._gate_lock:
            if self._gate is None:
                self._gate = self._context.decision_backend(
                    self._config.write_gate_backend, WRITE_GATE_ROLE
                )
            return self._gate

    def _record(
        self,
        text: object,
        namespace: str | None,
        memory_id: object,
        importance: object,
        metadata: object,
        created_at: object = None,
    ) -> PreparedRecord:
        checked = check_text(text)
        _check_unicode(checked, "memory text")
        return prepare(
            self._ns(namespace),
            new_memory_id() if memory_id is None else check_memory_id(memory_id),
            checked,
            importance=None if importance is None else check_importance(importance),
            metadata=None if metadata is None else encode_metadata(metadata),
            created_at=check_created_at(created_at),
            content_hash=content_hash(checked),
        )

    # -- writes ----------------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        namespace: str | None = None,
        memory_id: str | None = None,
        importance: float = 0.5,
        metadata: Mapping[str, Any] | None = None,
        gate: bool | None = None,
    ) -> AddResult:
        """Store a new memory (revision 1). ``gate=True`` (or ``write_gate`` in the config)
        first asks the write gate; a healthy NO stores nothing."""
        rec = self._record(text, namespace, memory_id, importance, metadata or {})
        verdict = None
        if gate or (gate is None and self._config.write_gate):
            verdict = self._runner.run(ask_write_gate(self._gate_backend(), rec.text))
            if not verdict.store:
                log.info("write gate declined a memory", extra={"event": "write_gate.no"})
                return AddResult(None, False, verdict)
            if verdict.degraded:
                log.warning(
                    "write gate degraded; storing anyway", extra={"event": "write_gate.degraded"}
                )
        rec = attrs.evolve(rec, vector=self._embed([rec.text])[0])
        ref = self._store.add(rec, space=self._space.key)
        return AddResult(ref, True, verdict)

    def update(
        self,
        memory_id: str,
        text: str,
        *,
        namespace: str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryRef:
        """Write a new revision; the previous one stays readable by its ref. ``importance`` and
        ``metadata`` default to the previous revision's."""
        rec = self._record(text, namespace, memory_id, importance, metadata)
        rec = attrs.evolve(rec, vector=self._embed([rec.text])[0])
        return self._store.update(rec, space=self._space.key)

    def delete(self, memory_id: str, *, namespace: str | None = None) -> MemoryRef:
        """Tombstone a memory: search no longer finds it; its revisions stay readable."""
        return self._store.delete(self._ns(namespace), check_memory_id(memory_id))

    def ingest(
        self,
        records: Iterable[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        batch_size: int = 500,
        progress: bool | Callable[[int], None] = False,
    ) -> IngestReport:
        """Bulk-write records (keys: ``text`` (required), ``id``, ``importance``, ``metadata``,
        ``namespace``, ``created_at``). Each batch is one transaction: all or nothing. A known
        id gets a new revision when its content changed, and is left alone otherwise.
        ``progress``: True for a tqdm bar (when tqdm is installed), or a callable receiving the
        number of records written per batch."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValidationError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        tick, done_bar = _progress(progress)
        started = time.perf_counter()
        totals = [0, 0, 0, 0]
        batch: list[PreparedRecord] = []
        index = 0

        def flush() -> None:
            if not batch:
                return
            vectors = self._embed([r.text for r in batch])
            recs = [attrs.evolve(r, vector=v) for r, v in zip(batch, vectors, strict=True)]
            counts = self._store.write_batch(recs, space=self._space.key)
            totals[0] += counts.added
            totals[1] += counts.updated
            totals[2] += counts.unchanged
            totals[3] += 1
            tick(len(batch))
            batch.clear()

        try:
            for index, raw in enumerate(records, start=1):
                try:
                    batch.append(self._ingest_record(raw, namespace))
                except ValidationError as exc:
                    committed = totals[0] + totals[1] + totals[2]
                    raise IngestError(
                        f"record {index}: {exc}; nothing of its batch was written "
                        f"({committed} earlier record(s) were committed)",
                        index=index,
                        committed=committed,
                    ) from None
                if len(batch) >= batch_size:
                    flush()
            flush()
        finally:
            done_bar()
        return IngestReport(
            totals[0], totals[1], totals[2], totals[3], time.perf_counter() - started
        )

    def _ingest_record(self, raw: object, namespace: str | None) -> PreparedRecord:
        if not isinstance(raw, Mapping):
            raise ValidationError(f"a record must be a JSON object, got {type(raw).__name__}")
        unknown = sorted(set(raw) - _RECORD_KEYS)
        if unknown:
            raise ValidationError(
                f"unknown key(s) {unknown}; a record has {sorted(_RECORD_KEYS)} ('text' required)"
            )
        if "text" not in raw:
            raise ValidationError("the record has no 'text'")
        ns = raw.get("namespace", namespace)
        return self._record(
            raw["text"],
            ns,
            raw.get("id"),
            raw.get("importance"),
            raw.get("metadata"),
            raw.get("created_at"),
        )

    def reembed(
        self, embedder: str | Embedder | None = None, *, batch_size: int = 500
    ) -> ReembedReport:
        """Embed every live memory that has no vector in ``embedder``'s space (default: the
        active embedder). With another embedder, switch to it afterwards with
        ``embedder = "NAME"`` in the configuration (or ``RANKSEAM_EMBEDDER``)."""
        if embedder is None:
            emb = self._embedder
        elif isinstance(embedder, str):
            emb = self._context.build("embedder", embedder)
            _check_embedder(emb, embedder)
        else:
            _check_embedder(embedder, repr(embedder))
            emb = embedder
        space = emb.descriptor
        self._store.register_space(space)
        started = time.perf_counter()
        total = 0
        for page in self._store.iter_missing_vectors(space.key, page=batch_size):
            vectors = self._embed([t for _r, _n, t in page], emb)
            self._store.put_vectors(
                [(rid, ns, vec) for (rid, ns, _t), vec in zip(page, vectors, strict=True)],
                space=space.key,
            )
            total += len(page)
        return ReembedReport(space.key, total, time.perf_counter() - started)

    # -- reads -----------------------------------------------------------------------------

    def get(
        self, memory_id_or_ref: str | MemoryRef, *, namespace: str | None = None
    ) -> StoredMemory:
        """The current revision of a memory id, or exactly the revision a ref cites."""
        if isinstance(memory_id_or_ref, MemoryRef):
            return self._store.get_ref(memory_id_or_ref)
        return self._store.get(self._ns(namespace), check_memory_id(memory_id_or_ref))

    def list(
        self, namespace: str | None = None, *, include_deleted: bool = False
    ) -> Iterator[StoredMemory]:
        """Current revisions of a namespace, streamed (never the whole store in memory)."""
        return self._store.iter_memories(self._ns(namespace), include_deleted=include_deleted)

    def namespaces(self) -> builtins.list[str]:
        return self._store.namespaces()

    def stats(self) -> dict[str, Any]:
        out = self._store.stats()
        out["embedder"] = self._space.to_dict()
        live = out["memories"]
        have = out["vectors_by_space"].get(self._space.key, 0)
        out["vector_coverage"] = round(have / live, 6) if live else 1.0
        return out

    # -- snapshots (docs/snapshots.md) -----------------------------------------------------

    def export_snapshot(self, out: str | os.PathLike[str], *, gzip: bool = False) -> ExportReport:
        """Write a portable snapshot of the whole store into the new folder ``out``."""
        from rankseam.store.snapshot import export_snapshot

        return export_snapshot(self, out, gzip=gzip)

    @staticmethod
    def verify_snapshot(path: str | os.PathLike[str]) -> VerifyReport:
        """Check a snapshot's manifest, checksums and records without importing it."""
        from rankseam.store.snapshot import verify_snapshot

        return verify_snapshot(path)

    def import_snapshot(self, path: str | os.PathLike[str], *, merge: bool = False) -> ImportReport:
        """Hydrate this store from a snapshot in one transaction. The store must be empty
        unless ``merge=True``; a merge never overwrites a revision the store holds."""
        from rankseam.store.snapshot import import_snapshot

        return import_snapshot(self, path, merge=merge)

    # -- search ----------------------------------------------------------------------------

    def _resolve_reranker(
        self, reranker: Any, options: Mapping[str, Any] | None
    ) -> Reranker | None:
        if reranker is _CONFIG_DEFAULT:
            reranker = self._config.search.reranker
        if reranker is None:
            if options:
                raise ValidationError("reranker_options were given but no reranker is chosen")
            return None
        if isinstance(reranker, str):
            if options:
                merged = {**self._config.options("reranker", reranker), **options}
                return self._context.reranker(reranker, merged)  # type: ignore[no-any-return]
            return self._context.reranker(reranker)  # type: ignore[no-any-return]
        if options:
            raise ValidationError("reranker_options apply only to a reranker given by name")
        try:
            return as_async_reranker(reranker)
        except TypeError as exc:
            raise ValidationError(
                f"reranker does not implement the Reranker protocol: {exc}"
            ) from None

    def _plan(
        self,
        query: object,
        limit: object,
        namespace: str | None,
        reranker: Any,
        reranker_options: Mapping[str, Any] | None,
        pool: int | None,
        on_error: str | None,
    ) -> _SearchPlan:
        started = time.perf_counter()
        limit = validate_limit(limit)
        pool = validate_pool_size(self._config.search.pool if pool is None else pool)
        return _SearchPlan(
            query=check_query(query),
            namespace=self._ns(namespace),
            limit=limit,
            # The pool holds at least `limit` hits (up to the 200 bound), so a search for 50
            # hits is never cut to a pool of 30.
            pool=max(pool, min(limit, MAX_POOL)),
            on_error=validate_on_error(
                self._config.search.on_error if on_error is None else on_error
            ),
            reranker=self._resolve_reranker(reranker, reranker_options),
            started=started,
        )

    def _coarse(self, plan: _SearchPlan) -> tuple[builtins.list[Hit], builtins.list[int]]:
        """The coarse pool, read in ONE short read transaction (released before reranking),
        and the revision row of each hit (how the rerank stage fetches their vectors)."""
        space = self._space
        qvec = None
        if any(src.needs_query_vector for _n, src in self._sources):
            qvec = self._embed([plan.query])[0]
        k = over_fetch(plan.pool)
        results: dict[str, builtins.list[tuple[int, float]]] = {}
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
            extra: dict[str, builtins.list[tuple[int, float]]] = {}
            for name, src in self._sources:
                if src.admits and hasattr(src, "score_admitted"):
                    request = SourceRequest(
                        reader, plan.namespace, plan.query, k, qvec, space, admitted
                    )
                    extra[name] = list(src.score_admitted(request))
            refs = reader.identities(admitted)
            channels = [
                ChannelList(
                    name,
                    src.admits,
                    [(key, s) for key, s in results[name] if key in refs],
                    score_spec_of(src, space),
                    [(key, s) for key, s in extra.get(name, ()) if key in refs],
                )
                for name, src in self._sources
            ]
            fused = fuse(
                channels,
                refs.__getitem__,
                method=self._config.search.fusion,
                weights=self._config.search.weights,
                scales=self._config.search.scales,
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

    async def _finish(
        self, plan: _SearchPlan, pool: builtins.list[Hit], rids: builtins.list[int]
    ) -> SearchResult:
        space = self._space

        def fetch_vectors(refs: Sequence[MemoryRef]) -> Vectors:
            rid_of = dict(zip((h.ref for h in pool), rids, strict=True))
            return self._store.vectors_of([rid_of[r] for r in refs], space)

        hits, rerank_trace = await rerank_pool(
            plan.query,
            pool,
            plan.limit,
            plan.reranker,
            on_error=plan.on_error,  # type: ignore[arg-type]
            max_chars=self._config.search.max_chars,
            fetch_vectors=fetch_vectors,
            embedding_space=space.key,
        )
        trace = SearchTrace(
            query=plan.query,
            namespace=plan.namespace,
            limit=plan.limit,
            pool_size=plan.pool,
            coarse=trace_candidates(pool, text=self._config.search.trace_text),
            rerank=rerank_trace,
            latency_ms=(time.perf_counter() - plan.started) * 1000.0,
            channels=tuple(name for name, _s in self._sources),
        )
        return SearchResult(hits, trace)

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: str | None = None,
        reranker: Any = _CONFIG_DEFAULT,
        reranker_options: Mapping[str, Any] | None = None,
        pool: int | None = None,
        on_error: str | None = None,
    ) -> SearchResult:
        """Search a namespace. ``reranker``: the configured default when omitted, ``None`` for
        the coarse order, a registered name, or a reranker object. ``pool``: coarse pool size
        (1..200). ``on_error``: ``"raise"`` (fail closed) or ``"coarse"`` (visible
        ``degraded`` status)."""
        plan = self._plan(query, limit, namespace, reranker, reranker_options, pool, on_error)
        pool_hits, rids = self._coarse(plan)
        if plan.reranker is None:
            return _complete_now(self._finish(plan, pool_hits, rids))
        return self._runner.run(self._finish(plan, pool_hits, rids))

    async def asearch(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: str | None = None,
        reranker: Any = _CONFIG_DEFAULT,
        reranker_options: Mapping[str, Any] | None = None,
        pool: int | None = None,
        on_error: str | None = None,
    ) -> SearchResult:
        """:meth:`search` for async code (the store is read in a worker thread)."""
        plan = self._plan(query, limit, namespace, reranker, reranker_options, pool, on_error)
        pool_hits, rids = await asyncio.to_thread(self._coarse, plan)
        return await self._finish(plan, pool_hits, rids)


def _progress(
    progress: bool | Callable[[int], None],
) -> tuple[Callable[[int], None], Callable[[], None]]:
    if callable(progress):
        return progress, lambda: None
    if not progress:
        return (lambda _n: None), (lambda: None)
    try:
        from tqdm import tqdm
    except ImportError:
        return (lambda _n: None), (lambda: None)
    bar = tqdm(unit="rec", desc="ingest", file=sys.stderr)
    return bar.update, bar.close
