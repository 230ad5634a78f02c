"""The rows of one SQLite write transaction: the planned writes of an add, update, delete or
ingest batch (``Store.batch``; the host plans them, :mod:`rankseam.writing.plan`)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from rankseam.sqlite.rows import INSERT_REVISION, INSERT_VECTOR, bump, index_values, retire
from rankseam.sqlite.vector_cache import encode_vector
from rankseam.store.records import PreparedRecord, WritePlan
from rankseam.store.rows import MemoryHead, MemoryKey

__all__ = ["SQLiteBatchWriter"]

#: Identities per head lookup (2 parameters each).
_HEAD_CHUNK = 400


class SQLiteBatchWriter:
    """A batch's planned writes in one transaction (the store's write lock is held). New rows
    get consecutive keys after the highest one, and revisions, FTS rows, vectors and heads
    are inserted with one ``executemany`` each (before a retire of a row still pending, and
    at the end)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._next = 0
        self._revisions: list[tuple[Any, ...]] = []
        self._vectors: list[tuple[str, int, bytes]] = []
        self._heads: list[tuple[str, str, int, int]] = []
        self._pending: set[int] = set()
        self._touched: set[str] = set()

    def heads(self, keys: Sequence[MemoryKey], /) -> list[MemoryHead]:
        """The head of every memory of ``keys`` that exists, read with one statement per
        :data:`_HEAD_CHUNK` identities through the memories' primary key."""
        out: list[MemoryHead] = []
        for i in range(0, len(keys), _HEAD_CHUNK):
            chunk = keys[i : i + _HEAD_CHUNK]
            wanted = ", ".join("(?, ?)" for _ in chunk)
            args = [value for key in chunk for value in (key.namespace, key.memory_id)]
            rows = self._conn.execute(
                f"WITH wanted(namespace, memory_id) AS (VALUES {wanted}) "
                f"SELECT {MemoryHead.COLUMNS} FROM wanted w CROSS JOIN memories m "
                "ON m.namespace = w.namespace AND m.memory_id = w.memory_id "
                "JOIN revisions r ON r.rid = m.head_rid",
                args,
            )
            out.extend(MemoryHead.from_row(row) for row in rows)
        return out

    def retire(self, namespace: str, key: int, /) -> None:
        if key in self._pending:  # written earlier in this batch
            self._flush()
        retire(self._conn, key)
        self._touched.add(namespace)

    def write(
        self,
        record: PreparedRecord,
        plan: WritePlan,
        /,
        *,
        space: str | None,
        vector: np.ndarray | None,
    ) -> int:
        if not self._next:
            row = self._conn.execute("SELECT coalesce(max(rid), 0) FROM revisions").fetchone()
            self._next = int(row[0])
        self._next += 1
        rid = self._next
        self._revisions.append(
            (
                rid,
                record.namespace,
                record.memory_id,
                plan.revision,
                record.text,
                plan.importance,
                plan.metadata,
                record.created_at,
                record.content_hash,
                1,  # live
                plan.thread,
                plan.position,
                plan.derived_from,
            )
        )
        if space is not None and vector is not None:
            self._vectors.append((space, rid, encode_vector(vector)))
        self._heads.append((record.namespace, record.memory_id, rid, plan.revision))
        self._pending.add(rid)
        self._touched.add(record.namespace)
        return rid

    def tombstone(self, namespace: str, memory_id: str, /) -> None:
        self._conn.execute(
            "UPDATE memories SET deleted = 1, deleted_at = ? WHERE namespace = ? AND memory_id = ?",
            (time.time(), namespace, memory_id),
        )
        self._touched.add(namespace)

    def _flush(self) -> None:
        conn = self._conn
        conn.executemany(INSERT_REVISION, self._revisions)
        if self._revisions:  # indexed from the rows just written (their keys are consecutive)
            conn.execute(
                "INSERT INTO fts(rowid, text) SELECT rid, text FROM revisions "
                "WHERE rid BETWEEN ? AND ? ORDER BY rid",
                (self._revisions[0][0], self._revisions[-1][0]),
            )
            index_values(conn, self._revisions[0][0], self._revisions[-1][0])
        conn.executemany(INSERT_VECTOR, self._vectors)
        conn.executemany(
            "INSERT INTO memories(namespace, memory_id, head_rid, head_revision, deleted, "
            "deleted_at) VALUES (?, ?, ?, ?, 0, NULL) ON CONFLICT(namespace, memory_id) "
            "DO UPDATE SET head_rid = excluded.head_rid, head_revision = "
            "excluded.head_revision, deleted = 0, deleted_at = NULL",
            self._heads,
        )
        for rows in (self._revisions, self._vectors, self._heads):
            rows.clear()
        self._pending.clear()

    def finish(self) -> None:
        """Write what is pending and announce every namespace written to (called before the
        transaction commits)."""
        self._flush()
        for ns in sorted(self._touched):
            bump(self._conn, ns)
