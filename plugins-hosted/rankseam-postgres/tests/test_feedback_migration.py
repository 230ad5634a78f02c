"""Feedback in the PostgreSQL store (the kit's FeedbackContract runs in test_conformance): a
version 5 store (before the feedback table) opens, migrates to the current version and keeps
feedback; feedback is a table of its own, led by the namespace like every other, and the
memories' tables hold nothing of it."""

from __future__ import annotations

from typing import Any

import psycopg

import rankseam
from rankseam_postgres.schema import SCHEMA_VERSION


def _schema(url: str) -> str:
    return url.rsplit("schema=", 1)[1].split("&")[0]


def test_a_version_5_store_migrates_and_keeps_feedback(pg_server: Any, pg_url: str) -> None:
    schema = _schema(pg_url)
    with rankseam.open_memory(pg_url, reranker=None) as m:
        m.add("Ada drinks green tea", memory_id="tea")
    with psycopg.connect(pg_server.base_url, autocommit=True) as conn:  # as version 5 left it
        conn.execute(f"DROP TABLE {schema}.feedback")
        conn.execute(f"UPDATE {schema}.meta SET value = '5' WHERE key = 'schema_version'")
    with rankseam.open_memory(pg_url, reranker=None) as m:
        assert m.store.schema_version == SCHEMA_VERSION == 6
        result = m.search("green tea", 1)
        record = m.feedback(result, used=["tea"], note="migrated")
        assert m.feedback_records() == [record]
        assert m.get("tea").text == "Ada drinks green tea"
    with psycopg.connect(pg_server.base_url) as conn:
        version = conn.execute(
            f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
        ).fetchone()
        key = conn.execute(
            "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
            "AND a.attnum = i.indkey[0] WHERE i.indrelid = %s::regclass AND i.indisprimary",
            (f"{schema}.feedback",),
        ).fetchone()
        texts = conn.execute(f"SELECT count(*) FROM {schema}.revisions").fetchone()
    assert version == (str(SCHEMA_VERSION),)
    assert key == ("namespace",)  # sharded with the memories
    assert texts == (1,)  # feedback wrote no revision
