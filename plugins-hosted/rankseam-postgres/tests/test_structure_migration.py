"""A memory's thread, position and derived_from in the PostgreSQL store: a store written by
rankseam-postgres at a93b0df (schema version 2; fixtures/store-a93b0df.sql, written by
fixtures/make_a93b0df.py with that code and dumped by pg_dump) opens and migrates with the
fields empty, and the thread lookups are index ranges (their plans)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import psycopg

import rankseam
from rankseam.types import MemoryRef
from rankseam_postgres.reader import NEIGHBOURS
from rankseam_postgres.schema import SCHEMA_VERSION

DUMP = Path(__file__).parent / "fixtures" / "store-a93b0df.sql"


def _load_old_store(pg_server: Any) -> str:
    """The old store restored into a schema of its own; its URL."""
    schema = "old_" + uuid.uuid4().hex[:10]
    dump = DUMP.read_text().replace("a93b0df", schema)
    # psql's own commands (pg_dump's \\restrict guard) are not SQL
    dump = "\n".join(line for line in dump.splitlines() if not line.startswith("\\"))
    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(dump.encode())  # no parameters: the dump's statements run as one script
    return str(pg_server.url(schema))


def test_a_store_written_by_a93b0df_opens_and_migrates(pg_server: Any) -> None:
    url = _load_old_store(pg_server)
    schema = url.rsplit("schema=", 1)[1].split("&")[0]
    with psycopg.connect(pg_server.base_url) as conn:
        version = conn.execute(
            f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
        ).fetchone()
    assert version == ("2",)
    with rankseam.open_memory(url, reranker=None) as m:
        assert m.store.schema_version == SCHEMA_VERSION
        stored = {s.ref.memory_id: s for s in m.list()}
        assert sorted(stored) == ["t1", "t2"]
        assert stored["t2"].ref.revision == 2
        assert all((s.thread, s.position, s.derived_from) == (None,) * 3 for s in stored.values())
        assert m.get("t3").deleted
        assert (
            m.get(MemoryRef("default", "t2", 1)).text == "Melanie painted a sunrise over the lake."
        )
        hits = m.search("Melanie painted a sunrise", limit=1)
        assert hits[0].ref.memory_id == "t2" and hits[0].thread is None
        m.add("a turn", memory_id="t4", thread="s", position=1)
        m.add("the next", memory_id="t5", thread="s", position=2)
        m.add("a fact", memory_id="f", derived_from="t4")
        assert m.get("f").derived_from == "t4"
        with m.store.read() as reader:
            key = reader.resolve(m.get("t4").ref)
            assert key is not None
            (after,) = reader.neighbours([key], 1, 1)[key].after
            assert reader.memories([after])[after].ref.memory_id == "t5"
    with psycopg.connect(pg_server.base_url) as conn:
        indexes = {
            name
            for (name,) in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s", (schema,)
            )
        }
    assert {"revisions_thread", "revisions_derived"} <= indexes


def test_thread_lookups_are_index_ranges(pg_server: Any, pg_url: str) -> None:
    """The neighbours statement reads ``revisions_thread`` (no sequential scan of the
    revisions), as does a thread between two positions; the memories derived from one read
    ``revisions_derived`` (plans with sequential scans turned off, as on a large store)."""
    with rankseam.open_memory(pg_url, reranker=None) as m:
        m.ingest(
            [{"id": f"t{i}", "text": f"turn {i}", "thread": "s", "position": i} for i in range(50)]
            + [{"id": "f", "text": "fact", "derived_from": "t3"}]
        )
        schema = pg_url.rsplit("schema=", 1)[1].split("&")[0]
        key = 0
        with m.store.read() as reader:
            found = reader.resolve(m.get("t10").ref)
            assert found is not None
            key = found
    with psycopg.connect(pg_server.base_url) as conn:
        conn.execute(f"ANALYZE {schema}.revisions")
        conn.execute("SET enable_seqscan = off")

        def plan(query: str, params: Any) -> str:
            rows = conn.execute(("EXPLAIN " + query).encode(), params).fetchall()
            return "\n".join(row[0] for row in rows)

        neighbours = NEIGHBOURS.replace("{revisions}", f"{schema}.revisions")
        got = plan(neighbours, {"keys": [key], "before": 2, "after": 2})
        assert "revisions_thread" in got and "Seq Scan" not in got, got
        window = plan(
            f"SELECT rid FROM {schema}.revisions WHERE namespace = %s AND thread = %s AND live "
            "AND position BETWEEN %s AND %s ORDER BY position, rid",
            ("default", "s3", 3.0, 90.0),
        )
        assert "revisions_thread" in window and "Seq Scan" not in window, window
        derived = plan(
            f"SELECT rid FROM {schema}.revisions WHERE namespace = %s AND derived_from = %s "
            "AND live",
            ("default", "t3"),
        )
        assert "revisions_derived" in derived, derived
