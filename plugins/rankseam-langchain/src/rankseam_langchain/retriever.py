"""A LangChain retriever over a rankseam ``Memory``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from rankseam import Memory
from rankseam.plugin import hits_metadata, search_arguments
from rankseam.types import SearchResult

__all__ = ["RankseamRetriever"]


class RankseamRetriever(BaseRetriever):
    """Search a rankseam ``Memory`` from LangChain.

    Each hit becomes a ``Document`` (``id`` = the memory id) whose metadata holds
    ``namespace``, ``memory_id``, ``revision`` (the exact stored revision it cites), ``score``
    (coarse), ``rerank_score`` (the reranker's own, when it gave one), ``matched_by``,
    ``memory_metadata`` (what was stored with the memory) and ``rerank_trace`` (the seam's
    trace: policy id, status, selected ranks, usage, latency; ``None`` without a reranker).

    ``reranker``: a registered reranker name (``"mmr"``), ``"none"`` for the coarse order, or
    ``None`` (the default) for the memory's configured default. The caller owns ``memory``
    and closes it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    memory: Memory
    k: int = 4
    namespace: str | None = None
    reranker: str | None = None
    reranker_options: Mapping[str, Any] | None = None
    pool: int | None = None
    on_error: str | None = None
    include_trace: bool = True

    def _documents(self, result: SearchResult) -> list[Document]:
        metadata = hits_metadata(result, with_trace=self.include_trace)
        return [
            Document(page_content=hit.text, id=hit.ref.memory_id, metadata=meta)
            for hit, meta in zip(result.hits, metadata, strict=True)
        ]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(self.memory.search(query, self.k, **search_arguments(self)))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self._documents(await self.memory.asearch(query, self.k, **search_arguments(self)))
