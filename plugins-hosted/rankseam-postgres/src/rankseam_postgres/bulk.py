"""Bulk rows in and out of the PostgreSQL store, each inside one transaction the store opens
(:meth:`PostgresStore.bulk_read`, :meth:`PostgresStore.bulk_write`). rankseam's snapshot export
and import (``rankseam export`` / ``rankseam import``) read and write through them, so a
snapshot moves between the embedded store and PostgreSQL in both directions.

Rows leave in the order the snapshot format fixes: by (namespace, memory id, revision), compared
as code points (``COLLATE "C"``, whatever the database's collation). A clean import keeps each
revision's position in the source's write order as its row key, so ties keep their order too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from rankseam.errors import ValidationError
from rankseam.plugin.stores import (
    BulkRevision,
    MemoryHead,
    RevisionDigest,
    SpaceRow,
    StoreCounts,
    WriteOrder,
)
from rankseam_postgres.schema import ensure_space_index
from rankseam_postgres.tables import (
    as_array,
    copy_vectors,
    count_tokens,
    insert_revisions,
    retire_row,
)

if TYPE_CHECKING:
    from rankseam_postgres.store import PostgresStore

__all__ = ["PostgresBulkReader", "PostgresBulkWriter"]

#: Revisions per batched insert of a clean import.
_BATCH = 2000


def _blob(vector: Any) -> bytes | None:
    return None if vector is None else as_array(vector).astype("<f4").tobytes()


def _vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4").astype(np.float32)


class PostgresBulkReader:
    """The whole store, read in one read transaction."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._t = store.tables

    def spaces(self) -> list[SpaceRow]:
        rows = self._conn.execute(
            self._t('SELECT key, descriptor FROM {spaces} ORDER BY key COLLATE "C"')
        ).fetchall()
        return [SpaceRow(key, json.loads(desc)) for key, desc in rows]

    def vectors_outside(self, spaces: Sequence[str]) -> int:
        row = self._conn.execute(
            self._t("SELECT count(*) FROM {vectors} WHERE NOT (space = ANY(%s))"), (list(spaces),)
        ).fetchone()
        return int(row[0]) if row else 0

    def write_order(self) -> WriteOrder:
        row = self._conn.execute(
            self._t("SELECT count(*), min(rid), max(rid) FROM {revisions}")
        ).fetchone()
        n, lo, hi = row if row else (0, None, None)
        order = self._t("SELECT rid FROM {revisions} ORDER BY rid")
        return WriteOrder.of(n, lo, hi, lambda: (r for (r,) in self._conn.execute(order)))

    def revisions(self, spaces: Sequence[str]) -> Iterator[BulkRevision]:
        """Every revision of every memory, ordered by (namespace, memory id, revision), with
        its vector (bytes or None) in each of ``spaces``."""
        joins = "".join(
            f" LEFT JOIN {{vectors}} v{i} ON v{i}.namespace = r.namespace AND v{i}.space = %s "
            f"AND v{i}.rid = r.rid"
            for i in range(len(spaces))
        )
        vector_cols = "".join(f", v{i}.vector" for i in range(len(spaces)))
        query = self._t(
            "SELECT m.namespace, m.memory_id, m.deleted, m.deleted_at, m.head_revision, "
            "r.rid, r.revision, r.text, r.importance, r.metadata, r.created_at, "
            f"r.content_hash, r.live, r.thread, r.position, r.derived_from{vector_cols} "
            "FROM {memories} m JOIN {revisions} r "
            f"ON r.namespace = m.namespace AND r.memory_id = m.memory_id{joins} "
            'ORDER BY m.namespace COLLATE "C", m.memory_id COLLATE "C", r.revision'
        )
        with self._conn.cursor(name="rankseam_export") as cur:
            cur.itersize = 2000
            cur.execute(query, list(spaces))
            for row in cur:
                width = BulkRevision.WIDTH
                yield BulkRevision.from_columns(row[:width], (_blob(v) for v in row[width:]))


class PostgresBulkWriter:
    """Bulk rows written in one write transaction. Clean inserts keep the source's write order
    (row key = ``seq``); appends take fresh row keys. Each namespace written to is locked and
    gets a new version and vector epoch, as every write of the store."""

    def __init__(self, store: PostgresStore, conn: psycopg.Connection[Any]) -> None:
        self._store = store
        self._conn = conn
        self._t = store.tables
        self._versions: dict[str, int] = {}
        self._revisions: list[tuple[Any, ...]] = []
        self._vectors: list[tuple[Any, ...]] = []
        self._memories: list[tuple[Any, ...]] = []
        self._live: dict[str, list[int]] = {}
        self._max_seq = 0
        self.revisions_written = 0
        self.vectors_written = 0

    def _touch(self, namespace: str) -> int:
        version = self._versions.get(namespace)
        if version is None:
            self._flush()  # rows of other namespaces first: locks are taken in input order
            row = self._conn.execute(
                self._t(
                    "INSERT INTO {namespaces}(name, version, vector_epoch) VALUES (%s, 1, 1) "
                    "ON CONFLICT (name) DO UPDATE SET version = {namespaces}.version + 1, "
                    "vector_epoch = {namespaces}.vector_epoch + 1 RETURNING version"
                ),
                (namespace,),
            ).fetchone()
            version = self._versions[namespace] = int(row[0])  # type: ignore[index]
        return version

    def _count(self, namespace: str, rows: int, tokens: int) -> None:
        entry = self._live.setdefault(namespace, [0, 0])
        entry[0] += rows
        entry[1] += tokens

    def counts(self) -> StoreCounts:
        memories = self._conn.execute(self._t("SELECT count(*) FROM {memories}")).fetchone()
        revisions = self._conn.execute(self._t("SELECT count(*) FROM {revisions}")).fetchone()
        return StoreCounts(int(memories[0]), int(revisions[0]))  # type: ignore[index]

    def register_space(self, descriptor: Any) -> None:
        ensure_space_index(
            self._conn, self._store.schema, descriptor.key, dict(descriptor.to_dict())
        )

    def insert(self, mem: Any) -> None:
        """Insert a memory the store does not hold, every row key its revision's ``seq``."""
        self._touch(mem.namespace)
        last = len(mem.revisions)
        for rev in mem.revisions:
            live = rev.revision == last and not mem.deleted
            tokens = count_tokens(rev.text)
            self._revisions.append(_revision_row(mem, rev, live, tokens, rev.seq))
            if live:
                self._count(mem.namespace, 1, tokens)
            self._vectors.extend(self._checked(mem, rev, rev.seq, live))
            self._max_seq = max(self._max_seq, rev.seq)
        head = mem.revisions[-1]
        self._memories.append(
            (mem.namespace, mem.memory_id, head.seq, last, bool(mem.deleted), mem.deleted_at)
        )
        if len(self._revisions) >= _BATCH:
            self._flush()

    def _checked(self, mem: Any, rev: Any, rid: int, live: bool) -> list[tuple[Any, ...]]:
        """The vector rows of the revision ``rev`` of ``mem``, each refused when its space's
        index cannot hold it (:meth:`PostgresStore.check_vector`)."""
        rows = []
        for key, blob in rev.vectors:
            vector = _vector(blob)
            self._store.check_vector(
                self._conn,
                key,
                vector,
                lambda: (
                    f"the snapshot's memory {mem.memory_id!r} of namespace "
                    f"{mem.namespace!r} (revision {rev.revision})"
                ),
            )
            rows.append((mem.namespace, key, rid, live, vector))
        return rows

    def head(self, namespace: str, memory_id: str) -> MemoryHead | None:
        row = self._conn.execute(
            self._t(
                f"SELECT {MemoryHead.COLUMNS} FROM {{memories}} m JOIN {{revisions}} r ON "
                "r.namespace = m.namespace AND r.rid = m.head_rid WHERE m.namespace = %s "
                "AND m.memory_id = %s"
            ),
            (namespace, memory_id),
        ).fetchone()
        return None if row is None else MemoryHead.from_row(row)

    def history(self, namespace: str, memory_id: str, upto: int) -> list[RevisionDigest]:
        rows = self._conn.execute(
            self._t(
                "SELECT revision, content_hash, importance, metadata, thread, position, "
                "derived_from FROM {revisions} WHERE "
                "namespace = %s AND memory_id = %s AND revision <= %s ORDER BY revision"
            ),
            (namespace, memory_id, upto),
        ).fetchall()
        return [RevisionDigest(*row) for row in rows]

    def _retire(self, namespace: str, rid: int) -> None:
        tokens = retire_row(self._conn, self._t, self._touch(namespace), namespace, rid)
        if tokens is not None:
            self._count(namespace, -1, -tokens)

    def retire(self, rid: int) -> None:
        """Take a revision out of search (it stays readable by its ref)."""
        row = self._conn.execute(
            self._t("SELECT namespace FROM {revisions} WHERE rid = %s"), (rid,)
        ).fetchone()
        if row is None:
            raise ValidationError(f"no revision row {rid} to retire")
        self._retire(row[0], rid)

    def append(self, mem: Any, revisions: Sequence[Any]) -> None:
        """Add ``revisions`` (the newest part of ``mem``) with fresh row keys, and set the
        memory's head and tombstone to ``mem``'s."""
        self._touch(mem.namespace)
        self._flush()
        last = len(mem.revisions)
        rid = 0
        for rev in revisions:
            live = rev.revision == last and not mem.deleted
            rid = int(
                self._conn.execute(self._t("SELECT nextval('{rid_seq}')")).fetchone()[0]  # type: ignore[index]
            )
            tokens = count_tokens(rev.text)
            self._revisions.append(_revision_row(mem, rev, live, tokens, rid))
            if live:
                self._count(mem.namespace, 1, tokens)
            self._vectors.extend(self._checked(mem, rev, rid, live))
        self._flush()
        if rid == 0:  # nothing newer: only the tombstone may change
            head = self.head(mem.namespace, mem.memory_id)
            rid = head.key if head else 0
        self._conn.execute(
            self._t(
                "INSERT INTO {memories}(namespace, memory_id, head_rid, head_revision, deleted, "
                "deleted_at) VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, memory_id) "
                "DO UPDATE SET head_rid = excluded.head_rid, head_revision = "
                "excluded.head_revision, deleted = excluded.deleted, deleted_at = "
                "excluded.deleted_at"
            ),
            (mem.namespace, mem.memory_id, rid, last, bool(mem.deleted), mem.deleted_at),
        )

    def _flush(self) -> None:
        c = self._conn
        t = self._t
        if self._revisions:
            insert_revisions(c, t, self._store.text_search, self._revisions)
            self.revisions_written += len(self._revisions)
        if self._vectors:
            copy_vectors(c, t, self._vectors)
            self.vectors_written += len(self._vectors)
        if self._memories:
            cols = list(zip(*self._memories, strict=True))
            c.execute(
                t(
                    "INSERT INTO {memories}(namespace, memory_id, head_rid, head_revision, "
                    "deleted, deleted_at) SELECT * FROM unnest(%s::text[], %s::text[], "
                    "%s::bigint[], %s::int[], %s::bool[], %s::float8[])"
                ),
                [list(col) for col in cols],
            )
        self._revisions.clear()
        self._vectors.clear()
        self._memories.clear()

    def finish(self) -> None:
        """Write what is batched, keep the row-key sequence past every key written, and
        update the live counts (the store calls this before it commits)."""
        self._flush()
        if self._max_seq:
            self._conn.execute(
                self._t(
                    "SELECT setval('{rid_seq}', greatest(%s, (SELECT coalesce(max(rid), 0) "
                    "FROM {revisions}), 1))"
                ),
                (self._max_seq,),
            )
        for ns, (rows, tokens) in sorted(self._live.items()):
            self._conn.execute(
                self._t(
                    "UPDATE {namespaces} SET live_count = live_count + %s, live_tokens = "
                    "live_tokens + %s WHERE name = %s"
                ),
                (rows, tokens, ns),
            )


def _revision_row(mem: Any, rev: Any, live: bool, tokens: int, rid: int) -> tuple[Any, ...]:
    return (
        mem.namespace,
        rid,
        mem.memory_id,
        rev.revision,
        rev.text,
        float(rev.importance),
        rev.metadata,
        float(rev.created_at),
        rev.content_hash,
        live,
        tokens,
        rev.thread,
        rev.position,
        rev.derived_from,
    )
