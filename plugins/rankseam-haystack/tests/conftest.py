from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Haystack reports pipeline usage over the network unless told not to; the tests run offline.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

import rankseam
from rankseam.testing import block_off_host_connections, sample_memory
from rankseam_haystack import RankseamDocumentStore


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "documents.sqlite3"


@pytest.fixture
def document_store(store_path: Path) -> Iterator[RankseamDocumentStore]:
    """A document store over a real, empty SQLite store in a temp dir."""
    store = RankseamDocumentStore(store_path)
    yield store
    store.close()


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[rankseam.Memory]:
    """A store holding the kit's ``SAMPLE_MEMORIES`` (two near-duplicate dinners, two others)."""
    with sample_memory(tmp_path / "memories.sqlite3") as mem:
        yield mem


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network: a connection to another host fails at once with
    NetworkBlocked (loopback and Unix sockets still work)."""
    block_off_host_connections(monkeypatch)
