"""SQLite -> PostgreSQL -> SQLite with `rankseam export` / `rankseam import` keeps every
memory, revision, tombstone, text and vector byte for byte: the final SQLite store exports the
very snapshot (same snapshot id) the first one did. On the LoCoMo dev conversations (one
namespace each, turns and observations as memories, some updated and deleted)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import data_dir

import rankseam


def _run(*args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(Path(sys.executable).with_name("rankseam")), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _locomo_records(path: Path) -> Iterator[dict[str, Any]]:
    for sample in json.loads(path.read_text(encoding="utf-8")):
        ns = str(sample["sample_id"])
        conversation = sample["conversation"]
        for key, turns in conversation.items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    text = f"{turn.get('speaker', '')}: {turn.get('text', '')}"
                    yield {"namespace": ns, "id": turn["dia_id"], "text": text}
        n = 0
        for per_speaker in (sample.get("observation") or {}).values():
            for facts in per_speaker.values():
                for fact in facts or ():
                    if isinstance(fact, list) and fact and isinstance(fact[0], str):
                        n += 1
                        yield {"namespace": ns, "id": f"obs-{n}", "text": fact[0]}


def _everything(db: str) -> list[tuple[Any, ...]]:
    """Every revision of every memory: identity, text, importance, metadata, created_at,
    content hash, tombstone."""
    out = []
    with rankseam.open_memory(db, create=False) as memory:
        for ns in memory.namespaces():
            for head in memory.list(ns, include_deleted=True):
                for rev in range(1, head.ref.revision + 1):
                    m = memory.get(rankseam.MemoryRef(ns, head.ref.memory_id, rev))
                    out.append(
                        (
                            *m.ref.to_dict().values(),
                            m.text,
                            m.importance,
                            json.dumps(dict(m.metadata), sort_keys=True),
                            m.created_at,
                            m.content_hash,
                            m.deleted,
                        )
                    )
    return sorted(out)


def test_locomo_sqlite_postgres_sqlite_round_trip(pg_url: str, tmp_path: Path) -> None:
    folder = data_dir()
    if folder is None:
        pytest.skip("locomo-dev.json not found: set RANKSEAM_DATA to ../shared/data to run this")
    first = str(tmp_path / "first.sqlite3")
    with rankseam.open_memory(first) as memory:
        memory.ingest(_locomo_records(folder / "locomo-dev.json"))
        for ns in memory.namespaces():
            heads = [m.ref.memory_id for m in memory.list(ns)]
            for mid in heads[:20]:
                memory.update(mid, memory.get(mid, namespace=ns).text + " (edited)", namespace=ns)
            for mid in heads[20:25]:
                memory.delete(mid, namespace=ns)
            for mid in heads[25:27]:
                memory.delete(mid, namespace=ns)
                memory.add("came back after a delete", memory_id=mid, namespace=ns)
    exported = _run("export", str(tmp_path / "snap1"), "--db", first)
    assert exported["memories"] > 3900
    _run("import", str(tmp_path / "snap1"), "--db", pg_url)
    _run("export", str(tmp_path / "snap2"), "--db", pg_url)
    last = str(tmp_path / "last.sqlite3")
    _run("import", str(tmp_path / "snap2"), "--db", last)
    again = _run("export", str(tmp_path / "snap3"), "--db", last)
    assert again["snapshot_id"] == exported["snapshot_id"]  # byte-identical content
    before = _everything(first)
    assert _everything(pg_url) == before
    assert _everything(last) == before
    snap1 = (tmp_path / "snap1" / "memories.jsonl").read_bytes()
    assert (tmp_path / "snap2" / "memories.jsonl").read_bytes() == snap1
    assert (tmp_path / "snap3" / "memories.jsonl").read_bytes() == snap1


def test_same_memories_at_the_same_revisions_after_the_move(pg_url: str, tmp_path: Path) -> None:
    """Search on the moved store finds the same memories at the same revisions (the lexical
    scores differ: BM25 over PostgreSQL's lexemes, not FTS5's)."""
    db = str(tmp_path / "small.sqlite3")
    texts = [
        f"the {c} bicycle of neighbour {i} needs a new {p}"
        for i, (c, p) in enumerate(
            [("red", "chain"), ("blue", "tyre"), ("green", "bell"), ("black", "seat")] * 10
        )
    ]
    with rankseam.open_memory(db) as memory:
        memory.ingest({"id": f"b{i}", "text": t} for i, t in enumerate(texts))
        memory.update("b3", "the black bicycle was sold")
        memory.delete("b7")
    _run("export", str(tmp_path / "snap"), "--db", db)
    _run("import", str(tmp_path / "snap"), "--db", pg_url)
    with rankseam.open_memory(db) as lite, rankseam.open_memory(pg_url) as pg:
        for query in ("red bicycle chain", "black bicycle sold", "neighbour 7 bell"):
            a = lite.search(query, 5, reranker=None).hits
            b = pg.search(query, 5, reranker=None).hits
            assert {h.ref for h in a} == {h.ref for h in b}, query
