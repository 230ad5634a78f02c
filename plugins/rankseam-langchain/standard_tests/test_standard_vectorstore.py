"""LangChain's own standard vector store suite (``langchain-tests``'
``VectorStoreIntegrationTests``) against ``RankseamVectorStore`` over a real SQLite store in
a temporary directory. ``nox -s langchain-standard`` runs it (docs/integrations.md).

The suite embeds with its own deterministic fake (``get_embeddings()``) and expects the
exact document first: the store embeds with it through rankseam's ``langchain`` embedder
(``RankseamVectorStore.open(path, embedding=...)``). A second run uses rankseam's own
default embedder, so the store's behaviour does not hang on the suite's embeddings. Every
test of the suite runs (sync, async and get-by-ids): none is skipped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from rankseam_langchain import LangChainEmbedder, RankseamVectorStore


class TestWithTheSuitesEmbeddings(VectorStoreIntegrationTests):
    """The suite's fake embeddings, as a LangChain application's own model would be."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[RankseamVectorStore]:  # type: ignore[override]
        with RankseamVectorStore.open(
            tmp_path / "memories.sqlite3", embedding=self.get_embeddings()
        ) as store:
            assert isinstance(store.memory.embedder, LangChainEmbedder)  # the suite's, not ours
            assert store.embeddings is not None
            yield store


class TestWithRankseamsEmbedder(VectorStoreIntegrationTests):
    """rankseam's configured embedder (the default one: no model, no download)."""

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Iterator[RankseamVectorStore]:  # type: ignore[override]
        with RankseamVectorStore.open(tmp_path / "memories.sqlite3") as store:
            assert store.embeddings is None
            yield store
