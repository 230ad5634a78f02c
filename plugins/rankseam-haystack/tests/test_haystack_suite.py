"""Haystack's own document-store suites (haystack.testing.document_store: DocumentStoreBaseTests,
and the async classes of haystack.testing.document_store_async) against RankseamDocumentStore
over a real SQLite store in a temp dir (the ``document_store`` fixture of conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from haystack.dataclasses import Document
from haystack.document_stores.errors import DuplicateDocumentError
from haystack.testing.document_store import DocumentStoreBaseTests
from haystack.testing.document_store_async import (
    CountDocumentsAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    WriteDocumentsAsyncTest,
)

from rankseam_haystack import RankseamDocumentStore


class TestDocumentStoreBase(DocumentStoreBaseTests):
    """Every test of Haystack's base suite, unchanged but for the one it asks each store to
    write itself: the default policy's behaviour."""

    @pytest.fixture
    def document_store(self, tmp_path: Path) -> Iterator[RankseamDocumentStore]:
        """A document store over a real, empty SQLite store in a temp dir."""
        store = RankseamDocumentStore(tmp_path / "documents.sqlite3")
        yield store
        store.close()

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
    CountDocumentsAsyncTest,
    DeleteDocumentsAsyncTest,
    FilterDocumentsAsyncTest,
    WriteDocumentsAsyncTest,
):
    """Haystack's async suites (it has no one base class for them): count, delete, filter and
    write through the ``*_async`` methods."""

    @pytest.fixture
    def document_store(self, tmp_path: Path) -> Iterator[RankseamDocumentStore]:
        """A document store over a real, empty SQLite store in a temp dir."""
        store = RankseamDocumentStore(tmp_path / "documents.sqlite3")
        yield store
        store.close()

    @pytest.mark.asyncio
    async def test_write_documents_async(self, document_store: RankseamDocumentStore) -> None:
        doc = Document(content="test doc")
        assert await document_store.write_documents_async([doc]) == 1
        with pytest.raises(DuplicateDocumentError):
            await document_store.write_documents_async([Document(content="x"), doc])
        assert await document_store.filter_documents_async() == [doc]
