"""Another application's SQLite file is refused WITHOUT being changed (not even switched to
WAL), whatever command opens it; and what namespaces share in the lexical channel's statistics
(docs/store.md, "Namespaces")."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rankseam import ConfigurationError, open_memory

RANKSEAM = str(Path(sys.executable).with_name("rankseam"))


def _meta_without_columns(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE meta (a, b)")
    conn.execute("INSERT INTO meta VALUES (1, 2)")


def _meta_with_null_version(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', NULL), ('tokenizer', 'porter')")


def _meta_with_text_version(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', 'two'), ('tokenizer', 'porter')")


def _meta_of_another_app(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('app', 'notes'), ('version', '7')")


def _other_tables(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes(body) VALUES ('keep me')")


FOREIGN: dict[str, Callable[[sqlite3.Connection], None]] = {
    "meta-without-columns": _meta_without_columns,
    "meta-with-null-version": _meta_with_null_version,
    "meta-with-text-version": _meta_with_text_version,
    "meta-of-another-app": _meta_of_another_app,
    "other-tables": _other_tables,
}


def _foreign(path: Path, make: Callable[[sqlite3.Connection], None]) -> str:
    conn = sqlite3.connect(path)
    make(conn)
    conn.commit()
    conn.close()
    return _fingerprint(path)


def _fingerprint(path: Path) -> str:
    """The file's bytes, and which side files exist (a WAL switch creates ``-wal``)."""
    sides = sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name + "-"))
    return hashlib.sha256(path.read_bytes()).hexdigest() + repr(sides)


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_a_foreign_file_is_refused_and_left_unchanged(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "other-app.db"
    before = _foreign(path, FOREIGN[kind])
    for create in (False, True):
        with pytest.raises(ConfigurationError, match="not a rankseam store") as info:
            open_memory(path, create=create)
        assert "left unchanged" in str(info.value)
        assert _fingerprint(path) == before
    assert _journal_mode(path) == "delete"


@pytest.mark.parametrize("command", [["search", "hello"], ["add", "hello"], ["stats"]])
def test_every_command_refuses_a_foreign_file_without_touching_it(
    tmp_path: Path, command: list[str]
) -> None:
    path = tmp_path / "other-app.db"
    before = _foreign(path, _meta_with_null_version)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RANKSEAM_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "no-user-config")
    done = subprocess.run(
        [RANKSEAM, *command, "--db", str(path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert "not a rankseam store" in done.stderr
    assert _fingerprint(path) == before
    assert _journal_mode(path) == "delete"


def test_a_rankseam_store_and_an_empty_file_still_open(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()  # e.g. made by mkstemp: becomes a new store
    with open_memory(empty) as memory:
        memory.add("a first memory", memory_id="one")
    with open_memory(empty, create=False) as memory:
        assert memory.get("one").text == "a first memory"
    # a store another process holds open (its WAL is live) opens too
    with open_memory(empty) as first, open_memory(empty, create=False) as second:
        first.add("written while the other is open", memory_id="two")
        assert second.get("two").text == "written while the other is open"


def _lexical_scores(memory_path: Path, query: str) -> dict[str, float]:
    with open_memory(memory_path, sources=["lexical"]) as memory:
        hits = memory.search(query, namespace="alice", limit=10).hits
        return {h.ref.memory_id: h.channel_scores["lexical"] for h in hits}


def test_namespaces_share_lexical_statistics_but_never_memories(tmp_path: Path) -> None:
    """What docs/store.md says: one namespace's writes can change the BM25 scores (and so
    the order) of another's lexical channel, because FTS5 keeps one index with store-wide
    statistics; they never let a search see another namespace's memories."""
    path = tmp_path / "tenants.sqlite3"
    with open_memory(path) as memory:
        memory.ingest(
            [
                {"id": "a1", "text": "the lantern festival by the river"},
                {"id": "a2", "text": "a quiet walk by the river at dusk"},
                {"id": "a3", "text": "lantern repairs and paper shades"},
            ],
            namespace="alice",
        )
    before = _lexical_scores(path, "lantern river")
    with open_memory(path) as memory:  # another tenant writes many memories with one term
        memory.ingest([{"text": f"river report number {i}"} for i in range(200)], namespace="bob")
    after = _lexical_scores(path, "lantern river")
    assert set(after) == set(before) == {"a1", "a2", "a3"}  # only alice's memories
    assert after != before  # ... but their BM25 scores moved: statistics are shared
