from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import rankseam
from rankseam.testing import block_off_host_connections, sample_memory


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    """A store holding the kit's ``SAMPLE_MEMORIES`` (two near-duplicate dinners, two others)."""
    with sample_memory(tmp_path / "memories.sqlite3") as mem:
        yield mem


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network: a connection to another host fails at once with
    NetworkBlocked (loopback and Unix sockets still work, so servers the tests start on
    127.0.0.1 are reached). A test that must reach another host opts out by name here."""
    block_off_host_connections(monkeypatch)
