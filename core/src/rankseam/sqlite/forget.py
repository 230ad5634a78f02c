"""Hard deletes in the SQLite store: ``forget`` (some memories) and ``reset`` (a whole
namespace), and what they leave (docs/store.md, "Forgetting").

One write transaction removes every revision of the memories: the full-text entries of the
live one (FTS5 ``delete``, with the text that was indexed), its metadata values, every
vector, every revision row and the memory's row; the ``forgotten`` table keeps the id and
the time. The namespace gets a new version and vector epoch, so every process's vector
matrix is reloaded and every ANN index of the namespace is ignored (its files are removed
after the commit, :meth:`~rankseam.sqlite.ann.AnnIndexes.discard`): no index can bring a
forgotten key back.

Where the bytes go. Every store connection runs with ``PRAGMA secure_delete=ON``, so SQLite
overwrites deleted cells and freed pages with zeros (also when an update moves a row); a
forget then merges the full-text index (FTS5 ``optimize``: FTS5 before SQLite 3.42 keeps a
deleted row's terms in older segments until a merge; from 3.42 its ``secure-delete`` option
removes them at once, and is used instead) and, after the commit, checkpoints the write-ahead
log and truncates it (``PRAGMA wal_checkpoint(TRUNCATE)``), whose older frames still hold
the pages as they were before the forget. A reader holding an older snapshot at that moment
keeps those frames until the next checkpoint after it ends.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Sequence

from rankseam.sqlite.reader import chunks
from rankseam.sqlite.rows import bump
from rankseam.store.rows import Forgotten

__all__ = ["FTS5_SECURE_DELETE", "checkpoint", "forget_memories", "forgotten_at"]

log = logging.getLogger("rankseam.store")

#: Whether this SQLite's FTS5 has the ``secure-delete`` option (3.42 on).
FTS5_SECURE_DELETE = sqlite3.sqlite_version_info >= (3, 42, 0)
#: Ids per lookup statement (2 parameters each with the namespace).
_ID_CHUNK = 400


def forgotten_at(conn: sqlite3.Connection, namespace: str, memory_id: str) -> float | None:
    """When ``memory_id`` of ``namespace`` was forgotten (None: it never was, or it was
    stored again since)."""
    row = conn.execute(
        "SELECT forgotten_at FROM forgotten f WHERE namespace = ? AND memory_id = ? AND NOT "
        "EXISTS (SELECT 1 FROM memories m WHERE m.namespace = f.namespace AND m.memory_id = "
        "f.memory_id)",
        (namespace, memory_id),
    ).fetchone()
    return None if row is None else float(row[0])


def forget_memories(
    conn: sqlite3.Connection, namespace: str, memory_ids: Sequence[str] | None
) -> Forgotten:
    """Remove the memories ``memory_ids`` of ``namespace`` (None: all of them) inside the
    caller's write transaction (see the module docstring); what was removed."""
    if memory_ids is None:
        ids = [mid for (mid,) in conn.execute(
            "SELECT memory_id FROM memories WHERE namespace = ?", (namespace,)
        )]  # fmt: skip
    else:
        ids = []
        for i in range(0, len(memory_ids), _ID_CHUNK):
            chunk = list(dict.fromkeys(memory_ids[i : i + _ID_CHUNK]))
            marks = ",".join("?" * len(chunk))
            ids.extend(
                mid
                for (mid,) in conn.execute(
                    f"SELECT memory_id FROM memories WHERE namespace = ? AND memory_id IN "
                    f"({marks})",
                    (namespace, *chunk),
                )
            )
        ids = list(dict.fromkeys(ids))
    now = time.time()
    if not ids:
        return Forgotten(namespace, 0, 0, now)
    rids: list[int] = []
    _fts_secure_delete(conn, True)
    for i in range(0, len(ids), _ID_CHUNK):
        chunk = ids[i : i + _ID_CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT rid, live, text FROM revisions WHERE namespace = ? AND memory_id IN ({marks})",
            (namespace, *chunk),
        ).fetchall()
        for rid, live, text in rows:
            rids.append(int(rid))
            if live:  # only live revisions are in the full-text index
                conn.execute(
                    "INSERT INTO fts(fts, rowid, text) VALUES ('delete', ?, ?)", (rid, text)
                )
        conn.executemany(
            "INSERT INTO forgotten(namespace, memory_id, forgotten_at) VALUES (?, ?, ?) "
            "ON CONFLICT(namespace, memory_id) DO UPDATE SET forgotten_at = excluded.forgotten_at",
            [(namespace, mid, now) for mid in chunk],
        )
        conn.execute(
            f"DELETE FROM memories WHERE namespace = ? AND memory_id IN ({marks})",
            (namespace, *chunk),
        )
    for chunk_rids in chunks(rids):
        marks = ",".join("?" * len(chunk_rids))
        for table in ("metadata_values", "vectors", "revisions"):
            conn.execute(f"DELETE FROM {table} WHERE rid IN ({marks})", chunk_rids)
    if FTS5_SECURE_DELETE:  # pragma: no cover - depends on the SQLite build
        _fts_secure_delete(conn, False)
    else:
        # FTS5 keeps a deleted row's terms in older segments until they merge: merge them all
        conn.execute("INSERT INTO fts(fts) VALUES ('optimize')")
    bump(conn, namespace, vectors=True)
    return Forgotten(namespace, len(ids), len(rids), now)


def _fts_secure_delete(conn: sqlite3.Connection, on: bool) -> None:
    """Turn FTS5's ``secure-delete`` on or off for the store's index (SQLite 3.42 on; the
    option is stored with the index, so it is on only inside a forget's transaction)."""
    if FTS5_SECURE_DELETE:  # pragma: no cover - depends on the SQLite build
        conn.execute("INSERT INTO fts(fts, rank) VALUES ('secure-delete', ?)", (int(on),))


def checkpoint(conn: sqlite3.Connection, path: str) -> bool:
    """Copy the write-ahead log into the database and truncate it (on ``conn``, outside a
    transaction); False when a reader of an older snapshot kept part of it (logged: the
    next checkpoint after that reader ends removes it)."""
    busy, _frames, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    if busy:
        log.info(
            "the write-ahead log of %s could not be truncated after a forget (a reader holds "
            "an older snapshot); the next checkpoint after it ends removes the old pages",
            path,
            extra={"event": "store.forget_checkpoint_busy"},
        )
    return not busy
