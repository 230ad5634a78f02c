"""The lexical channel drops terms found in more than ``max_df`` of a large store's memories
(docs/store.md), and only those."""

from __future__ import annotations

from pathlib import Path

import rankseam


def _search(db: Path, max_df: float) -> list[str]:
    config = {"search": {"sources": ["lexical"]}, "sources": {"lexical": {"max_df": max_df}}}
    with rankseam.open_memory(db, config=config) as memory:
        result = memory.search("common zebra", 50, pool=50, reranker=None)
        return [hit.ref.memory_id for hit in result.hits]


def test_a_frequent_term_is_dropped_and_a_rare_one_kept(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite3"
    records = [{"id": f"m{i:04d}", "text": f"common filler number {i}"} for i in range(1200)]
    for i in (7, 300, 900):
        records[i]["text"] += " zebra"
    with rankseam.open_memory(db) as memory:
        memory.ingest(records)
    # "common" is in every memory (above 0.2 of them): only the zebra memories remain.
    assert sorted(_search(db, 0.2)) == ["m0007", "m0300", "m0900"]
    # With pruning off, "common" matches too and fills the 50 hits.
    unpruned = _search(db, 1.0)
    assert len(unpruned) == 50 and {"m0007", "m0300", "m0900"} <= set(unpruned)
