from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import rankseam

#: Two near-duplicate memories about the same dinner, and two others.
MEMORIES = [
    ("dinner-1", "Dana's birthday dinner is on Friday at the Thai place"),
    ("dinner-2", "Dana's birthday dinner is Friday at the Thai place on Main Street"),
    ("standup", "Moved the weekly standup to 9:30"),
    ("cat", "Bob's cat only eats salmon-flavoured food"),
]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    with rankseam.open_memory(tmp_path / "memories.sqlite3") as mem:
        for memory_id, text in MEMORIES:
            mem.add(text, memory_id=memory_id, metadata={"source": "test"})
        yield mem
