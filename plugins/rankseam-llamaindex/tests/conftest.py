from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import rankseam
from rankseam.testing import sample_memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    """A store holding the kit's ``SAMPLE_MEMORIES`` (two near-duplicate dinners, two others)."""
    with sample_memory(tmp_path / "memories.sqlite3") as mem:
        yield mem
