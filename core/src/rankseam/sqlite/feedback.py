"""Feedback in the SQLite store: the ``feedback`` table (schema version 7) and the store's
:class:`~rankseam.store.feedback.FeedbackStore` methods (docs/store.md, "Feedback").

``feedback(seq, feedback_id, namespace, created_at, record)``: one row per record, ``seq``
its write order, ``record`` the record's JSON (:meth:`~rankseam.types.FeedbackRecord.to_dict`).
Nothing else in the store reads it: it is not memory state, and a search, a history or a
snapshot (unless asked) never sees it. A write keeps each namespace it wrote to within its
newest ``cap`` records (``created_at``, then ``seq``), in the same transaction.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from rankseam.store.feedback import FeedbackWritten
from rankseam.types import FeedbackRecord

__all__ = ["FEEDBACK", "SQLiteFeedback"]

#: The table and its index (schema version 7).
FEEDBACK = (
    "CREATE TABLE IF NOT EXISTS feedback (seq INTEGER PRIMARY KEY, feedback_id TEXT NOT NULL "
    "UNIQUE, namespace TEXT NOT NULL, created_at REAL NOT NULL, record TEXT NOT NULL); "
    "CREATE INDEX IF NOT EXISTS feedback_order ON feedback (namespace, created_at, seq)"
)

#: Ids per delete statement.
_ID_CHUNK = 500


def _trim(conn: sqlite3.Connection, namespace: str, cap: int) -> int:
    """Keep the newest ``cap`` records of ``namespace``; how many older ones went."""
    cur = conn.execute(
        "DELETE FROM feedback WHERE seq IN (SELECT seq FROM feedback WHERE namespace = ? "
        "ORDER BY created_at DESC, seq DESC LIMIT -1 OFFSET ?)",
        (namespace, cap),
    )
    return cur.rowcount


class SQLiteFeedback:
    """The :class:`~rankseam.store.feedback.FeedbackStore` methods of
    :class:`~rankseam.sqlite.store.SQLiteStore` (see the module docstring)."""

    if TYPE_CHECKING:

        def _write(self) -> AbstractContextManager[sqlite3.Connection]: ...
        def _read(self) -> AbstractContextManager[sqlite3.Connection]: ...

    def write_feedback(self, records: Sequence[FeedbackRecord], /, *, cap: int) -> FeedbackWritten:
        """Store ``records`` (a known id is left alone) and trim each namespace written to
        its newest ``cap``, in one write transaction."""
        written = 0
        dropped: dict[str, int] = {}
        with self._write() as conn:
            for record in sorted(records, key=lambda r: r.created_at):
                cur = conn.execute(
                    "INSERT OR IGNORE INTO feedback(feedback_id, namespace, created_at, record) "
                    "VALUES (?, ?, ?, ?)",
                    (
                        record.feedback_id,
                        record.namespace,
                        record.created_at,
                        json.dumps(record.to_dict(), sort_keys=True),
                    ),
                )
                written += cur.rowcount
                dropped.setdefault(record.namespace, 0)
            for namespace in sorted(dropped):
                dropped[namespace] = _trim(conn, namespace, cap)
        return FeedbackWritten(written, dropped)

    def feedback_records(
        self,
        /,
        *,
        namespace: str | None = None,
        since: float | None = None,
        limit: int | None = None,
    ) -> list[FeedbackRecord]:
        """Records oldest first (``created_at``, then write order)."""
        where, args = _where(namespace, since)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT record FROM feedback WHERE {where} ORDER BY created_at, seq LIMIT ?",
                (*args, -1 if limit is None else limit),
            ).fetchall()
        return [FeedbackRecord.from_dict(json.loads(row[0])) for row in rows]

    def delete_feedback(
        self, /, *, namespace: str | None = None, feedback_ids: Sequence[str] | None = None
    ) -> int:
        """Delete records by id, by namespace or all; how many went."""
        with self._write() as conn:
            if feedback_ids is not None:
                return sum(
                    conn.execute(
                        f"DELETE FROM feedback WHERE feedback_id IN ({','.join('?' * len(c))})",
                        c,
                    ).rowcount
                    for c in _chunks(list(feedback_ids))
                )
            where, args = _where(namespace, None)
            return conn.execute(f"DELETE FROM feedback WHERE {where}", args).rowcount


def _where(namespace: str | None, since: float | None) -> tuple[str, tuple[object, ...]]:
    conditions: list[str] = ["1"]
    args: list[object] = []
    if namespace is not None:
        conditions.append("namespace = ?")
        args.append(namespace)
    if since is not None:
        conditions.append("created_at >= ?")
        args.append(since)
    return " AND ".join(conditions), tuple(args)


def _chunks(ids: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(ids), _ID_CHUNK):
        yield ids[i : i + _ID_CHUNK]
