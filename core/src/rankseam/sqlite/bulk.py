"""Bulk rows in and out of the store, each inside one transaction the store opens
(:meth:`SQLiteStore.bulk_read`, :meth:`SQLiteStore.bulk_write`). Snapshots use them; the SQL of
the store's tables stays in the store package."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from rankseam.embedding import EmbedderDescriptor
from rankseam.sqlite.rows import INSERT_REVISION, INSERT_VECTOR, bump, index_values, retire
from rankseam.store import rows
from rankseam.store.records import MemoryRows, RevisionRow

__all__ = ["SQLiteBulkReader", "SQLiteBulkWriter"]

#: Revisions per batched insert of a clean import.
_BATCH = 2000


class SQLiteBulkReader:
    """The whole store, read in one read transaction."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def spaces(self) -> list[rows.SpaceRow]:
        """Every registered embedder space, by key."""
        return [
            rows.SpaceRow(key, json.loads(desc))
            for key, desc in self._conn.execute("SELECT key, descriptor FROM spaces ORDER BY key")
        ]

    def vectors_outside(self, spaces: Sequence[str]) -> int:
        """How many stored vectors belong to none of ``spaces``."""
        marks = ",".join("?" * len(spaces))
        return int(
            self._conn.execute(
                f"SELECT count(*) FROM vectors WHERE space NOT IN ({marks})"
                if spaces
                else "SELECT count(*) FROM vectors",
                tuple(spaces),
            ).fetchone()[0]
        )

    def write_order(self) -> rows.WriteOrder:
        """The row keys in write order and the number of revisions; ``None`` when the keys are
        already ``1..N`` (a revision's position is then its key)."""
        n, lo, hi = self._conn.execute(
            "SELECT count(*), min(rid), max(rid) FROM revisions"
        ).fetchone()
        return rows.WriteOrder.of(
            n,
            lo,
            hi,
            lambda: (r for (r,) in self._conn.execute("SELECT rid FROM revisions ORDER BY rid")),
        )

    def revisions(self, spaces: Sequence[str]) -> Iterator[rows.BulkRevision]:
        """Every revision of every memory, ordered by (namespace, memory id, revision), with
        its vector (bytes or None) in each of ``spaces``."""
        joins = "".join(
            f" LEFT JOIN vectors v{i} ON v{i}.space = ? AND v{i}.rid = r.rid"
            for i in range(len(spaces))
        )
        vector_cols = "".join(f", v{i}.vector" for i in range(len(spaces)))
        for row in self._conn.execute(
            "SELECT m.namespace, m.memory_id, m.deleted, m.deleted_at, m.head_revision, "
            "r.rid, r.revision, r.text, r.importance, r.metadata, r.created_at, "
            f"r.content_hash, r.live, r.thread, r.position, r.derived_from{vector_cols} "
            "FROM memories m JOIN revisions r "
            f"ON r.namespace = m.namespace AND r.memory_id = m.memory_id{joins} "
            "ORDER BY m.namespace, m.memory_id, r.revision",
            list(spaces),
        ):
            width = rows.BulkRevision.WIDTH
            yield rows.BulkRevision.from_columns(row[:width], row[width:])


class SQLiteBulkWriter:
    """Bulk rows written in one write transaction. Clean inserts keep the source's write order
    (row key = ``seq``); appends take fresh row keys. The store bumps every namespace written
    to when the transaction commits."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._revisions: list[tuple[Any, ...]] = []
        self._fts: list[tuple[int, str]] = []
        self._vectors: list[tuple[str, int, bytes]] = []
        self._memories: list[tuple[Any, ...]] = []
        self._touched: set[str] = set()
        self.revisions_written = 0
        self.vectors_written = 0

    def counts(self) -> rows.StoreCounts:
        """How many memories and revisions the store holds now."""
        memories = self._conn.execute("SELECT count(*) FROM memories").fetchone()[0]
        revisions = self._conn.execute("SELECT count(*) FROM revisions").fetchone()[0]
        return rows.StoreCounts(int(memories), int(revisions))

    def register_space(self, descriptor: EmbedderDescriptor) -> None:
        self._conn.execute(
            "INSERT OR IGNORE INTO spaces(key, descriptor) VALUES (?, ?)",
            (descriptor.key, json.dumps(descriptor.to_dict(), sort_keys=True)),
        )

    def insert(self, mem: MemoryRows) -> None:
        """Insert a memory the store does not hold, every row key its revision's ``seq``."""
        last = len(mem.revisions)
        for rev in mem.revisions:
            live = rev.revision == last and not mem.deleted
            self._revisions.append(_revision_row(mem, rev, live, rid=rev.seq))
            if live:
                self._fts.append((rev.seq, rev.text))
            self._vectors.extend((key, rev.seq, blob) for key, blob in rev.vectors)
        head = mem.revisions[-1]
        self._memories.append(
            (mem.namespace, mem.memory_id, head.seq, last, int(mem.deleted), mem.deleted_at)
        )
        self._touched.add(mem.namespace)
        if len(self._revisions) >= _BATCH:
            self._flush()

    def head(self, namespace: str, memory_id: str) -> rows.MemoryHead | None:
        """A memory's head, or None when the store does not hold it."""
        row = self._conn.execute(
            f"SELECT {rows.MemoryHead.COLUMNS} FROM memories m JOIN revisions r "
            "ON r.rid = m.head_rid WHERE m.namespace = ? AND m.memory_id = ?",
            (namespace, memory_id),
        ).fetchone()
        return None if row is None else rows.MemoryHead.from_row(row)

    def history(self, namespace: str, memory_id: str, upto: int) -> list[rows.RevisionDigest]:
        """Revisions ``1..upto`` of a memory, oldest first."""
        return [
            rows.RevisionDigest(*row)
            for row in self._conn.execute(
                "SELECT revision, content_hash, importance, metadata, thread, position, "
                "derived_from FROM revisions WHERE "
                "namespace = ? AND memory_id = ? AND revision <= ? ORDER BY revision",
                (namespace, memory_id, upto),
            )
        ]

    def retire(self, rid: int) -> None:
        """Take a revision out of search (it stays readable by its ref)."""
        retire(self._conn, rid)

    def append(self, mem: MemoryRows, revisions: Sequence[RevisionRow]) -> None:
        """Add ``revisions`` (the newest part of ``mem``) with fresh row keys, and set the
        memory's head and tombstone to ``mem``'s."""
        last = len(mem.revisions)
        rid = 0
        for rev in revisions:
            live = rev.revision == last and not mem.deleted
            cur = self._conn.execute(
                "INSERT INTO revisions(namespace, memory_id, revision, text, importance, "
                "metadata, created_at, content_hash, live, thread, position, derived_from) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                _revision_row(mem, rev, live)[1:],
            )
            rid = int(cur.lastrowid or 0)
            if live:
                self._conn.execute("INSERT INTO fts(rowid, text) VALUES (?, ?)", (rid, rev.text))
                index_values(self._conn, rid)
            self._conn.executemany(INSERT_VECTOR, [(key, rid, blob) for key, blob in rev.vectors])
            self.revisions_written += 1
            self.vectors_written += len(rev.vectors)
        self._conn.execute(
            "INSERT INTO memories(namespace, memory_id, head_rid, head_revision, deleted, "
            "deleted_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(namespace, memory_id) DO UPDATE "
            "SET head_rid = excluded.head_rid, head_revision = excluded.head_revision, "
            "deleted = excluded.deleted, deleted_at = excluded.deleted_at",
            (mem.namespace, mem.memory_id, rid, last, int(mem.deleted), mem.deleted_at),
        )
        self._touched.add(mem.namespace)

    def _flush(self) -> None:
        c = self._conn
        c.executemany(INSERT_REVISION, self._revisions)
        c.executemany("INSERT INTO fts(rowid, text) VALUES (?, ?)", self._fts)
        for rid, _text in self._fts:
            index_values(c, rid)
        c.executemany(INSERT_VECTOR, self._vectors)
        c.executemany(
            "INSERT INTO memories(namespace, memory_id, head_rid, head_revision, deleted, "
            "deleted_at) VALUES (?, ?, ?, ?, ?, ?)",
            self._memories,
        )
        self.revisions_written += len(self._revisions)
        self.vectors_written += len(self._vectors)
        self._revisions.clear()
        self._fts.clear()
        self._vectors.clear()
        self._memories.clear()

    def finish(self) -> None:
        """Write what is batched and bump every namespace written to (the store calls this
        before it commits)."""
        self._flush()
        for ns in sorted(self._touched):
            bump(self._conn, ns, vectors=True)


def _revision_row(mem: MemoryRows, rev: RevisionRow, live: bool, rid: int = 0) -> tuple[Any, ...]:
    return (
        rid,
        mem.namespace,
        mem.memory_id,
        rev.revision,
        rev.text,
        rev.importance,
        rev.metadata,
        rev.created_at,
        rev.content_hash,
        int(live),
        rev.thread,
        rev.position,
        rev.derived_from,
    )
