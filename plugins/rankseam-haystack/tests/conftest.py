from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Haystack reports pipeline usage over the network unless told not to; the tests run offline.
os.environ["HAYSTACK_TELEMETRY_ENABLED"] = "False"

from rankseam.testing import block_off_host_connections
from rankseam_haystack import RankseamDocumentStore


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "documents.sqlite3"


@pytest.fixture
def sqlite_store(store_path: Path) -> Iterator[RankseamDocumentStore]:
    """A document store over a real, empty SQLite store in a temp dir."""
    store = RankseamDocumentStore(store_path)
    yield store
    store.close()


@pytest.fixture
def document_store(sqlite_store: RankseamDocumentStore) -> RankseamDocumentStore:
    """The store the tests use (Haystack's suites override ``document_store`` in their
    classes: test_haystack_suite.OverSQLite gives them this one)."""
    return sqlite_store


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test runs off the network: a connection to another host fails at once with
    NetworkBlocked (loopback and Unix sockets still work)."""
    block_off_host_connections(monkeypatch)
