"""A LlamaIndex retriever over a rankseam ``Memory``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from rankseam import Memory
from rankseam.plugin import hits_metadata, search_arguments
from rankseam.types import SearchResult

__all__ = ["TRACE_KEYS", "RankseamRetriever"]

#: Metadata keys kept out of what LlamaIndex sends to an LLM or an embedder.
TRACE_KEYS = ["score", "rerank_score", "matched_by", "rerank_trace", "memory_metadata"]


class RankseamRetriever(BaseRetriever):
    """Search a rankseam ``Memory`` from LlamaIndex.

    Each hit becomes a ``NodeWithScore``: a ``TextNode`` (``id_`` = the memory id) whose
    metadata holds ``namespace``, ``memory_id``, ``revision`` (the exact stored revision it
    cites), ``score`` (coarse), ``rerank_score`` (the reranker's own, when it gave one),
    ``matched_by``, ``memory_metadata`` and ``rerank_trace`` (the seam's trace; ``None``
    without a reranker). The node's score is the coarse score; the nodes come in the
    reranker's order. Trace keys are excluded from the LLM's and the embedder's view.

    ``reranker``: a registered name (``"mmr"``), ``"none"`` for the coarse order, or ``None``
    (default) for the memory's configured default. The caller owns ``memory`` and closes it.
    """

    def __init__(
        self,
        memory: Memory,
        *,
        k: int = 4,
        namespace: str | None = None,
        reranker: str | None = None,
        reranker_options: Mapping[str, Any] | None = None,
        pool: int | None = None,
        on_error: str | None = None,
        include_trace: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.memory = memory
        self.k = k
        self.namespace = namespace
        self.reranker = reranker
        self.reranker_options = reranker_options
        self.pool = pool
        self.on_error = on_error
        self.include_trace = include_trace

    def _nodes(self, result: SearchResult) -> list[NodeWithScore]:
        out = []
        metadata = hits_metadata(result, with_trace=self.include_trace)
        for hit, meta in zip(result.hits, metadata, strict=True):
            node = TextNode(
                text=hit.text,
                id_=hit.ref.memory_id,
                metadata=meta,
                excluded_llm_metadata_keys=list(TRACE_KEYS),
                excluded_embed_metadata_keys=list(TRACE_KEYS),
            )
            out.append(NodeWithScore(node=node, score=hit.score))
        return out

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._nodes(
            self.memory.search(query_bundle.query_str, self.k, **search_arguments(self))
        )

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        result = await self.memory.asearch(query_bundle.query_str, self.k, **search_arguments(self))
        return self._nodes(result)
