"""Small real stores with a pattern a model can learn (or, on purpose, cannot), for the training
tests: every query's pool comes from a real ``Memory.search``.

For topic ``i`` the store holds three memories: ``d{i}a`` holds every query term but no number
(the coarse order puts it first), ``d{i}b`` holds two query terms and a count ("7 items"),
``d{i}c`` one query term. Which one is relevant is the test's choice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import rankseam


def query(i: int) -> str:
    return f"how many alpha{i} bravo{i} charlie{i}"


def topic_records(i: int) -> list[dict[str, Any]]:
    return [
        {"id": f"d{i}a", "text": f"alpha{i} bravo{i} charlie{i} were seen, not counted"},
        {"id": f"d{i}b", "text": f"alpha{i} bravo{i} came to 7 items in all"},
        {"id": f"d{i}c", "text": f"alpha{i} is a word on its own"},
    ]


def open_store(path: Path, topics: Iterable[int]) -> Any:
    memory = rankseam.open_memory(str(path), create=True)
    memory.ingest(record for i in topics for record in topic_records(i))
    return memory


def write_judgements(path: Path, lines: Iterable[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path
