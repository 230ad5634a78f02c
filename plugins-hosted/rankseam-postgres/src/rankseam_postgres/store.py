"""The PostgreSQL store: namespaces, immutable revisions, tombstones, full text and pgvector
(its search snapshot is :mod:`.reader`, the rows of a write transaction :mod:`.writer`).

It keeps the embedded store's semantics (docs/store.md) on a server that many processes and
machines share:

- **Writes.** Every write is one transaction. Its first statement bumps the version of each
  namespace it writes to, in sorted order; that row lock serialises the writers of one
  namespace (as SQLite's write lock serialises all of them) while writers of other namespaces
  run in parallel. A batch is all or nothing: a process killed mid-batch leaves nothing of it.
- **Reads.** A search reads its coarse pool in one ``REPEATABLE READ READ ONLY`` transaction
  (one snapshot) and releases it before any reranker runs. Revision rows never change after
  they are written (only ``live`` goes from true to false), so a hit's text always belongs to
  the revision it cites.
- **Connections.** A ``psycopg_pool.ConnectionPool`` per store object and server (``?pool_min=``
  / ``?pool_max=``, default 1 / 10); the pgvector type adapter is registered on each
  connection. Every wait is bounded by ``connect_timeout``; a server that cannot be reached
  raises :class:`~rankseam.errors.StoreUnavailableError`, and searches may go to standbys
  (``replica=``): :mod:`.pools`.
- **Secrets.** The URL's password never leaves :class:`~rankseam_postgres.url.StoreURL`:
  ``path``, ``repr``, ``stats()`` and every error show the redacted URL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from typing import Any

import numpy as np
import psycopg
from psycopg_pool import PoolTimeout

from rankseam.errors import ConfigurationError, ValidationError
from rankseam.plugin.embedders import EmbedderDescriptor
from rankseam.plugin.stores import (
    Filter,
    Forgotten,
    MemoryNotFoundError,
    PageFetch,
    PendingText,
    StoredMemory,
    VectorItem,
    memory_pages,
    pending_pages,
    store_stats,
)
from rankseam.types import MemoryRef
from rankseam_postgres.feedback import PostgresFeedback
from rankseam_postgres.filters import compile_where
from rankseam_postgres.forget import forget_memories, forgotten_at, history, missing
from rankseam_postgres.pools import Router, configuration_error
from rankseam_postgres.reader import EXACT_BELOW, PostgresReader
from rankseam_postgres.schema import (
    SCHEMA_VERSION,
    beyond_half,
    build_space_index,
    ensure_schema,
    ensure_space_index,
    half_precision_error,
    index_kind,
    vacuum_lexical,
)
from rankseam_postgres.siblings import ConcurrentPostgresReader
from rankseam_postgres.tables import Executes, Tables, vector_array
from rankseam_postgres.url import StoreURL, parse_url
from rankseam_postgres.writer import RowWriter

__all__ = ["PostgresStore"]

_PAGE = 500


class PostgresStore(PostgresFeedback):
    """A rankseam store in a PostgreSQL database. Thread-safe: a connection pool serves the
    threads of a process; any number of processes and machines may open the same URL."""

    def __init__(
        self, url: str | StoreURL, *, create: bool = True, exact_below: int = EXACT_BELOW
    ) -> None:
        """Open the store at ``url``, creating its schema (``create=True``) or refusing a
        missing one, and migrating an older one."""
        self.url = url if isinstance(url, StoreURL) else parse_url(url)
        self.schema = self.url.schema
        self.exact_below = exact_below
        self.tables = Tables(self.schema)
        self._memo: dict[tuple[Any, ...], int] = {}
        self._memo_lock = threading.Lock()
        self._half: dict[str, bool] = {}
        self._closed = False
        opened: str | None = None
        try:
            extra: dict[str, Any] = dict(self.url.connect_kwargs)
            with psycopg.connect(self.url.conninfo, autocommit=True, **extra) as conn:
                self.text_search = ensure_schema(
                    conn,
                    schema=self.schema,
                    text_search=self.url.text_search,
                    display=self.url.display,
                    create=create,
                )
                if self.url.replicas:
                    # read-your-writes from the start: what the primary holds now (the
                    # schema's creation or migration, by this process or another) counts as
                    # written by this store object, so no search reads a standby that has
                    # not replayed it
                    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
                    opened = str(row[0]) if row else None
        except psycopg.Error as exc:
            raise self._error("cannot open", exc) from None
        self._router = Router(self.url, f"rankseam:{self.schema}")
        self._router.wrote(opened)
        try:
            self._router.open()
        except (psycopg.Error, PoolTimeout) as exc:
            self._router.close()
            raise self._error("cannot connect to", exc) from None

    # -- identity ----------------------------------------------------------------------------

    kind = "postgres"

    @property
    def location(self) -> str:
        """The store's redacted URL (no password)."""
        return self.url.display

    @property
    def path(self) -> str:
        return self.url.display

    @property
    def tokenizer(self) -> str:
        """The text search configuration (what lexical scores depend on), e.g. ``english``."""
        return self.text_search

    @property
    def schema_version(self) -> int:
        return SCHEMA_VERSION

    def __repr__(self) -> str:
        return f"PostgresStore({self.url.display!r})"

    def _error(self, what: str, exc: BaseException) -> ConfigurationError:
        return configuration_error(self.url, what, exc)

    # -- memo --------------------------------------------------------------------------------

    def cached_count(self, key: tuple[Any, ...], compute: Callable[[], int]) -> int:
        """A small memo for counts readers compute (keys carry the namespace version)."""
        value = self._memo.get(key)
        if value is None:
            value = compute()
            with self._memo_lock:
                if len(self._memo) > 4096:
                    self._memo.clear()
                self._memo[key] = value
        return value

    # -- connections and transactions --------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ValidationError(f"the store {self.url.display} is closed; open it again")

    def _fetch(self, query: Any, args: Any = None, *, one: bool = False) -> Any:
        self._check_open()
        return self._router.fetch(query, args, one=one)

    def _connection(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        self._check_open()
        return self._router.connection()

    def _transaction(self, begin: str) -> AbstractContextManager[psycopg.Connection[Any]]:
        self._check_open()
        return self._router.transaction(begin)

    @contextmanager
    def _write(self, namespaces: Sequence[str], *, vectors: bool = False) -> Iterator[RowWriter]:
        """One write transaction that first locks each namespace it writes to, in sorted
        order (the writers of one namespace take turns; others run in parallel). Yields the
        transaction's row writer; the namespaces it wrote to get a new version (and, with
        ``vectors``, a new vector epoch) when it commits."""
        with self._transaction("BEGIN") as conn:
            versions = {ns: self._lock(conn, ns) for ns in sorted(set(namespaces))}
            writer = RowWriter(self, conn, versions, vectors=vectors)
            try:
                yield writer
                writer.finish()
            except psycopg.errors.DataError as exc:
                raise ValidationError(
                    f"PostgreSQL refused a value: {self.url.scrub(str(exc).splitlines()[0])}"
                ) from None
            except psycopg.errors.ProgramLimitExceeded as exc:
                raise ValidationError(
                    f"PostgreSQL refused a memory: {str(exc).splitlines()[0]}; split the text "
                    "into several memories"
                ) from None

    def _lock(self, conn: psycopg.Connection[Any], namespace: str) -> int:
        """Lock the namespace's row (creating it); the version this transaction commits."""
        row = conn.execute(
            self.tables(
                "INSERT INTO {namespaces}(name) VALUES (%s) ON CONFLICT (name) DO UPDATE "
                "SET version = {namespaces}.version RETURNING version"
            ),
            (namespace,),
        ).fetchone()
        return int(row[0]) + 1  # type: ignore[index]

    @property
    def reader_type(self) -> type:
        """The class of the snapshots :meth:`read` yields (the host checks a channel's reader
        capabilities against it when a Memory opens the store, without a transaction)."""
        return ConcurrentPostgresReader if self.url.concurrent_channels else PostgresReader

    @contextmanager
    def read(self) -> Iterator[PostgresReader]:
        """One short read transaction (a consistent snapshot) for a search, on a standby when
        the URL names some (read-your-writes: see :mod:`.pools`); never held while
        reranking. ``search_timeout`` is its ``statement_timeout``."""
        self._check_open()
        with self._router.search() as (server, conn):
            if self.url.concurrent_channels:
                yield ConcurrentPostgresReader(self, conn, self._router, server)
            else:
                yield PostgresReader(self, conn)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._router.close()

    # -- spaces ------------------------------------------------------------------------------

    def register_space(self, descriptor: EmbedderDescriptor) -> None:
        with self._transaction("BEGIN") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rankseam:{self.schema}",))
            ensure_space_index(conn, self.schema, descriptor.key, dict(descriptor.to_dict()))

    def half_space(self, conn: Executes, space: str) -> bool:
        """Whether the index of ``space`` holds its vectors in half precision (an
        L2-normalised space: :func:`~rankseam_postgres.schema.index_kind`), read from
        ``spaces`` on ``conn`` (a write's transaction sees the space it registered) once per
        store: a space's key fixes its metric."""
        known = self._half.get(space)
        if known is None:
            row = conn.execute(
                self.tables("SELECT metric FROM {spaces} WHERE key = %s"), (space,)
            ).fetchone()
            if row is None:  # not registered (yet): nothing to hold it to
                return False
            known = self._half[space] = index_kind(str(row[0])) == "halfvec"
        return known

    def check_vector(
        self, conn: Executes, space: str, vector: Any, where: str | Callable[[], str]
    ) -> None:
        """Refuse (:class:`~rankseam.errors.ValidationError`) a vector the index of ``space``
        cannot hold: a component beyond :data:`~rankseam_postgres.schema.HALF_MAX` in an
        L2-normalised space. ``where`` names its memory (or says it, when asked)."""
        if self.half_space(conn, space):
            found = beyond_half(vector)
            if found is not None:
                raise half_precision_error(
                    space, where if isinstance(where, str) else where(), *found
                )

    # -- writes ------------------------------------------------------------------------------

    @contextmanager
    def batch(self, namespaces: Sequence[str], /) -> Iterator[RowWriter]:
        """ONE write transaction in which the host applies planned writes; the namespaces
        are locked first, in sorted order."""
        with self._write(namespaces) as writer:
            yield writer

    def put_vectors(self, items: Sequence[VectorItem], /, *, space: str) -> None:
        """Store each item's vector in ``space`` (one transaction)."""
        if not items:
            return
        with self._write([item.namespace for item in items], vectors=True) as writer:
            for ns in {item.namespace for item in items}:
                writer.touch(ns)
            for item in items:
                self.check_vector(
                    writer.conn,
                    space,
                    item.vector,
                    partial(_named, writer.conn, self, item),
                )
            with writer.conn.cursor() as cur:
                cur.executemany(
                    self.tables(
                        "INSERT INTO {vectors}(namespace, space, rid, live, vector) "
                        "SELECT r.namespace, %s, r.rid, r.live, %s FROM {revisions} r "
                        "WHERE r.namespace = %s AND r.rid = %s "
                        "ON CONFLICT (namespace, space, rid) DO UPDATE SET vector = "
                        "excluded.vector"
                    ),
                    [
                        (space, np.asarray(item.vector, dtype=np.float32), item.namespace, item.key)
                        for item in items
                    ],
                )

    def forget(self, namespace: str, memory_ids: Sequence[str], /) -> Forgotten:
        """Hard-delete memories (:mod:`rankseam_postgres.forget`)."""
        return self._forget(namespace, list(memory_ids))

    def reset(self, namespace: str, /) -> Forgotten:
        """Hard-delete every memory of ``namespace``."""
        return self._forget(namespace, None)

    def _forget(self, namespace: str, memory_ids: list[str] | None) -> Forgotten:
        with self._transaction("BEGIN") as conn:
            version = self._lock(conn, namespace)
            return forget_memories(conn, self.tables, version, namespace, memory_ids)

    # -- reads -------------------------------------------------------------------------------

    def history(self, namespace: str, memory_id: str, /) -> list[StoredMemory]:
        """Every revision of a memory, oldest first, with its tombstone state."""
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as conn:
            return history(conn, self.tables, namespace, memory_id)

    def get(self, namespace: str, memory_id: str) -> StoredMemory:
        row = self._fetch(
            self.tables(
                f"SELECT {StoredMemory.COLUMNS}, m.deleted FROM {{memories}} m "
                "JOIN {revisions} r ON r.namespace = m.namespace AND r.rid = m.head_rid "
                "WHERE m.namespace = %s AND m.memory_id = %s"
            ),
            (namespace, memory_id),
            one=True,
        )
        if row is None:
            with self._connection() as conn:
                raise missing(conn, self.tables, namespace, memory_id)
        return StoredMemory.from_row(row)

    def get_ref(self, ref: MemoryRef) -> StoredMemory:
        row = self._fetch(
            self.tables(
                f"SELECT {StoredMemory.COLUMNS}, m.deleted FROM {{revisions}} r "
                "JOIN {memories} m ON m.namespace = r.namespace AND m.memory_id = "
                "r.memory_id WHERE r.namespace = %s AND r.memory_id = %s AND r.revision = %s"
            ),
            (ref.namespace, ref.memory_id, ref.revision),
            one=True,
        )
        if row is None:
            with self._connection() as conn:
                at = forgotten_at(conn, self.tables, ref.namespace, ref.memory_id)
            if at is not None:
                raise MemoryNotFoundError.forgotten(ref.namespace, ref.memory_id, at)
            raise MemoryNotFoundError.no_revision(ref)
        return StoredMemory.from_row(row)

    def _page(self, query: Any, args: Callable[[int], Any]) -> PageFetch:
        """A page query for :func:`~rankseam.plugin.stores.memory_pages` and
        :func:`~rankseam.plugin.stores.pending_pages`, on a pooled connection per page."""

        def fetch(after: int) -> list[Any]:
            return list(self._fetch(query, args(after)))

        return fetch

    def iter_memories(
        self, namespace: str, *, include_deleted: bool = False, where: Filter | None = None
    ) -> Iterator[StoredMemory]:
        """Current revisions, streamed page by page (no transaction held between pages);
        with ``where``, the live ones that pass it."""
        cond = "(r.live OR (m.deleted AND m.head_rid = r.rid))" if include_deleted else "r.live"
        args: dict[str, Any] = {"ns": namespace, "page": _PAGE}
        if where is not None:
            if include_deleted:
                raise ValidationError(
                    "where= filters live memories; list deleted memories without a filter"
                )
            condition, filter_args = compile_where(where)
            cond = f"{cond} AND {condition}"
            args.update(filter_args)
        query = self.tables(
            f"SELECT {StoredMemory.COLUMNS}, m.deleted FROM {{revisions}} r JOIN {{memories}} "
            "m ON m.namespace = r.namespace AND m.memory_id = r.memory_id "
            f"WHERE r.namespace = %(ns)s AND r.rid > %(after)s AND {cond} ORDER BY r.rid "
            "LIMIT %(page)s"
        )
        return memory_pages(self._page(query, lambda after: {**args, "after": after}))

    def iter_missing_vectors(
        self, space: str, /, *, page: int = _PAGE
    ) -> Iterator[list[PendingText]]:
        """Pages of live revisions without a vector in ``space``."""
        query = self.tables(
            "SELECT r.rid, r.namespace, r.text FROM {revisions} r WHERE r.rid > %s AND r.live "
            "AND NOT EXISTS (SELECT 1 FROM {vectors} v WHERE v.namespace = r.namespace AND "
            "v.space = %s AND v.rid = r.rid) ORDER BY r.rid LIMIT %s"
        )
        return pending_pages(self._page(query, lambda after: (after, space, page)))

    def fetch_vectors(
        self, refs: Sequence[MemoryRef], descriptor: EmbedderDescriptor
    ) -> np.ndarray | list[np.ndarray | None]:
        """The stored vectors of ``refs`` in ``descriptor``'s space (one statement)."""
        if not refs:
            return []
        rows = self._fetch(
            self.tables(
                "SELECT w.i, v.vector FROM unnest(%s::text[], %s::text[], %s::int[]) "
                "WITH ORDINALITY AS w(namespace, memory_id, revision, i) "
                "JOIN {revisions} r ON r.namespace = w.namespace AND r.memory_id = "
                "w.memory_id AND r.revision = w.revision JOIN {vectors} v ON v.namespace = "
                "r.namespace AND v.space = %s AND v.rid = r.rid"
            ),
            (
                [r.namespace for r in refs],
                [r.memory_id for r in refs],
                [r.revision for r in refs],
                descriptor.key,
            ),
        )
        found = {int(i): v for i, v in rows}
        return vector_array([found.get(i + 1) for i in range(len(refs))], descriptor.dimensions)

    def vectors_of(
        self, rids: Sequence[int | None], descriptor: EmbedderDescriptor
    ) -> np.ndarray | list[np.ndarray | None]:
        """The stored vectors of revision rows known by key (``None``: no such row)."""
        wanted = [rid for rid in rids if rid is not None]
        found: dict[int, Any] = {}
        if wanted:
            rows = self._fetch(
                self.tables("SELECT rid, vector FROM {vectors} WHERE space = %s AND rid = ANY(%s)"),
                (descriptor.key, wanted),
            )
            found = {int(r): v for r, v in rows}
        return vector_array(
            [None if rid is None else found.get(rid) for rid in rids], descriptor.dimensions
        )

    def namespaces(self) -> list[str]:
        rows = self._fetch(
            self.tables(
                'SELECT namespace FROM {memories} GROUP BY namespace ORDER BY namespace COLLATE "C"'
            )
        )
        return [r[0] for r in rows]

    def stats(self, space: str | None = None) -> dict[str, Any]:
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as conn:
            memories = conn.execute(
                self.tables(
                    "SELECT namespace, count(*) FILTER (WHERE NOT deleted), "
                    "count(*) FILTER (WHERE deleted) FROM {memories} GROUP BY namespace "
                    "ORDER BY namespace"
                )
            ).fetchall()
            revisions = conn.execute(
                self.tables("SELECT namespace, count(*) FROM {revisions} GROUP BY namespace")
            ).fetchall()
            vectors = conn.execute(
                self.tables("SELECT space, count(*) FROM {vectors} WHERE live GROUP BY space")
            ).fetchall()
            size = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s "
                "AND c.relkind IN ('r', 'S')",
                (self.schema,),
            ).fetchone()
        return store_stats(
            {
                "path": self.url.display,
                "backend": "postgresql",
                "schema": self.schema,
                "schema_version": SCHEMA_VERSION,
                "tokenizer": self.tokenizer,
                "bytes": int(size[0]) if size else 0,
            },
            memories=memories,
            revisions=revisions,
            vectors=vectors,
            extra={
                "pool": {"min_size": self.url.pool_min, "max_size": self.url.pool_max},
                "connect_timeout": self.url.connect_timeout,
                "search_timeout": self.url.search_timeout,
                **self._router.stats(),
            },
        )

    # -- index maintenance -------------------------------------------------------------------

    def maintain_index(
        self, namespace: str, descriptor: EmbedderDescriptor, /, *, force: bool = False
    ) -> dict[str, Any] | None:
        """Build the HNSW index of ``descriptor``'s space once ``namespace`` has
        :attr:`exact_below` live memories (or at once with ``force``); None when it is not
        needed yet. PostgreSQL keeps a built index current with every write, so this builds
        at most once per space (``rankseam ingest`` calls it after a large ingest). The build
        is ``CREATE INDEX CONCURRENTLY``: writes and searches go on meanwhile; until it is
        valid, searches compare every vector."""
        with self._connection() as conn:
            row = conn.execute(
                self.tables("SELECT live_count FROM {namespaces} WHERE name = %s"), (namespace,)
            ).fetchone()
            live = int(row[0]) if row else 0
            if not force and live < self.exact_below:
                return None
            started = time.perf_counter()
            vacuum_lexical(conn, self.schema)
            name = build_space_index(
                conn,
                self.schema,
                descriptor.key,
                descriptor.dimensions,
                "ip" if descriptor.normalization == "l2" else "cosine",
            )
        if name is None:
            return None
        return {
            "index": name,
            "space": descriptor.key,
            "kind": "hnsw",
            "seconds": round(time.perf_counter() - started, 3),
        }

    # -- bulk (snapshots) --------------------------------------------------------------------

    @contextmanager
    def bulk_read(self) -> Iterator[Any]:
        """The whole store in one read transaction (what an export reads)."""
        from rankseam_postgres.bulk import PostgresBulkReader

        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as conn:
            yield PostgresBulkReader(self, conn)

    @contextmanager
    def bulk_write(self) -> Iterator[Any]:
        """One write transaction for bulk rows (what an import writes): all or nothing."""
        from rankseam_postgres.bulk import PostgresBulkWriter

        with self._transaction("BEGIN") as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"rankseam:{self.schema}",))
            writer = PostgresBulkWriter(self, conn)
            try:
                yield writer
                writer.finish()
            except psycopg.errors.DataError as exc:
                raise ValidationError(
                    f"PostgreSQL refused a value of the import: "
                    f"{self.url.scrub(str(exc).splitlines()[0])}; nothing was imported"
                ) from None


def _named(conn: Executes, store: PostgresStore, item: VectorItem) -> str:
    """The memory whose revision row ``item`` names, in words (for an error)."""
    row = conn.execute(
        store.tables(
            "SELECT memory_id, revision FROM {revisions} WHERE namespace = %s AND rid = %s"
        ),
        (item.namespace, item.key),
    ).fetchone()
    if row is None:
        return f"the revision row {item.key} of namespace {item.namespace!r}"
    return f"the memory {row[0]!r} of namespace {item.namespace!r} (revision {row[1]})"
