"""LangChain's own standard retriever suite (``langchain-tests``' ``RetrieversIntegrationTests``)
against ``RankseamRetriever`` over a real store: once in the coarse order, once with the mmr
reranker. ``nox -s langchain-standard`` runs it (docs/integrations.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

import rankseam
from rankseam.testing import sample_memory
from rankseam_langchain import RankseamRetriever


class _OverAStore(RetrieversIntegrationTests):
    """The suite over the kit's sample memory (four memories; the suite asks for 1 and 3)."""

    memory: rankseam.Memory
    settings: ClassVar[dict[str, Any]] = {}

    @pytest.fixture(autouse=True)
    def _store(self, tmp_path: Path) -> Iterator[None]:
        with sample_memory(tmp_path / "memories.sqlite3") as memory:
            self.memory = memory
            yield

    @property
    def retriever_constructor(self) -> type[RankseamRetriever]:
        return RankseamRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self.memory, **self.settings}

    @property
    def retriever_query_example(self) -> str:
        return "when is dana's birthday dinner?"


class TestCoarse(_OverAStore):
    settings: ClassVar[dict[str, Any]] = {"reranker": "none"}


class TestWithMMR(_OverAStore):
    settings: ClassVar[dict[str, Any]] = {"reranker": "mmr", "reranker_options": {"lambda": 0.5}}
