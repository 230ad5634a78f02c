"""Haystack's own document-store suites against RankseamDocumentStore over a real SQLite store
in a temp dir: haystack.testing.document_store's DocumentStoreBaseTests (count, write, delete,
filter) and the extended set (DocumentStoreBaseExtendedTests: delete all, delete by filter,
update by filter; and count by filter), and the async classes of
haystack.testing.document_store_async for the same operations. Haystack's metadata
introspection suites (unique values, min/max, field info) are not mixed in: the store does not
implement those optional methods."""

from __future__ import annotations

import pytest
from haystack.dataclasses import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.testing import document_store_async as async_suites
from haystack.testing.document_store import (
    CountDocumentsByFilterTest,
    DocumentStoreBaseExtendedTests,
)

from rankseam_haystack import RankseamDocumentStore


class OverSQLite:
    """Haystack's suites define a ``document_store`` fixture that each store overrides: the
    conftest's store over a real SQLite file (a mixin listed first, so that it wins)."""

    @pytest.fixture
    def document_store(self, sqlite_store: RankseamDocumentStore) -> RankseamDocumentStore:
        return sqlite_store


class TestDocumentStoreBase(OverSQLite, DocumentStoreBaseExtendedTests, CountDocumentsByFilterTest):
    """Every test of Haystack's base and extended suites, unchanged but for the one it asks
    each store to write itself: the default policy's behaviour."""

    def test_write_documents(self, document_store: RankseamDocumentStore) -> None:
        """The default policy (``DuplicatePolicy.NONE``) is FAIL here, as in Haystack's
        in-memory store: a stored id refuses the whole batch, and nothing is written."""
        doc = Document(content="test doc")
        assert document_store.write_documents([doc]) == 1
        other = Document(content="another doc")
        with pytest.raises(DuplicateDocumentError):
            document_store.write_documents([other, doc])
        assert document_store.filter_documents() == [doc]


class TestDocumentStoreAsync(
    OverSQLite,
    async_suites.CountDocumentsAsyncTest,
    async_suites.CountDocumentsByFilterAsyncTest,
    async_suites.DeleteAllAsyncTest,
    async_suites.DeleteByFilterAsyncTest,
    async_suites.DeleteDocumentsAsyncTest,
    async_suites.FilterDocumentsAsyncTest,
    async_suites.UpdateByFilterAsyncTest,
    async_suites.WriteDocumentsAsyncTest,
):
    """Haystack's async suites for the same operations (it has no one base class for them),
    through the ``*_async`` methods."""

    @pytest.mark.asyncio
    async def test_write_documents_async(self, document_store: RankseamDocumentStore) -> None:
        doc = Document(content="test doc")
        assert await document_store.write_documents_async([doc]) == 1
        with pytest.raises(DuplicateDocumentError):
            await document_store.write_documents_async([Document(content="x"), doc])
        assert await document_store.filter_documents_async() == [doc]
