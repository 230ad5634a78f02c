"""Hard deletes in PostgreSQL, checked in the tables themselves: after ``forget`` and
``reset`` no row of the memories is left in revisions, vectors, postings or memories, the
terms only they held are gone, the namespace's live count and token total drop by theirs,
and ``forgotten`` keeps the id and the time; a ``VACUUM`` then removes their index entries
(docs/plugins/postgres.md, "Forgetting and the bytes on disk")."""

from __future__ import annotations

from typing import Any

import psycopg

import rankseam

MARKER = "zanzibarquokka"


def _rows(conn: Any, schema: str) -> dict[str, int]:
    one = lambda sql: conn.execute(sql.format(s=schema)).fetchone()[0]  # noqa: E731
    return {
        "revisions": one("SELECT count(*) FROM {s}.revisions WHERE memory_id = 'secret'"),
        "texts": one(f"SELECT count(*) FROM {{s}}.revisions WHERE text LIKE '%{MARKER}%'"),
        "vectors": one(
            "SELECT count(*) FROM {s}.vectors v WHERE NOT EXISTS (SELECT 1 FROM {s}.revisions r "
            "WHERE r.namespace = v.namespace AND r.rid = v.rid)"
        ),
        "postings": one(f"SELECT count(*) FROM {{s}}.postings WHERE lexeme LIKE '{MARKER}%'"),
        "terms": one(f"SELECT count(*) FROM {{s}}.terms WHERE lexeme LIKE '{MARKER}%'"),
        "memories": one("SELECT count(*) FROM {s}.memories WHERE memory_id = 'secret'"),
        "forgotten": one("SELECT count(*) FROM {s}.forgotten WHERE memory_id = 'secret'"),
        "live": one("SELECT live_count FROM {s}.namespaces WHERE name = 'default'"),
    }


def test_forget_and_reset_leave_no_row(pg_server: Any, pg_url: str) -> None:
    schema = pg_url.rsplit("schema=", 1)[1].split("&")[0]
    with rankseam.open_memory(pg_url, reranker=None) as memory:
        memory.add("a memory that stays", memory_id="keep")
        memory.add(f"the {MARKER} note", memory_id="secret", metadata={"code": MARKER})
        memory.update("secret", f"revised {MARKER} note")
        with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
            before = _rows(conn, schema)
        assert before["revisions"] == 2 and before["postings"] == 1 and before["live"] == 2

        assert memory.forget("secret").revisions == 2

        with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
            after = _rows(conn, schema)
            conn.execute(f"VACUUM {schema}.revisions")  # the dead rows' index entries go
            (metadata_hits,) = conn.execute(
                f"SELECT count(*) FROM {schema}.revisions WHERE metadata::jsonb @> %s::jsonb",
                (f'{{"code": "{MARKER}"}}',),
            ).fetchone()
        assert after == {
            "revisions": 0,
            "texts": 0,
            "vectors": 0,
            "postings": 0,
            "terms": 0,
            "memories": 0,
            "forgotten": 1,
            "live": 1,
        }
        assert metadata_hits == 0
        assert all(MARKER not in h.text for h in memory.search(MARKER).hits)
        assert memory.reset("default", confirm=True).memories == 1
        with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
            (left,) = conn.execute(
                f"SELECT count(*) FROM {schema}.revisions WHERE namespace = 'default'"
            ).fetchone()
            (live,) = conn.execute(
                f"SELECT live_count FROM {schema}.namespaces WHERE name = 'default'"
            ).fetchone()
        assert (left, live) == (0, 0)
