"""Hard deletes in the PostgreSQL store: ``forget`` (some memories) and ``reset`` (a whole
namespace), a memory's history, and what a hard delete leaves (docs/store.md, "Forgetting";
docs/plugins/postgres.md, "Forgetting and the bytes on disk").

One write transaction, after the namespace's lock: the live revisions' postings are deleted
and their terms' document frequencies lowered (with the namespace's live count and token
total), then every vector row, revision row and the memory's row of the memories are deleted;
the ``forgotten`` table keeps each id and the time. The GIN (metadata) and HNSW (vectors)
indexes follow the rows: an index entry of a deleted row is never returned by a query (its
heap tuple is dead), and ``VACUUM`` (autovacuum, or one the operator runs) removes the
entries and makes the space reusable. The bytes of dead tuples stay in the
table's and index's pages until new rows overwrite them, and in the write-ahead log and base
backups until those are recycled: PostgreSQL does not zero freed space (``VACUUM FULL``
rewrites a table into new files; the old files' blocks are returned to the file system, not
wiped).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from rankseam.plugin.stores import Forgotten, MemoryNotFoundError, StoredMemory
from rankseam_postgres.tables import COLUMNS, Executes, retire_row

__all__ = ["FORGOTTEN", "forget_memories", "forgotten_at", "history", "missing"]

#: The table of forgotten memories (schema version 5).
FORGOTTEN = """
CREATE TABLE IF NOT EXISTS {s}.forgotten (
    namespace text NOT NULL,
    memory_id text NOT NULL,
    forgotten_at double precision NOT NULL,
    PRIMARY KEY (namespace, memory_id)
)
"""

Tables = Callable[[str], sql.Composed]


def forgotten_at(conn: Executes, t: Tables, namespace: str, memory_id: str) -> float | None:
    """When ``memory_id`` of ``namespace`` was forgotten (None: never, or stored again)."""
    row = conn.execute(
        t(
            "SELECT f.forgotten_at FROM {forgotten} f WHERE f.namespace = %s AND "
            "f.memory_id = %s AND NOT EXISTS (SELECT 1 FROM {memories} m WHERE "
            "m.namespace = f.namespace AND m.memory_id = f.memory_id)"
        ),
        (namespace, memory_id),
    ).fetchone()
    return None if row is None else float(row[0])


def missing(conn: Executes, t: Tables, namespace: str, memory_id: str) -> MemoryNotFoundError:
    """The error for a memory that is not there: forgotten (and when), or unknown."""
    at = forgotten_at(conn, t, namespace, memory_id)
    if at is not None:
        return MemoryNotFoundError.forgotten(namespace, memory_id, at)
    return MemoryNotFoundError.no_memory(namespace, memory_id)


def history(conn: Executes, t: Tables, namespace: str, memory_id: str) -> list[StoredMemory]:
    """Every revision of a memory, oldest first, with its tombstone state (in one read)."""
    rows = conn.execute(
        t(
            f"SELECT {COLUMNS}, m.deleted FROM {{memories}} m JOIN {{revisions}} r "
            "ON r.namespace = m.namespace AND r.memory_id = m.memory_id "
            "WHERE m.namespace = %s AND m.memory_id = %s ORDER BY r.revision"
        ),
        (namespace, memory_id),
    ).fetchall()
    if not rows:
        raise missing(conn, t, namespace, memory_id)
    return [StoredMemory.from_row(row) for row in rows]


def forget_memories(
    conn: psycopg.Connection[Any],
    t: Tables,
    version: int,
    namespace: str,
    memory_ids: Sequence[str] | None,
) -> Forgotten:
    """Remove the memories ``memory_ids`` of ``namespace`` (None: all of them) inside the
    caller's write transaction, which holds the namespace's lock and commits ``version``."""
    now = time.time()
    if memory_ids is None:
        ids = [r[0] for r in conn.execute(
            t("SELECT memory_id FROM {memories} WHERE namespace = %s"), (namespace,)
        ).fetchall()]  # fmt: skip
    else:
        ids = [r[0] for r in conn.execute(
            t("SELECT memory_id FROM {memories} WHERE namespace = %s AND memory_id = ANY(%s)"),
            (namespace, list(dict.fromkeys(memory_ids))),
        ).fetchall()]  # fmt: skip
    if not ids:
        return Forgotten(namespace, 0, 0, now)
    rows = conn.execute(
        t("SELECT rid, live FROM {revisions} WHERE namespace = %s AND memory_id = ANY(%s)"),
        (namespace, ids),
    ).fetchall()
    rids = [int(r[0]) for r in rows]
    live, tokens = 0, 0
    for rid in (int(r[0]) for r in rows if r[1]):  # postings and terms of the live ones
        count = retire_row(conn, t, version, namespace, rid)
        if count is not None:
            live, tokens = live + 1, tokens + count
    conn.execute(
        t("DELETE FROM {vectors} WHERE namespace = %s AND rid = ANY(%s)"), (namespace, rids)
    )
    conn.execute(
        t("DELETE FROM {revisions} WHERE namespace = %s AND rid = ANY(%s)"), (namespace, rids)
    )
    conn.execute(
        t("DELETE FROM {memories} WHERE namespace = %s AND memory_id = ANY(%s)"),
        (namespace, ids),
    )
    conn.execute(
        t(
            "INSERT INTO {forgotten}(namespace, memory_id, forgotten_at) SELECT %s, u, %s "
            "FROM unnest(%s::text[]) AS u ON CONFLICT (namespace, memory_id) DO UPDATE "
            "SET forgotten_at = excluded.forgotten_at"
        ),
        (namespace, now, ids),
    )
    conn.execute(
        t("DELETE FROM {terms} WHERE namespace = %s AND df <= 0"), (namespace,)
    )  # lexemes no live revision holds any more: not even the word stays
    conn.execute(
        t(
            "UPDATE {namespaces} SET version = %s, vector_epoch = vector_epoch + 1, "
            "live_count = live_count - %s, live_tokens = live_tokens - %s WHERE name = %s"
        ),
        (version, live, tokens, namespace),
    )
    return Forgotten(namespace, len(ids), len(rids), now)
