"""The rows of one PostgreSQL write transaction: revisions (with their ``tsvector`` and
postings), vectors and heads, inserted together, and the namespaces' live counts and token
totals. It is also the store's :class:`~rankseam.plugin.stores.BatchWriter`: the host plans a
batch, this applies it."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from rankseam.plugin.stores import MemoryHead, MemoryKey, PreparedRecord, WritePlan
from rankseam_postgres.tables import copy_vectors, count_tokens, insert_revisions, retire_row

if TYPE_CHECKING:
    from rankseam_postgres.store import PostgresStore

__all__ = ["RowWriter"]


class RowWriter:
    """Rows of one write transaction, inserted together: revisions (with their ``tsvector``),
    vectors, heads; and the namespaces' live counts and token totals."""

    def __init__(
        self,
        store: PostgresStore,
        conn: psycopg.Connection[Any],
        versions: dict[str, int],
        *,
        vectors: bool = False,
    ) -> None:
        self._store = store
        self.conn = self._conn = conn
        self._versions = versions
        self._vectors_changed = vectors
        self._touched: set[str] = set()
        self._t = store.tables
        self._revisions: list[tuple[Any, ...]] = []
        self._vectors: list[tuple[Any, ...]] = []
        self._heads: dict[tuple[str, str], tuple[int, int]] = {}
        self._live: dict[str, list[int]] = {}
        self._pending: dict[int, tuple[str, int]] = {}
        self._rids: deque[int] = deque()

    # -- the host's planned writes (rankseam.plugin.stores.BatchWriter) -----------------------

    def heads(self, keys: Sequence[MemoryKey], /) -> list[MemoryHead]:
        """The head of every memory of ``keys`` that exists (one statement); reserves a row
        key per memory (a batch takes more one at a time)."""
        rows = self._conn.execute(
            self._t(
                f"SELECT {MemoryHead.COLUMNS} FROM unnest(%s::text[], %s::text[]) "
                "AS w(namespace, memory_id) JOIN {memories} m ON m.namespace = w.namespace "
                "AND m.memory_id = w.memory_id JOIN {revisions} r ON r.namespace = m.namespace "
                "AND r.rid = m.head_rid"
            ),
            ([k.namespace for k in keys], [k.memory_id for k in keys]),
        ).fetchall()
        self.reserve(len(keys))
        return [MemoryHead.from_row(row) for row in rows]

    def write(
        self,
        record: PreparedRecord,
        plan: WritePlan,
        /,
        *,
        space: str | None,
        vector: np.ndarray | None,
    ) -> int:
        return self.revision(
            record,
            plan.revision,
            plan.importance,
            plan.metadata,
            space,
            vector,
            (plan.thread, plan.position, plan.derived_from),
        )

    def tombstone(self, namespace: str, memory_id: str, /) -> None:
        self._conn.execute(
            self._t(
                "UPDATE {memories} SET deleted = true, deleted_at = %s "
                "WHERE namespace = %s AND memory_id = %s"
            ),
            (time.time(), namespace, memory_id),
        )
        self._touched.add(namespace)

    # -- rows --------------------------------------------------------------------------------

    def touch(self, namespace: str) -> None:
        """Mark ``namespace`` as written (it gets a new version on commit)."""
        self._touched.add(namespace)

    def _count(self, namespace: str, rows: int, tokens: int) -> None:
        self._touched.add(namespace)
        entry = self._live.setdefault(namespace, [0, 0])
        entry[0] += rows
        entry[1] += tokens

    def reserve(self, n: int) -> None:
        """Take ``n`` row keys from the sequence with one statement (unused ones are gaps)."""
        rows = self._conn.execute(
            self._t("SELECT nextval('{rid_seq}') FROM generate_series(1, %s)"), (n,)
        ).fetchall()
        self._rids.extend(int(r[0]) for r in rows)

    def _next_rid(self) -> int:
        if not self._rids:
            self.reserve(1)
        return self._rids.popleft()

    def revision(
        self,
        rec: PreparedRecord,
        revision: int,
        importance: float,
        metadata: str,
        space: str | None,
        vector: np.ndarray | None,
        structure: tuple[str | None, float | None, str | None] = (None, None, None),
    ) -> int:
        rid = self._next_rid()
        tokens = count_tokens(rec.text)
        self._revisions.append(
            (
                rec.namespace,
                rid,
                rec.memory_id,
                revision,
                rec.text,
                float(importance),
                metadata,
                float(rec.created_at),
                rec.content_hash,
                True,
                tokens,
                *structure,
            )
        )
        if vector is not None and space is not None:
            self._store.check_vector(
                self._conn,
                space,
                vector,
                f"the memory {rec.memory_id!r} of namespace {rec.namespace!r}",
            )
            self._vectors.append((rec.namespace, space, rid, True, np.asarray(vector, np.float32)))
        self._heads[(rec.namespace, rec.memory_id)] = (rid, revision)
        self._pending[rid] = (rec.namespace, tokens)
        self._count(rec.namespace, 1, tokens)
        return rid

    def retire(self, namespace: str, rid: int, /) -> None:
        """Take a revision out of search (it stays readable by its ref)."""
        if rid in self._pending:
            self.flush()
        self._touched.add(namespace)
        tokens = retire_row(self._conn, self._t, self._versions[namespace], namespace, rid)
        if tokens is not None:
            self._count(namespace, -1, -tokens)

    def flush(self) -> None:
        t = self._t
        insert_revisions(self._conn, t, self._store.text_search, self._revisions)
        if self._vectors:
            copy_vectors(self._conn, t, self._vectors)
        if self._heads:
            keys = list(self._heads)
            self._conn.execute(
                t(
                    "INSERT INTO {memories}(namespace, memory_id, head_rid, head_revision, "
                    "deleted, deleted_at) SELECT ns, mid, rid, rev, false, NULL FROM "
                    "unnest(%s::text[], %s::text[], %s::bigint[], %s::int[]) AS u(ns, mid, rid, "
                    "rev) ON CONFLICT (namespace, memory_id) DO UPDATE SET head_rid = "
                    "excluded.head_rid, head_revision = excluded.head_revision, deleted = false, "
                    "deleted_at = NULL"
                ),
                (
                    [k[0] for k in keys],
                    [k[1] for k in keys],
                    [self._heads[k][0] for k in keys],
                    [self._heads[k][1] for k in keys],
                ),
            )
        self._revisions.clear()
        self._vectors.clear()
        self._heads.clear()
        self._pending.clear()

    def finish(self) -> None:
        """Write what is pending; give every namespace written to its new version (and vector
        epoch), live count and token total. Called before the transaction commits."""
        self.flush()
        for ns in sorted(self._touched):
            rows, tokens = self._live.get(ns, (0, 0))
            self._conn.execute(
                self._t(
                    "UPDATE {namespaces} SET version = version + 1, vector_epoch = "
                    "vector_epoch + %s, live_count = live_count + %s, live_tokens = "
                    "live_tokens + %s WHERE name = %s"
                ),
                (int(self._vectors_changed), rows, tokens, ns),
            )
        self._live.clear()
        self._touched.clear()
