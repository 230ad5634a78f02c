"""The embedded SQLite store object: connections, transactions, writes and reads outside a
search (the search's snapshot is :mod:`.reader`).

Concurrency model:

- One connection per thread (WAL mode), so readers never wait for writers.
- Every write is one ``BEGIN IMMEDIATE`` transaction: a bulk ingest batch is all or nothing,
  so a process killed mid-ingest leaves every committed batch and nothing of the others.
- A search reads its coarse pool inside one short read transaction (:meth:`SQLiteStore.read`)
  and releases it before any reranker runs. Revision rows never change after they are written,
  so the text of a hit always belongs to the revision it cites.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.errors import ConfigurationError, StoreError, ValidationError
from rankseam.sqlite import ann as ann_module
from rankseam.sqlite.ann import AnnIndexes, AnnManifest
from rankseam.sqlite.bulk import SQLiteBulkReader, SQLiteBulkWriter
from rankseam.sqlite.feedback import SQLiteFeedback
from rankseam.sqlite.filters import compile_where
from rankseam.sqlite.forget import checkpoint, forget_memories, forgotten_at
from rankseam.sqlite.lexical_cache import LexicalIndexes
from rankseam.sqlite.reader import FactsCache, RowsCache, SQLiteReader, chunks
from rankseam.sqlite.rows import bump
from rankseam.sqlite.schema import (
    PAGE_SIZE,
    SCHEMA_VERSION,
    TOKENIZERS,
    check_identity,
    ensure_schema,
)
from rankseam.sqlite.vector_cache import VectorCache, decode_vectors, encode_vector
from rankseam.sqlite.writer import SQLiteBatchWriter
from rankseam.store.filters import Filter, check_live_filter
from rankseam.store.listing import memory_pages, pending_pages, store_stats
from rankseam.store.records import MemoryNotFoundError, StoredMemory
from rankseam.store.rows import Forgotten, PendingText, VectorItem
from rankseam.types import MemoryRef

__all__ = ["CACHE_KIB", "SQLiteStore", "storage_error"]

T = TypeVar("T")

#: Identities per vector-fetch statement (3 parameters each, well under SQLite's limit).
_FETCH_CHUNK = 250

log = logging.getLogger("rankseam.store")

_PAGE = 500
#: Page cache of each connection, in KiB.
CACHE_KIB = 64 * 1024


def storage_error(exc: sqlite3.DatabaseError, path: str) -> StoreError | None:
    """The :class:`StoreError` an SQLite error stands for when its cause is the disk, not
    the data (``None`` otherwise)."""
    name = getattr(exc, "sqlite_errorname", None) or ""
    text = str(exc)
    if name == "SQLITE_FULL" or "database or disk is full" in text:
        return StoreError(
            f"the store {path!r} cannot be written: the disk is full (SQLITE_FULL: {text}); "
            "nothing of the failed write was stored: free some disk space and try again",
            reason="full",
        )
    if name.startswith("SQLITE_IOERR") or "disk I/O error" in text:
        return StoreError(
            f"the store {path!r} hit an I/O error ({name or 'SQLITE_IOERR'}: {text}); nothing "
            "of the failed write was stored: check the disk and try again",
            reason="io",
        )
    if name.startswith("SQLITE_READONLY"):
        return StoreError(
            f"the store {path!r} is read-only here ({name}: {text}); check the permissions of "
            "the file and its folder",
            reason="readonly",
        )
    return None


class SQLiteStore(SQLiteFeedback):
    """The embedded store in one SQLite file. Thread-safe; one connection per thread.
    Implements :class:`rankseam.store.contract.Store` and, with :class:`SQLiteFeedback`,
    :class:`rankseam.store.feedback.FeedbackStore`."""

    kind = "sqlite"
    schema_version = SCHEMA_VERSION

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tokenizer: str = "porter",
        timeout_s: float = 30.0,
        ann: bool | int = True,
    ) -> None:
        """``ann``: search namespaces × spaces of at least
        :data:`~rankseam.sqlite.ann.MIN_VECTORS` vectors through an ANN index (True), of at
        least that many (an integer), or never (False)."""
        self._tempdir: str | None = None
        if str(path) == ":memory:":
            # Per-thread connections cannot share an in-memory database: use a private temp
            # file instead, removed on close.
            self._tempdir = tempfile.mkdtemp(prefix="rankseam-")
            path = os.path.join(self._tempdir, "memory.sqlite3")
        self.path = str(path)
        self._timeout_s = timeout_s
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self.vector_cache = VectorCache()
        self.ann: AnnIndexes | None = None
        if ann is not False:
            self.ann = AnnIndexes(
                self.path, min_vectors=ann_module.MIN_VECTORS if ann is True else int(ann)
            )
        self._arrays: dict[tuple[Any, ...], np.ndarray] = {}
        self._memo: dict[tuple[Any, ...], int] = {}
        self._versions: dict[tuple[Any, ...], tuple[int, int]] = {}
        self._memo_lock = threading.Lock()
        self.facts = FactsCache()
        self.row_cache = RowsCache()
        # the lexical index of a small store (made once the tokenizer is known)
        self._lexical: LexicalIndexes | None = None
        try:
            Path(self.path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"cannot create the directory of the store {self.path!r}: {exc}; choose "
                "another path (--db / RANKSEAM_DB)"
            ) from None
        try:
            # Refuse another application's file before this connection sets WAL on it.
            check_identity(self.path)
            self.tokenizer = ensure_schema(self._conn(), path=self.path, tokenizer=tokenizer)
            self._lexical = LexicalIndexes(TOKENIZERS[self.tokenizer])
        except BaseException as exc:
            self.close()
            if not isinstance(exc, sqlite3.DatabaseError):
                raise
            error = storage_error(exc, self.path)
            if error is not None:
                raise error from None
            raise ConfigurationError(
                f"cannot open the store {self.path!r}: {exc}; is it an SQLite file? choose "
                "another path (--db / RANKSEAM_DB)"
            ) from None

    @property
    def lexical(self) -> LexicalIndexes:
        """The lexical index of this store (docs/performance.md, "The lexical index of a
        small store")."""
        if self._lexical is None:
            raise ValidationError(f"the store {self.path!r} is closed; open it again")
        return self._lexical

    def cached_count(self, key: tuple[Any, ...], compute: Callable[[], int]) -> int:
        """A small memo for counts its readers compute (keys carry the write version, so a
        write makes every older entry unreachable)."""
        return self._memoised(self._memo, 4096, key, compute)

    def cached_versions(
        self, key: tuple[Any, ...], compute: Callable[[], tuple[int, int]]
    ) -> tuple[int, int]:
        """The same memo for a namespace's (version, vector epoch)."""
        return self._memoised(self._versions, 4096, key, compute)

    def cached_array(self, key: tuple[Any, ...], compute: Callable[[], np.ndarray]) -> np.ndarray:
        """The same memo for arrays, kept to a few entries."""
        return self._memoised(self._arrays, 64, key, compute)

    def _memoised(
        self,
        memo: dict[tuple[Any, ...], T],
        cap: int,
        key: tuple[Any, ...],
        compute: Callable[[], T],
    ) -> T:
        value = memo.get(key)
        if value is None:
            value = compute()
            with self._memo_lock:
                if len(memo) > cap:
                    memo.clear()
                memo[key] = value
        return value

    @property
    def location(self) -> str:
        """The store's file (a path never holds a secret)."""
        return self.path

    # -- the ANN index ---------------------------------------------------------------------

    def maintain_index(
        self, namespace: str, descriptor: EmbedderDescriptor, *, force: bool = False
    ) -> AnnManifest | None:
        """The store contract's name for :meth:`maintain_ann`."""
        return self.maintain_ann(namespace, descriptor, force=force)

    def maintain_ann(
        self, namespace: str, descriptor: EmbedderDescriptor, *, force: bool = False
    ) -> AnnManifest | None:
        """Bring the ANN index of ``namespace`` × ``descriptor``'s space up to date now, on a
        private connection (:meth:`rankseam.sqlite.ann.AnnIndexes.maintain`)."""
        if self.ann is None:
            raise ConfigurationError(
                f"the store {self.path!r} was opened without an ANN index (ann=False)"
            )
        conn = sqlite3.connect(self.path, timeout=self._timeout_s, isolation_level=None)
        try:
            conn.execute(f"PRAGMA busy_timeout={int(self._timeout_s * 1000)}")
            return self.ann.maintain(
                conn,
                namespace,
                descriptor.key,
                descriptor.dimensions,
                descriptor.normalization == "l2",
                force=force,
            )
        finally:
            conn.close()

    def schedule_ann(self, namespace: str, descriptor: EmbedderDescriptor) -> None:
        """:meth:`maintain_ann` in a background thread (one at a time per index)."""
        if self.ann is not None:
            self.ann.schedule(
                namespace, descriptor.key, lambda: self.maintain_ann(namespace, descriptor)
            )

    # -- connections -----------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise ValidationError(f"the store {self.path!r} is closed; open it again")
        conn = sqlite3.connect(
            self.path, timeout=self._timeout_s, isolation_level=None, check_same_thread=False
        )
        conn.execute(f"PRAGMA page_size={PAGE_SIZE}")  # a new file only; before WAL
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        # a 64 MiB page cache per connection (SQLite's default is 2 MiB): a search of a large
        # store re-reads the same FTS, revision and vector pages; 7-12 % less CPU per search
        # at a million memories (docs/benchmarks.md section 7)
        conn.execute(f"PRAGMA cache_size=-{CACHE_KIB}")
        conn.execute(f"PRAGMA busy_timeout={int(self._timeout_s * 1000)}")
        # deleted cells and freed pages are overwritten with zeros: what a forget removes
        # leaves no copy in the file (docs/store.md, "Forgetting"; rankseam.sqlite.forget)
        conn.execute("PRAGMA secure_delete=ON")
        self._local.conn = conn
        with self._conns_lock:
            self._conns.append(conn)
        return conn

    def close(self) -> None:
        if self.ann is not None:
            self.ann.close()  # waits for background maintenance
        self._closed = True
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover - best effort
                pass
        self._local = threading.local()
        self.vector_cache.clear()
        self.row_cache.clear()
        if self._lexical is not None:
            self._lexical.tokenizer.close()
            self._lexical = None
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)
            self._tempdir = None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                # SQLite itself ends the transaction on some errors (a full disk): roll back
                # only what is still open, so the real cause is what the caller sees.
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as exc:
            error = storage_error(exc, self.path)
            if error is None:
                raise
            raise error from None

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    #: The class of the snapshots :meth:`read` yields: what the host checks a channel's reader
    #: capabilities against when a Memory opens the store, without a read transaction.
    reader_type: type = SQLiteReader

    @contextmanager
    def read(self) -> Iterator[SQLiteReader]:
        """One short read transaction (a consistent snapshot); never held while reranking."""
        with self._read() as conn:
            yield SQLiteReader(self, conn)

    @contextmanager
    def bulk_read(self) -> Iterator[SQLiteBulkReader]:
        """The whole store in one read transaction (what an export reads); writers carry on."""
        with self._read() as conn:
            yield SQLiteBulkReader(conn)

    @contextmanager
    def bulk_write(self) -> Iterator[SQLiteBulkWriter]:
        """One write transaction for bulk rows (what an import writes): all or nothing. Every
        namespace written to gets a new version and vector epoch when it commits."""
        with self._write() as conn:
            writer = SQLiteBulkWriter(conn)
            yield writer
            writer.finish()

    # -- writes ----------------------------------------------------------------------------

    def register_space(self, descriptor: EmbedderDescriptor) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO spaces(key, descriptor) VALUES (?, ?)",
                (descriptor.key, json.dumps(descriptor.to_dict(), sort_keys=True)),
            )

    @contextmanager
    def batch(self, namespaces: Sequence[str], /) -> Iterator[SQLiteBatchWriter]:
        """ONE write transaction in which the host applies planned writes (the write lock
        serialises all writers; ``namespaces`` need no lock of their own)."""
        with self._write() as conn:
            writer = SQLiteBatchWriter(conn)
            yield writer
            writer.finish()

    def put_vectors(self, items: Sequence[VectorItem], /, *, space: str) -> None:
        """Store each item's vector in ``space`` (one transaction)."""
        with self._write() as conn:
            conn.executemany(  # a revision forgotten meanwhile gets none
                "INSERT OR REPLACE INTO vectors(space, rid, vector) SELECT ?, ?, ? "
                "WHERE EXISTS (SELECT 1 FROM revisions WHERE rid = ?)",
                [(space, item.key, encode_vector(item.vector), item.key) for item in items],
            )
            for ns in sorted({item.namespace for item in items}):
                bump(conn, ns, space=space)

    def forget(self, namespace: str, memory_ids: Sequence[str], /) -> Forgotten:
        """Hard-delete memories (:mod:`rankseam.sqlite.forget`)."""
        return self._forget(namespace, list(memory_ids))

    def reset(self, namespace: str, /) -> Forgotten:
        """Hard-delete every memory of ``namespace``."""
        return self._forget(namespace, None)

    def _forget(self, namespace: str, memory_ids: list[str] | None) -> Forgotten:
        with self._write() as conn:
            done = forget_memories(conn, namespace, memory_ids)
            spaces = [key for (key,) in conn.execute("SELECT key FROM spaces")]
        if done.memories:
            self.row_cache.clear()  # nothing of an erased memory stays in this process
            if self._lexical is not None:
                self._lexical.clear()
            if self.ann is not None:
                self.ann.discard(namespace, spaces)
            checkpoint(self._conn(), self.path)
        return done

    # -- reads -----------------------------------------------------------------------------

    def _missing(self, namespace: str, memory_id: str) -> MemoryNotFoundError:
        at = forgotten_at(self._conn(), namespace, memory_id)
        if at is not None:
            return MemoryNotFoundError.forgotten(namespace, memory_id, at)
        return MemoryNotFoundError.no_memory(namespace, memory_id)

    def history(self, namespace: str, memory_id: str, /) -> list[StoredMemory]:
        """Every revision of a memory, oldest first, with its tombstone state."""
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {StoredMemory.COLUMNS}, m.deleted FROM memories m JOIN revisions r "
                "ON r.namespace = m.namespace AND r.memory_id = m.memory_id "
                "WHERE m.namespace = ? AND m.memory_id = ? ORDER BY r.revision",
                (namespace, memory_id),
            ).fetchall()
        if not rows:
            raise self._missing(namespace, memory_id)
        return [StoredMemory.from_row(row) for row in rows]

    def get(self, namespace: str, memory_id: str) -> StoredMemory:
        row = (
            self._conn()
            .execute(
                f"SELECT {StoredMemory.COLUMNS}, m.deleted FROM memories m JOIN revisions r "
                "ON r.rid = m.head_rid WHERE m.namespace = ? AND m.memory_id = ?",
                (namespace, memory_id),
            )
            .fetchone()
        )
        if row is None:
            raise self._missing(namespace, memory_id)
        return StoredMemory.from_row(row)

    def get_ref(self, ref: MemoryRef) -> StoredMemory:
        row = (
            self._conn()
            .execute(
                f"SELECT {StoredMemory.COLUMNS}, m.deleted FROM revisions r JOIN memories m "
                "ON m.namespace = r.namespace AND m.memory_id = r.memory_id "
                "WHERE r.namespace = ? AND r.memory_id = ? AND r.revision = ?",
                (ref.namespace, ref.memory_id, ref.revision),
            )
            .fetchone()
        )
        if row is None:
            at = forgotten_at(self._conn(), ref.namespace, ref.memory_id)
            if at is not None:
                raise MemoryNotFoundError.forgotten(ref.namespace, ref.memory_id, at)
            raise MemoryNotFoundError.no_revision(ref)
        return StoredMemory.from_row(row)

    def iter_memories(
        self, namespace: str, *, include_deleted: bool = False, where: Filter | None = None
    ) -> Iterator[StoredMemory]:
        """Current revisions, streamed page by page (no transaction held between pages);
        with ``where``, the live ones that pass it."""
        cond = (
            "(r.live = 1 OR (m.deleted = 1 AND m.head_rid = r.rid))"
            if include_deleted
            else "r.live = 1"
        )
        args: dict[str, object] = {"ns": namespace, "page": _PAGE}
        if where is not None:
            check_live_filter(include_deleted)
            condition, filter_args = compile_where(where, namespace)
            cond = f"{cond} AND {condition}"
            args.update(filter_args)
        query = (
            f"SELECT {StoredMemory.COLUMNS}, m.deleted FROM revisions r JOIN memories m "
            "ON m.namespace = r.namespace AND m.memory_id = r.memory_id "
            f"WHERE r.rid > :after AND r.namespace = :ns AND {cond} ORDER BY r.rid LIMIT :page"
        )
        return memory_pages(
            lambda after: self._conn().execute(query, {**args, "after": after}).fetchall()
        )

    def iter_missing_vectors(
        self, space: str, /, *, page: int = _PAGE
    ) -> Iterator[list[PendingText]]:
        """Pages of live revisions without a vector in ``space``."""
        query = (
            "SELECT r.rid, r.namespace, r.text FROM revisions r WHERE r.rid > ? AND "
            "r.live = 1 AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.space = ? AND "
            "v.rid = r.rid) ORDER BY r.rid LIMIT ?"
        )
        return pending_pages(
            lambda after: self._conn().execute(query, (after, space, page)).fetchall()
        )

    def fetch_vectors(
        self, refs: Sequence[MemoryRef], descriptor: EmbedderDescriptor
    ) -> np.ndarray | list[np.ndarray | None]:
        """One batched read of the stored vectors of ``refs`` in ``descriptor``'s space: the
        read-only ``n × d`` float32 matrix when every ref has one, else one vector or ``None``
        per ref (:func:`~rankseam.sqlite.vector_cache.decode_vectors`).

        Each identity is looked up through the revisions' unique index, then its vector by
        :meth:`vectors_of`: the cost grows with ``len(refs)``, not with the store.
        """
        if not refs:
            return []
        conn = self._conn()
        rid_of: dict[tuple[str, str, int], int] = {}
        for i in range(0, len(refs), _FETCH_CHUNK):
            chunk = refs[i : i + _FETCH_CHUNK]
            wanted = ", ".join("(?, ?, ?)" for _ in chunk)
            args: list[Any] = []
            for ref in chunk:
                args.extend((ref.namespace, ref.memory_id, ref.revision))
            # CROSS JOIN keeps this join order: the wanted identities drive the index lookups
            for ns, mid, rev, rid in conn.execute(
                f"WITH wanted(namespace, memory_id, revision) AS (VALUES {wanted}) "
                "SELECT w.namespace, w.memory_id, w.revision, r.rid FROM wanted w "
                "CROSS JOIN revisions r ON r.namespace = w.namespace "
                "AND r.memory_id = w.memory_id AND r.revision = w.revision",
                args,
            ):
                rid_of[(ns, mid, rev)] = int(rid)
        rids = [rid_of.get((r.namespace, r.memory_id, r.revision)) for r in refs]
        return self.vectors_of(rids, descriptor)

    def vectors_of(
        self, rids: Sequence[int | None], descriptor: EmbedderDescriptor
    ) -> np.ndarray | list[np.ndarray | None]:
        """:meth:`fetch_vectors` for revision rows already known by their key (``None``: no
        such row): one read through the vectors' primary key, decoded together."""
        conn = self._conn()
        found: dict[int, bytes] = {}
        for chunk in chunks([rid for rid in rids if rid is not None]):
            marks = ",".join("?" * len(chunk))
            for rid, blob in conn.execute(
                f"SELECT rid, vector FROM vectors WHERE space = ? AND rid IN ({marks})",
                (descriptor.key, *chunk),
            ):
                found[int(rid)] = blob
        blobs = [None if rid is None else found.get(rid) for rid in rids]
        return decode_vectors(blobs, descriptor.dimensions)

    def namespaces(self) -> list[str]:
        rows = (
            self._conn()
            .execute("SELECT DISTINCT namespace FROM memories ORDER BY namespace")
            .fetchall()
        )
        return [r[0] for r in rows]

    def stats(self, space: str | None = None) -> dict[str, Any]:
        with self._read() as conn:
            memories = conn.execute(
                "SELECT namespace, sum(deleted = 0), sum(deleted = 1) FROM memories "
                "GROUP BY namespace ORDER BY namespace"
            ).fetchall()
            revisions = conn.execute(
                "SELECT namespace, count(*) FROM revisions GROUP BY namespace"
            ).fetchall()
            vectors = conn.execute(
                "SELECT v.space, count(*) FROM vectors v JOIN revisions r ON r.rid = v.rid "
                "WHERE r.live = 1 GROUP BY v.space"
            ).fetchall()
        size = sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))
        return store_stats(
            {
                "path": self.path,
                "schema_version": SCHEMA_VERSION,
                "tokenizer": self.tokenizer,
                "bytes": size,
            },
            memories=memories,
            revisions=revisions,
            vectors=vectors,
            extra={"vector_cache_bytes": self.vector_cache.nbytes()},
        )
