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
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

from rankseam.store.feedback import FeedbackQuery, FeedbackWritten
from rankseam.types import FeedbackRecord

__all__ = ["FEEDBACK", "SQLiteFeedback"]

#: The table and its index (schema version 7).
FEEDBACK = (
    "CREATE TABLE IF NOT EXISTS feedback (seq INTEGER PRIMARY KEY, feedback_id TEXT NOT NULL "
    "UNIQUE, namespace TEXT NOT NULL, created_at REAL NOT NULL, record TEXT NOT NULL); "
    "CREATE INDEX IF NOT EXISTS feedback_order ON feedback (namespace, created_at, seq)"
)


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

    def feedback_records(self, query: FeedbackQuery, /) -> list[FeedbackRecord]:
        """The records ``query`` selects, oldest first (``created_at``, then write order)."""
        chosen, args = _chosen(query)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT record FROM feedback WHERE seq IN ({chosen}) ORDER BY created_at, seq",
                args,
            ).fetchall()
        return [FeedbackRecord.from_dict(json.loads(row[0])) for row in rows]

    def delete_feedback(self, query: FeedbackQuery, /) -> int:
        """Delete the records ``query`` selects; how many went."""
        chosen, args = _chosen(query)
        with self._write() as conn:
            return conn.execute(f"DELETE FROM feedback WHERE seq IN ({chosen})", args).rowcount


def _chosen(query: FeedbackQuery) -> tuple[str, list[object]]:
    """The statement selecting the ``seq`` of every record ``query`` means, and its values
    (the ids bound as one JSON array)."""
    where, args = query.conditions("?", "feedback_id IN (SELECT value FROM json_each({}))", _json)
    limit = -1 if query.limit is None else query.limit
    return (
        f"SELECT seq FROM feedback WHERE {where} ORDER BY created_at, seq LIMIT ?",
        [*args, limit],
    )


def _json(ids: tuple[str, ...]) -> str:
    return json.dumps(list(ids))
