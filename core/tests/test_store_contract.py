"""The embedded SQLite store passes the store conformance kit (rankseam.testing.StoreContract),
opened by a plain path and by a ``sqlite:///`` URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from rankseam.testing import StoreContract


class TestSQLiteStoreByPath(StoreContract):
    @pytest.fixture
    def store_target(self, tmp_path: Path) -> str:
        return str(tmp_path / "kit.sqlite3")


class TestSQLiteStoreByURL(StoreContract):
    # the URL form runs the same standard tests; the costly process tests run once (above)
    waived_tests = {
        "test_concurrent_writers_in_processes_lose_nothing": "covered by TestSQLiteStoreByPath",
        "test_a_killed_writer_leaves_only_whole_batches": "covered by TestSQLiteStoreByPath",
        "test_a_killed_reembed_resumes_where_it_stopped": "covered by TestSQLiteStoreByPath",
    }

    @pytest.fixture
    def store_target(self, tmp_path: Path) -> str:
        return "sqlite://" + str(tmp_path / "kit by url.sqlite3").replace(" ", "%20")
