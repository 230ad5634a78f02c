"""Row-level writes that every writer of the store shares (the store's own writes and its bulk
writer): one place for retiring a revision and for announcing a namespace's change."""

from __future__ import annotations

import sqlite3

__all__ = [
    "INDEX_VALUES",
    "INSERT_REVISION",
    "INSERT_VECTOR",
    "bump",
    "index_values",
    "retire",
    "vector_state",
]

#: One revision row: (rid, namespace, memory_id, revision, text, importance, metadata,
#: created_at, content_hash, live, thread, position, derived_from).
INSERT_REVISION = (
    "INSERT INTO revisions(rid, namespace, memory_id, revision, text, importance, metadata, "
    "created_at, content_hash, live, thread, position, derived_from) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
#: The metadata values of revisions ``r`` (a WHERE clause on ``r`` follows): one row per
#: top-level key, typed as filters compare them (schema: ``METADATA_VALUES``).
INDEX_VALUES = (
    "INSERT INTO metadata_values(rid, namespace, key, kind, text_value, num_value) "
    "SELECT r.rid, r.namespace, j.key, "
    "CASE j.type WHEN 'text' THEN 'text' WHEN 'integer' THEN 'number' WHEN 'real' THEN 'number' "
    "WHEN 'true' THEN 'bool' WHEN 'false' THEN 'bool' ELSE 'other' END, "
    "CASE j.type WHEN 'text' THEN j.value END, "
    "CASE j.type WHEN 'integer' THEN j.value WHEN 'real' THEN j.value WHEN 'true' THEN 1 "
    "WHEN 'false' THEN 0 END "
    "FROM revisions r, json_each(r.metadata) j"
)
#: One vector row: (space, rid, vector).
INSERT_VECTOR = "INSERT INTO vectors(space, rid, vector) VALUES (?, ?, ?)"


def bump(
    conn: sqlite3.Connection, namespace: str, *, vectors: bool = False, space: str | None = None
) -> None:
    """Announce a committed change of ``namespace``: a new version (retired rows drop out of
    every process's caches) and, with ``vectors=True``, a new vector epoch of every space
    (vectors were written for revisions that may be cached elsewhere); with ``space``, a new
    vector epoch of that space only (the other spaces' caches and indexes stay valid)."""
    conn.execute(
        "INSERT INTO namespaces(name, version) VALUES (?, 1) "
        "ON CONFLICT(name) DO UPDATE SET version = version + 1",
        (namespace,),
    )
    if vectors:
        conn.execute(
            "UPDATE namespaces SET vector_epoch = vector_epoch + 1 WHERE name = ?", (namespace,)
        )
    if space is not None:
        conn.execute(
            "INSERT INTO space_epochs(namespace, space, epoch) VALUES (?, ?, 1) "
            "ON CONFLICT(namespace, space) DO UPDATE SET epoch = epoch + 1",
            (namespace, space),
        )


def vector_state(conn: sqlite3.Connection, namespace: str, space: str) -> tuple[int, int]:
    """``namespace``'s version and the vector epoch of ``space`` in it (the namespace's
    epoch plus the space's own): what a cached matrix or an ANN index of the space records."""
    row = conn.execute(
        "SELECT n.version, n.vector_epoch + coalesce((SELECT e.epoch FROM space_epochs e "
        "WHERE e.namespace = n.name AND e.space = ?), 0) FROM namespaces n WHERE n.name = ?",
        (space, namespace),
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def index_values(conn: sqlite3.Connection, first: int, last: int | None = None) -> None:
    """Index the metadata values of the revisions ``first..last`` (one when ``last`` is
    None), as they become live (with their full-text row)."""
    conn.execute(
        f"{INDEX_VALUES} WHERE r.rid BETWEEN ? AND ?", (first, first if last is None else last)
    )


def retire(conn: sqlite3.Connection, rid: int) -> None:
    """Take a revision out of search (it stays readable by its ref)."""
    ns, text = conn.execute(
        "SELECT namespace, text FROM revisions WHERE rid = ?", (rid,)
    ).fetchone()
    row = conn.execute("SELECT version FROM namespaces WHERE name = ?", (ns,)).fetchone()
    next_version = (row[0] if row else 0) + 1  # the version this transaction commits
    conn.execute(
        "UPDATE revisions SET live = 0, retired_version = ? WHERE rid = ?", (next_version, rid)
    )
    conn.execute("INSERT INTO fts(fts, rowid, text) VALUES ('delete', ?, ?)", (rid, text))
    conn.execute("DELETE FROM metadata_values WHERE rid = ?", (rid,))
