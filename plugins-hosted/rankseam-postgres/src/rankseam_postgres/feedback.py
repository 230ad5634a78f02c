"""Feedback in the PostgreSQL store: the ``feedback`` table (schema version 6) and the
store's :class:`~rankseam.plugin.stores.FeedbackStore` methods (docs/store.md, "Feedback").

``feedback(namespace, feedback_id, seq, created_at, record)``: one row per record, its
primary key led by the namespace (as every table's, so a distributed PostgreSQL shards it with
the memories), ``seq`` its write order, ``record`` the record as jsonb
(:meth:`~rankseam.types.FeedbackRecord.to_dict`). Nothing else in the store reads it: no
search, history or snapshot that did not ask sees it. A write locks each namespace's feedback
(a transaction-scoped advisory lock, never the memories' lock: feedback does not wait for
memory writes) and keeps it within its newest ``cap`` records (``created_at``, then ``seq``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from rankseam.plugin.stores import FeedbackQuery, FeedbackWritten
from rankseam.types import FeedbackRecord

__all__ = ["FEEDBACK", "PostgresFeedback"]

#: The table and its index (schema version 6).
FEEDBACK = """
CREATE TABLE IF NOT EXISTS {s}.feedback (
    namespace text NOT NULL,
    feedback_id text NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY,
    created_at double precision NOT NULL,
    record jsonb NOT NULL,
    PRIMARY KEY (namespace, feedback_id)
);
CREATE INDEX IF NOT EXISTS feedback_order ON {s}.feedback (namespace, created_at, seq)
"""


class PostgresFeedback:
    """The :class:`~rankseam.plugin.stores.FeedbackStore` methods of
    :class:`~rankseam_postgres.store.PostgresStore` (see the module docstring)."""

    schema: str

    if TYPE_CHECKING:
        tables: Callable[[str], sql.Composed]

        def _transaction(self, begin: str) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def write_feedback(self, records: Sequence[FeedbackRecord], /, *, cap: int) -> FeedbackWritten:
        """Store ``records`` (a known id is left alone) and trim each namespace written to
        its newest ``cap``, in one write transaction."""
        written = 0
        dropped: dict[str, int] = {}
        namespaces = sorted({record.namespace for record in records})
        with self._transaction("BEGIN") as conn:
            for namespace in namespaces:  # sorted: two writers never wait on each other
                conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext(%s))",
                    (f"rankseam-feedback:{self.schema}:{namespace}",),
                )
            for record in sorted(records, key=lambda r: r.created_at):
                cur = conn.execute(
                    self.tables(
                        "INSERT INTO {feedback}(namespace, feedback_id, created_at, record) "
                        "VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING"
                    ),
                    (
                        record.namespace,
                        record.feedback_id,
                        record.created_at,
                        Jsonb(record.to_dict()),
                    ),
                )
                written += max(cur.rowcount, 0)
            for namespace in namespaces:
                cur = conn.execute(
                    self.tables(
                        "DELETE FROM {feedback} WHERE namespace = %s AND seq IN (SELECT seq "
                        "FROM {feedback} WHERE namespace = %s ORDER BY created_at DESC, "
                        "seq DESC OFFSET %s)"
                    ),
                    (namespace, namespace, cap),
                )
                dropped[namespace] = max(cur.rowcount, 0)
        return FeedbackWritten(written, dropped)

    def feedback_records(self, query: FeedbackQuery, /) -> list[FeedbackRecord]:
        """The records ``query`` selects, oldest first (``created_at``, then write order)."""
        chosen, args = _chosen(query)
        with self._transaction("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY") as conn:
            rows = conn.execute(
                self.tables(
                    f"SELECT record FROM {{feedback}} WHERE seq IN ({chosen}) "
                    "ORDER BY created_at, seq"
                ),
                args,
            ).fetchall()
        return [FeedbackRecord.from_dict(row[0]) for row in rows]

    def delete_feedback(self, query: FeedbackQuery, /) -> int:
        """Delete the records ``query`` selects; how many went."""
        chosen, args = _chosen(query)
        with self._transaction("BEGIN") as conn:
            cur = conn.execute(
                self.tables(f"DELETE FROM {{feedback}} WHERE seq IN ({chosen})"), args
            )
            return max(cur.rowcount, 0)


def _chosen(query: FeedbackQuery) -> tuple[str, list[Any]]:
    """The statement selecting the ``seq`` of every record ``query`` means (tables still to
    be named), and its values."""
    where, args = query.conditions("%s", "feedback_id = ANY({})")
    return (
        f"SELECT seq FROM {{feedback}} WHERE {where} ORDER BY created_at, seq LIMIT %s",
        [*args, query.limit],
    )
