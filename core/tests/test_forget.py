"""History and hard deletes on the embedded SQLite store, where the bytes can be checked: a
forgotten text is gone from the database file and its write-ahead log, from the FTS5 index
(its shadow tables included), from the ANN index and from a later snapshot; the API's
confirmation of ``reset``, the async twins, and the ``history`` / ``forget`` / ``reset``
commands in a real process (the confirmation asked on a real terminal). The rules every store
follows are the kit's (``rankseam.testing.store_forget``, run by test_store_contract.py)."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import rankseam
from rankseam.errors import ValidationError

MARKER = "zanzibarquokka"
RANKSEAM = str(Path(sys.executable).with_name("rankseam"))


@pytest.fixture
def env(monkeypatch):
    for var in ("RANKSEAM_DB", "RANKSEAM_RERANK", "RANKSEAM_NAMESPACE", "RANKSEAM_EMBEDDER"):
        monkeypatch.delenv(var, raising=False)


def _fill(memory, start: int, n: int) -> None:
    memory.ingest(
        {"id": f"f{i}", "text": f"filler {i} about harbours, boats and tides " * 4}
        for i in range(start, start + n)
    )


def _store_bytes(path: Path) -> bytes:
    return b"".join(
        p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists()
    ).lower()  # FTS5 stores terms lower-cased


def _write_secret(memory) -> None:
    """Three revisions that carry the marker (long ones spill into overflow pages), between
    enough other memories that pages split and rows move."""
    _fill(memory, 0, 300)
    memory.add(
        f"the {MARKER} note " + "long " * 800,
        memory_id="secret",
        metadata={"code": f"{MARKER}-meta", "tag": "t"},
        thread=f"{MARKER}-thread",
    )
    _fill(memory, 300, 100)
    memory.update("secret", f"revised {MARKER} note " + "pad " * 400)
    memory.update("secret", f"final {MARKER} note", metadata={"code": f"{MARKER}-m3"})
    _fill(memory, 400, 100)


def test_forgotten_text_leaves_the_file_the_fts_index_and_later_snapshots(env, tmp_path):
    path = tmp_path / "store.sqlite3"
    with rankseam.open_memory(path) as memory:
        _write_secret(memory)
        memory.export_snapshot(tmp_path / "before")
        assert MARKER.encode() in (tmp_path / "before" / "memories.jsonl").read_bytes()
        assert MARKER.encode() in _store_bytes(path)
        assert memory.search(MARKER).hits[0].ref.memory_id == "secret"

        done = memory.forget("secret")
        assert (done.memories, done.revisions) == (1, 3)

        # the write-ahead log was checkpointed and truncated by the forget itself
        assert os.path.getsize(f"{path}-wal") == 0
        assert MARKER.encode() not in _store_bytes(path)
        assert all(MARKER not in h.text for h in memory.search(MARKER).hits)
        memory.export_snapshot(tmp_path / "after")
        for file in (tmp_path / "after").iterdir():
            assert MARKER.encode() not in file.read_bytes().lower(), file.name
        assert memory.get("f7").text.startswith("filler 7")
    assert MARKER.encode() not in _store_bytes(path)

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert conn.execute("PRAGMA secure_delete").fetchone() is not None
        assert conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (MARKER,)).fetchall() == []
        for table in ("fts_data", "fts_idx", "fts_docsize", "fts_config"):
            for row in conn.execute(f"SELECT * FROM {table}"):
                assert MARKER.encode() not in repr(row).lower().encode(), table
        assert conn.execute(
            "SELECT count(*) FROM metadata_values WHERE text_value LIKE ?", (f"%{MARKER}%",)
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM revisions WHERE memory_id = 'secret'"
        ).fetchone() == (0,)
        assert conn.execute("SELECT memory_id FROM forgotten").fetchall() == [("secret",)]
        # the FTS index still answers for every other memory: the delete removed one row
        live = conn.execute("SELECT count(*) FROM revisions WHERE live = 1").fetchone()[0]
        assert conn.execute("SELECT count(*) FROM fts_docsize").fetchone() == (live,)
        assert conn.execute("SELECT count(*) FROM fts WHERE fts MATCH 'harbours'").fetchone() == (
            500,
        )
    finally:
        conn.close()


def test_the_connections_zero_what_they_delete(env, tmp_path):
    with rankseam.open_memory(tmp_path / "s.sqlite3") as memory:
        memory.add("x")
        with memory.store.read() as reader:
            conn = reader._conn  # noqa: SLF001 - the pragma of the store's own connection
            assert conn.execute("PRAGMA secure_delete").fetchone() == (1,)


def test_a_forgotten_key_never_comes_back_from_the_ann_index(env, tmp_path, monkeypatch):
    monkeypatch.setenv("RANKSEAM_ANN", "20")
    with rankseam.open_memory(tmp_path / "ann.sqlite3") as memory:
        _fill(memory, 0, 60)
        memory.add(f"{MARKER} beacon", memory_id="secret")
        manifest = memory.maintain_index(force=True)
        assert manifest is not None and manifest.count == 61
        ann, space = memory.store.ann, memory.embedder.descriptor
        with memory.store.read() as reader:
            key = reader.resolve(memory.get("secret").ref)
        old_file = ann.folder / manifest.file
        assert old_file.exists()

        memory.forget("secret")

        assert ann.base("default", space.key) is None  # its files are gone
        assert not old_file.exists()
        query = memory.embedder.embed([f"{MARKER} beacon"])[0]
        with memory.store.read() as reader:
            found = reader.vector("default", space, query, 61)
        assert key not in set(found.row_keys.tolist())
        rebuilt = memory.maintain_index(force=True)
        assert rebuilt is not None and rebuilt.count == 60
        from usearch.index import Index

        index = Index.restore(str(ann.folder / rebuilt.file))
        assert not index.contains(np.uint64(key))
        with memory.store.read() as reader:
            found = reader.vector("default", space, query, 61)
        assert key not in set(found.row_keys.tolist())


def test_reset_needs_confirmation_and_the_async_twins_answer_as_the_sync_ones(env, tmp_path):
    with rankseam.open_memory(tmp_path / "a.sqlite3") as memory:
        memory.add("one", memory_id="a")
        memory.update("a", "two")
        memory.add("elsewhere", memory_id="b", namespace="other")

        async def run():
            history = await memory.ahistory("a")
            with pytest.raises(ValidationError, match=r"reset\('default', confirm=True\)"):
                await memory.areset("default")
            with pytest.raises(ValidationError, match="confirm=True"):
                memory.reset("default", confirm="yes")  # only True confirms
            forgotten = await memory.aforget("b", namespace="other")
            reset = await memory.areset("default", confirm=True)
            return history, forgotten, reset

        history, forgotten, reset = asyncio.run(run())
        assert [h.text for h in history] == ["one", "two"]
        assert (forgotten.namespace, forgotten.memories, forgotten.revisions) == ("other", 1, 1)
        assert (reset.memories, reset.revisions) == (1, 2)
        assert memory.namespaces() == []


def _run(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [RANKSEAM, *args, "--db", str(db)],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def _on_terminal(args: list[str], answer: str) -> tuple[int, str]:
    """Run the command with a real terminal as its stdin, stdout and stderr; type
    ``answer``; its exit status and everything it printed."""
    main, child = pty.openpty()
    proc = subprocess.Popen([RANKSEAM, *args], stdin=child, stdout=child, stderr=child)
    os.close(child)
    out = b""
    answered = False
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
        if not answered and b"[y/N]" in out:
            os.write(main, answer.encode() + b"\n")
            answered = True
    os.close(main)
    return proc.wait(timeout=120), out.decode(errors="replace")


def test_the_commands(env, tmp_path):
    db = tmp_path / "cli.sqlite3"
    with rankseam.open_memory(db) as memory:
        memory.add(f"first {MARKER}", memory_id="a")
        memory.update("a", f"second {MARKER}")
        memory.delete("a")
        memory.add("kept", memory_id="k")
        memory.add("other namespace", memory_id="o", namespace="other")

    shown = _run("history", "a", "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    assert (report["memory_id"], report["deleted"]) == ("a", True)
    assert [r["revision"] for r in report["revisions"]] == [1, 2]
    assert [r["text"] for r in report["revisions"]] == [f"first {MARKER}", f"second {MARKER}"]
    text = _run("history", "a", db=db).stdout
    assert "2 revision(s) (deleted)" in text and "r1" in text and "r2" in text

    gone = _run("forget", "a", "--json", db=db)
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["forgotten"]["revisions"] == 2
    again = _run("history", "a", "--json", db=db)
    assert again.returncode == 1
    assert "was forgotten" in json.loads(again.stderr)["error"]["message"]

    refused = _run("reset", "--namespace", "other", db=db)
    assert refused.returncode == 1 and "pass --yes" in refused.stderr
    status, out = _on_terminal(["reset", "-n", "other", "--db", str(db)], "n")
    assert status == 1 and "Forget all 1 memories of namespace 'other'" in out
    assert "Aborted" in out
    with rankseam.open_memory(db) as memory:
        assert [m.ref.memory_id for m in memory.list("other")] == ["o"]
    status, out = _on_terminal(["reset", "-n", "other", "--db", str(db)], "y")
    assert status == 0 and "forgot 1 memories (1 revisions) of namespace 'other'" in out
    done = _run("reset", "--namespace", "default", "--yes", "--json", db=db)
    assert json.loads(done.stdout)["reset"]["memories"] == 1
    with rankseam.open_memory(db) as memory:
        assert memory.namespaces() == []
    assert MARKER.encode() not in _store_bytes(db)
