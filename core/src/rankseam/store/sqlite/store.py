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
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from rankseam.embedding import EmbedderDescriptor
from rankseam.errors import ConfigurationError, StoreError, ValidationError
from rankseam.store import ann as ann_module
from rankseam.store.ann import AnnIndexes, AnnManifest
from rankseam.store.bulk import SQLiteBulkReader, SQLiteBulkWriter
from rankseam.store.records import (
    BatchCounts,
    MemoryNotFoundError,
    PreparedRecord,
    StoredMemory,
    plan_write,
)
from rankseam.store.rows import bump, retire
from rankseam.store.schema import (
    PAGE_SIZE,
    SCHEMA_VERSION,
    check_identity,
    ensure_schema,
)
from rankseam.store.sqlite.reader import ROW_COLUMNS, SQLiteReader, chunks, row_to_memory
from rankseam.store.vectors import VectorCache, decode_vectors, encode_vector
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


class SQLiteStore:
    """The embedded store in one SQLite file. Thread-safe; one connection per thread.
    Implements :class:`rankseam.store.contract.Store`."""

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
        :data:`~rankseam.store.ann.MIN_VECTORS` vectors through an ANN index (True), of at
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
        self._memo_lock = threading.Lock()
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

    def cached_count(self, key: tuple[Any, ...], compute: Callable[[], int]) -> int:
        """A small memo for counts its readers compute (keys carry the write version, so a
        write makes every older entry unreachable)."""
        return self._memoised(self._memo, 4096, key, compute)

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
        private connection (:meth:`rankseam.store.ann.AnnIndexes.maintain`)."""
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

    @staticmethod
    def _insert(
        conn: sqlite3.Connection,
        rec: PreparedRecord,
        revision: int,
        importance: float,
        metadata: str,
        space: str | None,
    ) -> int:
        cur = conn.execute(
            "INSERT INTO revisions(namespace, memory_id, revision, text, importance, metadata, "
            "created_at, content_hash, live) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1)",
            (
                rec.namespace,
                rec.memory_id,
                revision,
                rec.text,
                importance,
                metadata,
                rec.created_at,
                rec.content_hash,
            ),
        )
        rid = int(cur.lastrowid or 0)
        conn.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (rid, rec.text))
        if rec.vector is not None and space is not None:
            conn.execute(
                "INSERT INTO vectors(space, rid, vector) VALUES (?, ?, ?)",
                (space, rid, encode_vector(rec.vector)),
            )
        conn.execute(
            "INSERT INTO memories(namespace, memory_id, head_rid, head_revision, deleted, "
            "deleted_at) VALUES (?, ?, ?, ?, 0, NULL) ON CONFLICT(namespace, memory_id) DO UPDATE "
            "SET head_rid = excluded.head_rid, head_revision = excluded.head_revision, "
            "deleted = 0, deleted_at = NULL",
            (rec.namespace, rec.memory_id, rid, revision),
        )
        return rid

    def register_space(self, descriptor: EmbedderDescriptor) -> None:
        with self._write() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO spaces(key, descriptor) VALUES (?, ?)",
                (descriptor.key, json.dumps(descriptor.to_dict(), sort_keys=True)),
            )

    def add(
        self, rec: PreparedRecord, *, space: str | None, same_is_ok: bool = False
    ) -> tuple[MemoryRef, bool]:
        """Add a new memory; returns its ref and True. An id that is live is refused, except
        with ``same_is_ok`` when its head revision has the same text, importance and metadata:
        then nothing is written and the answer is that revision's ref and False."""
        with self._write() as conn:
            head = conn.execute(
                "SELECT m.head_revision, m.deleted, r.content_hash, r.importance, r.metadata "
                "FROM memories m JOIN revisions r ON r.rid = m.head_rid "
                "WHERE m.namespace = ? AND m.memory_id = ?",
                (rec.namespace, rec.memory_id),
            ).fetchone()
            if head is not None and not head[1]:
                rev, _deleted, chash, importance, metadata = head
                same = (chash, importance, metadata) == (
                    rec.content_hash,
                    0.5 if rec.importance is None else rec.importance,
                    rec.metadata or "{}",
                )
                if same_is_ok and same:
                    return MemoryRef(rec.namespace, rec.memory_id, rev), False
                raise ValidationError(
                    f"memory {rec.memory_id!r} already exists in namespace {rec.namespace!r} "
                    "with a different text, importance or metadata; use update() to write a new "
                    "revision, or choose another id"
                    if same_is_ok
                    else f"memory {rec.memory_id!r} already exists in namespace "
                    f"{rec.namespace!r}; use update() to write a new revision, or choose another id"
                )
            revision = head[0] + 1 if head else 1
            self._insert(
                conn,
                rec,
                revision,
                rec.importance if rec.importance is not None else 0.5,
                rec.metadata or "{}",
                space,
            )
            bump(conn, rec.namespace)
        return MemoryRef(rec.namespace, rec.memory_id, revision), True

    def _live_head(
        self, conn: sqlite3.Connection, namespace: str, memory_id: str
    ) -> tuple[int, int]:
        head = conn.execute(
            "SELECT head_rid, head_revision, deleted FROM memories "
            "WHERE namespace = ? AND memory_id = ?",
            (namespace, memory_id),
        ).fetchone()
        if head is None or head[2]:
            raise MemoryNotFoundError.no_head(namespace, memory_id, deleted=head is not None)
        return int(head[0]), int(head[1])

    def update(self, rec: PreparedRecord, *, space: str | None) -> MemoryRef:
        with self._write() as conn:
            rid, revision = self._live_head(conn, rec.namespace, rec.memory_id)
            old_importance, old_meta = conn.execute(
                "SELECT importance, metadata FROM revisions WHERE rid = ?", (rid,)
            ).fetchone()
            retire(conn, rid)
            importance = old_importance if rec.importance is None else rec.importance
            self._insert(conn, rec, revision + 1, importance, rec.metadata or old_meta, space)
            bump(conn, rec.namespace)
        return MemoryRef(rec.namespace, rec.memory_id, revision + 1)

    def delete(self, namespace: str, memory_id: str) -> MemoryRef:
        with self._write() as conn:
            rid, revision = self._live_head(conn, namespace, memory_id)
            retire(conn, rid)
            conn.execute(
                "UPDATE memories SET deleted = 1, deleted_at = ? "
                "WHERE namespace = ? AND memory_id = ?",
                (time.time(), namespace, memory_id),
            )
            bump(conn, namespace)
        return MemoryRef(namespace, memory_id, revision)

    _HEAD_CHUNK = 400  # identities per head lookup (2 parameters each)

    def _heads(
        self, conn: sqlite3.Connection, records: Sequence[PreparedRecord]
    ) -> dict[tuple[str, str], tuple[Any, ...]]:
        """The head of every memory of ``records`` that exists: ``(namespace, memory_id) ->
        (head_rid, head_revision, deleted, content_hash, importance, metadata)``, read with one
        statement per :attr:`_HEAD_CHUNK` identities through the memories' primary key."""
        keys = list(dict.fromkeys((r.namespace, r.memory_id) for r in records))
        out: dict[tuple[str, str], tuple[Any, ...]] = {}
        for i in range(0, len(keys), self._HEAD_CHUNK):
            chunk = keys[i : i + self._HEAD_CHUNK]
            wanted = ", ".join("(?, ?)" for _ in chunk)
            args = [value for key in chunk for value in key]
            for ns, mid, *head in conn.execute(
                f"WITH wanted(namespace, memory_id) AS (VALUES {wanted}) "
                "SELECT m.namespace, m.memory_id, m.head_rid, m.head_revision, m.deleted, "
                "r.content_hash, r.importance, r.metadata FROM wanted w CROSS JOIN memories m "
                "ON m.namespace = w.namespace AND m.memory_id = w.memory_id "
                "JOIN revisions r ON r.rid = m.head_rid",
                args,
            ):
                out[(ns, mid)] = tuple(head)
        return out

    def write_batch(
        self,
        records: Sequence[PreparedRecord],
        *,
        space: str | None,
        vectors: np.ndarray | None = None,
    ) -> BatchCounts:
        """Write records in ONE transaction (all or nothing). A new id is added; a known id
        gets a new revision when its text, importance or metadata changed, else nothing.
        ``vectors``: one row per record (else each record's own ``vector``).

        The heads of the batch's memories are read together, new rows get consecutive keys
        after the highest one (the write lock is held), and revisions, FTS rows, vectors and
        heads are inserted with one ``executemany`` each.
        """
        added = updated = unchanged = 0
        refs: list[MemoryRef] = []
        revision_rows: list[tuple[Any, ...]] = []
        vector_rows: list[tuple[str, int, bytes]] = []
        head_rows: list[tuple[str, str, int, int]] = []
        pending: set[int] = set()

        def flush(conn: sqlite3.Connection) -> None:
            conn.executemany(
                "INSERT INTO revisions(rid, namespace, memory_id, revision, text, importance, "
                "metadata, created_at, content_hash, live) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
                revision_rows,
            )
            if revision_rows:  # indexed from the rows just written (their keys are consecutive)
                conn.execute(
                    "INSERT INTO fts(rowid, text) SELECT rid, text FROM revisions "
                    "WHERE rid BETWEEN ? AND ? ORDER BY rid",
                    (revision_rows[0][0], revision_rows[-1][0]),
                )
            conn.executemany(
                "INSERT INTO vectors(space, rid, vector) VALUES (?, ?, ?)", vector_rows
            )
            conn.executemany(
                "INSERT INTO memories(namespace, memory_id, head_rid, head_revision, deleted, "
                "deleted_at) VALUES (?, ?, ?, ?, 0, NULL) ON CONFLICT(namespace, memory_id) "
                "DO UPDATE SET head_rid = excluded.head_rid, head_revision = "
                "excluded.head_revision, deleted = 0, deleted_at = NULL",
                head_rows,
            )
            for rows in (revision_rows, vector_rows, head_rows):
                rows.clear()
            pending.clear()

        # the batch's vectors in the stored format at once (each row's bytes are sliced off)
        stored = None if vectors is None else np.ascontiguousarray(vectors, dtype="<f4")
        with self._write() as conn:
            touched: set[str] = set()
            heads = self._heads(conn, records)
            next_rid = int(
                conn.execute("SELECT coalesce(max(rid), 0) FROM revisions").fetchone()[0]
            )
            for i, rec in enumerate(records):
                key = (rec.namespace, rec.memory_id)
                plan = plan_write(rec, heads.get(key))
                if plan.change == "unchanged":
                    unchanged += 1
                    refs.append(MemoryRef(rec.namespace, rec.memory_id, plan.revision))
                    continue
                if plan.change == "added":
                    added += 1
                else:
                    updated += 1
                if plan.retire is not None:
                    if plan.retire in pending:  # written earlier in this batch
                        flush(conn)
                    retire(conn, plan.retire)
                revision, importance, metadata = plan.revision, plan.importance, plan.metadata
                next_rid += 1
                revision_rows.append(
                    (
                        next_rid,
                        rec.namespace,
                        rec.memory_id,
                        revision,
                        rec.text,
                        importance,
                        metadata,
                        rec.created_at,
                        rec.content_hash,
                    )
                )
                if space is not None:
                    if stored is not None:
                        vector_rows.append((space, next_rid, stored[i].tobytes()))
                    elif rec.vector is not None:
                        vector_rows.append((space, next_rid, encode_vector(rec.vector)))
                head_rows.append((rec.namespace, rec.memory_id, next_rid, revision))
                heads[key] = (next_rid, revision, 0, rec.content_hash, importance, metadata)
                pending.add(next_rid)
                refs.append(MemoryRef(rec.namespace, rec.memory_id, revision))
                touched.add(rec.namespace)
            flush(conn)
            for ns in sorted(touched):
                bump(conn, ns)
        return BatchCounts(added, updated, unchanged, tuple(refs))

    def put_vectors(self, items: Sequence[tuple[int, str, np.ndarray]], *, space: str) -> None:
        """Store vectors ``(rid, namespace, vector)`` in ``space`` (one transaction)."""
        with self._write() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO vectors(space, rid, vector) VALUES (?, ?, ?)",
                [(space, rid, encode_vector(vec)) for rid, _ns, vec in items],
            )
            for ns in sorted({ns for _rid, ns, _vec in items}):
                bump(conn, ns, vectors=True)

    # -- reads -----------------------------------------------------------------------------

    def get(self, namespace: str, memory_id: str) -> StoredMemory:
        conn = self._conn()
        row = conn.execute(
            f"SELECT {ROW_COLUMNS}, m.deleted FROM memories m JOIN revisions r "
            "ON r.rid = m.head_rid WHERE m.namespace = ? AND m.memory_id = ?",
            (namespace, memory_id),
        ).fetchone()
        if row is None:
            raise MemoryNotFoundError.no_memory(namespace, memory_id)
        return row_to_memory(row, bool(row[9]))

    def get_ref(self, ref: MemoryRef) -> StoredMemory:
        conn = self._conn()
        row = conn.execute(
            f"SELECT {ROW_COLUMNS}, m.deleted FROM revisions r JOIN memories m "
            "ON m.namespace = r.namespace AND m.memory_id = r.memory_id "
            "WHERE r.namespace = ? AND r.memory_id = ? AND r.revision = ?",
            (ref.namespace, ref.memory_id, ref.revision),
        ).fetchone()
        if row is None:
            raise MemoryNotFoundError.no_revision(ref)
        return row_to_memory(row, bool(row[9]))

    def iter_memories(
        self, namespace: str, *, include_deleted: bool = False
    ) -> Iterator[StoredMemory]:
        """Current revisions, streamed page by page (no transaction held between pages)."""
        last = 0
        cond = (
            "(r.live = 1 OR (m.deleted = 1 AND m.head_rid = r.rid))"
            if include_deleted
            else "r.live = 1"
        )
        while True:
            rows = (
                self._conn()
                .execute(
                    f"SELECT {ROW_COLUMNS}, m.deleted FROM revisions r JOIN memories m "
                    "ON m.namespace = r.namespace AND m.memory_id = r.memory_id "
                    f"WHERE r.rid > ? AND r.namespace = ? AND {cond} ORDER BY r.rid LIMIT ?",
                    (last, namespace, _PAGE),
                )
                .fetchall()
            )
            if not rows:
                return
            for row in rows:
                yield row_to_memory(row, bool(row[9]))
            last = int(rows[-1][0])

    def iter_missing_vectors(
        self, space: str, *, page: int = _PAGE
    ) -> Iterator[list[tuple[int, str, str]]]:
        """Pages of live revisions ``(rid, namespace, text)`` without a vector in ``space``."""
        last = 0
        while True:
            rows = (
                self._conn()
                .execute(
                    "SELECT r.rid, r.namespace, r.text FROM revisions r WHERE r.rid > ? AND "
                    "r.live = 1 AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.space = ? AND "
                    "v.rid = r.rid) ORDER BY r.rid LIMIT ?",
                    (last, space, page),
                )
                .fetchall()
            )
            if not rows:
                return
            yield [(int(r), ns, t) for r, ns, t in rows]
            last = int(rows[-1][0])

    def fetch_vectors(
        self, refs: Sequence[MemoryRef], descriptor: EmbedderDescriptor
    ) -> np.ndarray | list[np.ndarray | None]:
        """One batched read of the stored vectors of ``refs`` in ``descriptor``'s space: the
        read-only ``n × d`` float32 matrix when every ref has one, else one vector or ``None``
        per ref (:func:`~rankseam.store.vectors.decode_vectors`).

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
            per_ns: dict[str, dict[str, int]] = {}
            for ns, live, deleted in conn.execute(
                "SELECT namespace, sum(deleted = 0), sum(deleted = 1) FROM memories "
                "GROUP BY namespace ORDER BY namespace"
            ):
                per_ns[ns] = {"memories": int(live), "deleted": int(deleted), "revisions": 0}
            for ns, revs in conn.execute(
                "SELECT namespace, count(*) FROM revisions GROUP BY namespace"
            ):
                per_ns.setdefault(ns, {"memories": 0, "deleted": 0, "revisions": 0})
                per_ns[ns]["revisions"] = int(revs)
            spaces = {}
            for key, n in conn.execute(
                "SELECT v.space, count(*) FROM vectors v JOIN revisions r ON r.rid = v.rid "
                "WHERE r.live = 1 GROUP BY v.space"
            ):
                spaces[key] = int(n)
        size = sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))
        return {
            "path": self.path,
            "schema_version": SCHEMA_VERSION,
            "tokenizer": self.tokenizer,
            "bytes": size,
            "namespaces": per_ns,
            "memories": sum(v["memories"] for v in per_ns.values()),
            "vectors_by_space": spaces,
            "vector_cache_bytes": self.vector_cache.nbytes(),
        }
