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


def test_identities_answers_refs_from_a_stores_rows() -> None:
    """``Identities``: key -> ref from the rows a store read (extra columns ignored), each ref
    built once; ``subset`` keeps only the keys it holds."""
    from rankseam.plugin.stores import Identities
    from rankseam.types import MemoryRef

    ids = Identities({7: ("ns", "m1", 2, "live"), 9: ("ns", "m2", 1)})
    assert dict(ids) == {7: MemoryRef("ns", "m1", 2), 9: MemoryRef("ns", "m2", 1)}
    assert list(ids) == [7, 9] and len(ids) == 2
    assert ids[7] is ids[7]
    assert 8 not in ids and "7" not in ids
    with pytest.raises(KeyError):
        ids[8]
    sub = ids.subset([9, 8])
    assert isinstance(sub, Identities) and dict(sub) == {9: MemoryRef("ns", "m2", 1)}
